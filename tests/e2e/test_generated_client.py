"""A client generated from `/openapi.json` by openapi-python-client runs upload -> train -> predict against a
real server (`neurules-admin serve`, embedded mode), as a backend team would use it."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import BIN, Service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PACKAGE = "neurules_generated_client"
ROWS = 120
CSV = b"age;income;smoker;target\n" + b"".join(  # `;` and decimal commas, gzip-compressed below
    f"{20 + i % 60};{i * 0.5:.1f};{'yes' if i % 3 else 'no'};{int(i % 60 >= 40)}\n".replace(".", ",").encode()
    for i in range(ROWS)
)


@pytest.fixture(scope="module")
def client_package(embedded: Service, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """Generate the client from the running server's document and import it."""
    out = tmp_path_factory.mktemp("client")
    spec = out / "openapi.json"
    spec.write_bytes(httpx.get(f"{embedded.url}/openapi.json", timeout=10).content)
    config = out / "config.yml"
    config.write_text(f"project_name_override: {PACKAGE}\npackage_name_override: {PACKAGE}\npost_hooks: []\n")
    done = subprocess.run(
        [
            *(str(BIN / "openapi-python-client"), "generate", "--path", str(spec), "--config", str(config)),
            *("--meta", "none", "--output-path", str(out / PACKAGE)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.startswith(PACKAGE)]:
            del sys.modules[name]


def _api(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.{name}")


def test_generated_client_uploads_trains_and_predicts(embedded: Service, client_package: ModuleType) -> None:
    import gzip

    m = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    client = client_package.AuthenticatedClient(
        base_url=embedded.url, token=embedded.key, prefix="", auth_header_name="X-API-Key", timeout=30
    )
    upload = m.DatasetsCreateBody(file=types.File(payload=io.BytesIO(gzip.compress(CSV)), file_name="toy.csv.gz"))
    ds = _api("datasets.datasets_create").sync(client=client, body=upload)
    assert isinstance(ds, m.DatasetPublic), ds
    assert ds.name == "toy" and ds.n_rows == ROWS
    assert {c.name: c.type_.value for c in ds.columns}["income"] == "numeric"

    params = m.TrainingParameters(n_rules=3, epochs=8, options=m.TrainingOptions(lr=0.05, n_restarts=1))
    body = m.JobCreate(dataset_id=ds.id, target="target", model_name="toy", parameters=params)
    job = _api("jobs.jobs_create").sync(client=client, body=body)
    assert isinstance(job, m.JobPublic), job
    deadline = time.monotonic() + 120
    while job.state.value not in ("succeeded", "failed", "cancelled") and time.monotonic() < deadline:
        time.sleep(0.5)
        job = _api("jobs.jobs_get").sync(client=client, job_id=job.id)
    assert job.state.value == "succeeded", job.error
    assert 0 <= job.n_rules_kept <= 3

    alias = _api("registered_models.registered_models_aliases_update").sync(
        client=client, name="toy", alias="production", body=m.AliasUpdate(version=1)
    )
    assert isinstance(alias, m.AliasPublic) and alias.version_id == job.model_version_id
    version = _api("models.models_get").sync(client=client, ref="toy@production")
    assert version.n_rules == job.n_rules_kept

    records = [{"age": 70, "income": 30.5, "smoker": "yes"}, {"age": 25, "income": None, "smoker": "no"}]
    answer = _api("predictions.models_predict").sync(
        client=client, ref="toy@production", body=m.PredictionCreate(records=records)
    )
    assert isinstance(answer, m.PredictionList), answer
    assert [p.index for p in answer.predictions] == [0, 1]
    for p in answer.predictions:
        assert p.explanation.rule_id == p.rule_id
        assert p.probability == max(p.probabilities.additional_properties.values())

    sql = _api("models.models_export").sync(client=client, ref="toy@production", format_=m.ModelsExportFormat.SQL)
    assert isinstance(sql, str) and "CASE" in sql

    missing = _api("jobs.jobs_get").sync(client=client, job_id="job_nope")
    assert isinstance(missing, m.Error) and missing.error.code == "not_found"
    bad = _api("jobs.jobs_create").sync(
        client=client,
        body=m.JobCreate.from_dict({"dataset_id": ds.id, "target": "target", "parameters": {"options": {"lr": "x"}}}),
    )
    assert isinstance(bad, m.Error) and bad.error.message == "parameters.options.lr: must be a number"
