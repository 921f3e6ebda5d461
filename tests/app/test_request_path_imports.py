"""The API process serves predictions without importing torch or pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_no_torch_or_pandas_on_the_request_path(tmp_path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from fastapi.testclient import TestClient
        from app.admin import create_key, create_tenant, migrate
        from app.main import create_app
        from app.settings import Settings
        from tests.conftest import FakeQueue, rule_list_doc
        url = "sqlite:///{tmp_path}/x.sqlite3"
        migrate(url)
        create_tenant(url, "t")
        _, key = create_key(url, "t")
        app = create_app(Settings(database_url=url, data_dir="{tmp_path}/var"), queue=FakeQueue())
        with TestClient(app) as c:
            h = {{"X-API-Key": key}}
            v = c.post("/v1/models", json={{"name": "m", "rule_list": rule_list_doc()}}, headers=h).json()
            r = c.post(f"/v1/models/{{v['id']}}/predict", headers=h,
                       json={{"records": [{{"age": 70, "income": 1, "smoker": "yes"}}]}})
            assert r.status_code == 200, r.text
            r = c.post(f"/v1/models/{{v['id']}}/predict.csv", headers=h,
                       files={{"file": ("x.csv", b"age,income,smoker\\n1,2,no\\n", "text/csv")}})
            assert r.status_code == 200, r.text
        bad = [m for m in ("torch", "pandas") if m in sys.modules]
        print("LOADED", bad)
        sys.exit(1 if bad else 0)
    """)
    from tests.conftest import ROOT

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
