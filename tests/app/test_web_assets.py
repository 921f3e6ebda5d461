"""The console and the offline API docs, read through the app: every asset is served from the package,
every URL a page references is local, the console page is sent with a strict Content-Security-Policy,
and the built wheel carries the static files."""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from app.web.static_files import CONSOLE_DIR, STATIC_DIR, VENDOR_DIR
from tests.conftest import ROOT, Api

# Namespaces are identifiers, not requests; anything else with a scheme would be a remote resource.
NAMESPACES = {"http://www.w3.org/2000/svg"}
URL_RE = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)<>]*""")
IMPORT_RE = re.compile(r"""^\s*import\s[^;]*?from\s+["']([^"']+)["']""", re.M)


class _Refs(HTMLParser):
    """src / href attributes of an HTML page, and the bodies of inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        self._in_script = tag == "script" and not dict(attrs).get("src")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts.append(data)


def refs(html: str) -> _Refs:
    """Parse a page's references."""
    parser = _Refs()
    parser.feed(html)
    return parser


def console_files() -> list[Path]:
    """Every file of the console (not the vendored docs assets)."""
    return sorted(p for p in CONSOLE_DIR.rglob("*") if p.is_file())


def test_console_page_is_sent_with_a_strict_csp(sqlite_api: Api) -> None:
    c = sqlite_api.client
    r = c.get("/console", follow_redirects=False)
    assert r.status_code == 308 and r.headers["location"] == "/console/"
    assert c.head("/console/").status_code == 200
    r = c.get("/console/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'self'" and directives["script-src"] == "'self'"
    assert "unsafe" not in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    page = refs(r.text)
    assert page.inline_scripts == []
    assert page.urls and all(not URL_RE.match(u) for u in page.urls), page.urls


def test_redirects_never_send_a_client_to_the_host_it_named(sqlite_api: Api) -> None:
    """Trailing-slash redirects were built from the Host header (`Host: evil.example` came back as
    `Location: http://evil.example/console/assets/`: an open redirect behind a proxy passing Host through); a
    Location on the request's own host is now its path, and the redirect still leads to the page."""
    c = sqlite_api.client
    for path, to in [
        ("/console/assets", "/console/assets/"),
        ("/vendor", "/vendor/"),
        ("/v1/datasets/", "/v1/datasets"),
        ("/v1/datasets/?limit=1", "/v1/datasets?limit=1"),
        ("/console", "/console/"),
    ]:
        r = c.get(path, headers={"host": "evil.example", **sqlite_api.h()}, follow_redirects=False)
        assert r.is_redirect and r.headers["location"] == to, (path, r.status_code, r.headers.get("location"))
    assert c.get("/v1/datasets/", headers=sqlite_api.h()).status_code == 200


def test_every_console_module_is_served_from_the_package(sqlite_api: Api) -> None:
    """Follow the ES-module graph from main.js through the app: a missing or misnamed module fails here."""
    c = sqlite_api.client
    todo, seen = ["/console/assets/js/main.js"], set()
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        r = c.get(url)
        assert r.status_code == 200, url
        assert "javascript" in r.headers["content-type"], (url, r.headers["content-type"])
        assert r.headers["cache-control"] == "no-cache"  # revalidated: an upgrade never mixes module versions
        base = url.rsplit("/", 1)[0]
        for spec in IMPORT_RE.findall(r.text):
            assert spec.startswith(("./", "../")), f"{url} imports {spec!r} (not a local module)"
            todo.append(posixpath.normpath(f"{base}/{spec}"))
    modules = {"/console/" + p.relative_to(CONSOLE_DIR).as_posix() for p in console_files() if p.suffix == ".js"}
    assert modules == seen, "a module is not reachable from main.js"
    for url in ("/console/assets/console.css", "/console/assets/favicon.svg"):
        assert c.get(url).status_code == 200


def test_console_sources_load_nothing_remote_and_build_no_html_strings() -> None:
    for path in console_files():
        text = path.read_text()
        remote = [u for u in URL_RE.findall(text) if u not in NAMESPACES]
        assert not remote, f"{path.relative_to(STATIC_DIR)} references {remote}"
        if path.suffix == ".js":  # API data reaches the page only through textContent / attributes
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
                assert sink not in text, f"{path.relative_to(STATIC_DIR)} uses {sink}"
            assert "localStorage" not in text and "document.cookie" not in text, "the key belongs in sessionStorage"


def test_docs_pages_load_only_local_assets(sqlite_api: Api) -> None:
    c = sqlite_api.client
    for page_url, needed in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = c.get(page_url)
        assert r.status_code == 200
        assert "default-src 'self'" in r.headers["content-security-policy"]
        page = refs(r.text)
        assert any(needed in u for u in page.urls), page.urls
        for u in page.urls:
            assert not URL_RE.match(u), f"{page_url} references {u}"
            assert c.get(u).status_code == 200, f"{page_url}: {u} is not served"
        assert "googleapis" not in r.text and "cdn." not in r.text
    assert '"validatorUrl": null' in c.get("/docs").text  # no badge fetched from a public validator
    assert c.get("/openapi.json").json()["components"]["securitySchemes"]["APIKeyHeader"]["name"] == "X-API-Key"


def test_vendored_bundles_are_present_with_licences_and_no_cdn() -> None:
    for name in ("swagger-ui/swagger-ui-bundle.js", "swagger-ui/swagger-ui.css", "redoc/redoc.standalone.js"):
        assert (VENDOR_DIR / name).stat().st_size > 100_000, name
    for name in ("swagger-ui/LICENSE", "swagger-ui/NOTICE", "redoc/LICENSE"):
        assert (VENDOR_DIR / name).read_text().strip(), name
    readme = (VENDOR_DIR / "README.md").read_text()
    from app.web.apidocs import REDOC_VERSION, SWAGGER_UI_VERSION

    assert f"| swagger-ui-dist | {SWAGGER_UI_VERSION} |" in readme and f"| redoc | {REDOC_VERSION} |" in readme
    assert "cdn.redoc.ly" not in (VENDOR_DIR / "redoc/redoc.standalone.js").read_text()


def test_the_wheel_and_the_image_carry_the_static_files(tmp_path: Path) -> None:
    """Build the wheel from a copy of the sources (no network) and look inside; the image copies app/."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("app", "models", "worker"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = tmp_path.glob("neurules-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"app/web/" + p.relative_to(STATIC_DIR.parent).as_posix() for p in STATIC_DIR.rglob("*") if p.is_file()}
    assert expected - names == set()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY app ./app" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not any(i.startswith("app") or "static" in i for i in ignored)


def test_a_location_on_another_host_is_left_as_it_is() -> None:
    """Only a Location on the request's own Host is made relative; another host's, or a relative one, stays."""
    from app.http.redirects import relative_locations

    request = [(b"host", b"Api.Example:8000")]
    assert relative_locations([(b"location", b"http://api.example:8000/a/?q=1")], request) == [
        (b"location", b"/a/?q=1")
    ]
    assert relative_locations([(b"location", b"https://api.example:8000//b")], request) == [(b"location", b"/b")]
    for kept in [b"https://login.example/x", b"/already", b"http://api.example/no-port"]:
        assert relative_locations([(b"location", kept)], request) == [(b"location", kept)]
    assert relative_locations([(b"location", b"http://a/x")], []) == [(b"location", b"http://a/x")]


def test_every_answer_says_nosniff_once(sqlite_api: Api, doc: dict) -> None:
    """The HTML pages were sent with `X-Content-Type-Options: nosniff`, the API's JSON, text and CSV answers
    (the prediction route dispatched directly among them) without: every answer now carries it, once."""
    c, h = sqlite_api.client, sqlite_api.h()
    v = sqlite_api.import_model(doc)
    record = {"age": 67, "income": 50, "smoker": "yes"}
    answers = [
        c.get("/v1/datasets", headers=h),
        c.get("/v1/datasets/ds_missing", headers=h),
        c.get("/v1/datasets?limit=0", headers=h),
        c.get(f"/v1/models/{v['id']}/export?format=sql&table=t", headers=h),
        c.post(f"/v1/models/{v['id']}/predict", json={"records": [record]}, headers=h),
        c.post(
            f"/v1/models/{v['id']}/predict.csv",
            files={"file": ("x.csv", b"age,income,smoker\n67,50,yes\n", "text/csv")},
            headers=h,
        ),
        c.get("/console/"),
        c.get("/healthz"),
        c.get("/v1/keys"),
    ]
    assert [r.status_code for r in answers] == [200, 404, 422, 200, 200, 200, 200, 200, 401]
    too_large = c.post("/v1/datasets", content=b"x", headers={**h, "content-length": str(10**12)})
    assert too_large.status_code == 413  # refused by the outer middleware before the body is read
    answers.append(too_large)
    for r in answers:
        assert r.headers.get_list("x-content-type-options") == ["nosniff"], (r.url, r.headers)


def test_a_500_says_nosniff_too(sqlite_api: Api, monkeypatch: Any) -> None:
    """A 500 comes from Starlette's outermost middleware, around the one adding the header: it carries it itself."""
    from fastapi.testclient import TestClient

    from app.routers import datasets

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(datasets.datasets, "list_datasets", broken)
    r = TestClient(sqlite_api.app, raise_server_exceptions=False).get("/v1/datasets", headers=sqlite_api.h())
    assert r.status_code == 500 and r.headers.get_list("x-content-type-options") == ["nosniff"], r.headers


def test_a_500_carries_the_request_id_and_its_log_line_names_it(
    sqlite_api: Api, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator probe's 500 had no X-Request-Id (every other answer has it), no Cache-Control, and its two
    logged tracebacks named no request id: nothing tied a client's report to the log. Now one traceback, with it."""
    from fastapi.testclient import TestClient

    from app.routers import datasets

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(datasets.datasets, "list_datasets", broken)
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    r = client.get("/v1/datasets", headers={**sqlite_api.h(), "X-Request-Id": "probe-500"})
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error", r.text
    assert r.headers["x-request-id"] == "probe-500" and r.headers["cache-control"] == "no-store", r.headers
    assert "probe-500" in r.json()["error"]["message"]
    logged = [x for x in caplog.records if x.exc_info and "a bug" in str(x.exc_info[1])]
    assert [getattr(x, "request_id", None) for x in logged] == ["probe-500"], logged
    from sqlalchemy.exc import ProgrammingError  # a database error that is no outage: a 500 answered in the app

    def bad_sql(*_: Any, **__: Any) -> Any:
        raise ProgrammingError("SELECT nope", {}, Exception("syntax error"))

    monkeypatch.setattr(datasets.datasets, "list_datasets", bad_sql)
    r = client.get("/v1/datasets", headers={**sqlite_api.h(), "X-Request-Id": "probe-500-db"})
    assert r.status_code == 500 and "probe-500-db" in r.json()["error"]["message"], r.text
    assert any(getattr(x, "request_id", None) == "probe-500-db" and x.exc_info for x in caplog.records)


def test_a_body_refused_for_its_length_is_answered_like_any_other(tmp_path: Path) -> None:
    """A Content-Length over the limit was answered 413 with no request id, no access line and no count in the
    latency histogram (an operator probe): it now goes through the same edge as every answer."""
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", max_upload_bytes=1000)
    api = next(gen)
    try:
        headers = {**api.h(), "X-Request-Id": "probe-413", "content-type": "text/csv"}
        r = api.client.post("/v1/datasets", content=b"a,b\n" + b"1,2\n" * 100_000, headers=headers)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
        assert r.headers["x-request-id"] == "probe-413" and r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["connection"] == "close", r.headers  # a soak probe's server read on, 943 MB in 60 s
        assert 'status="413"' in api.client.get("/metrics").text
        small = {"file": ("d.csv", b"a,b\n", "text/csv")}  # refused once its body was read: kept alive
        r = api.client.post("/v1/datasets", files=small, headers=api.h())
        assert r.status_code == 422 and "connection" not in r.headers, (r.text, r.headers)
    finally:
        gen.close()


def test_the_access_line_names_the_caller_and_the_error_code(sqlite_api: Api, caplog: pytest.LogCaptureFixture) -> None:
    """A refused request's access line said only its status (an operator probe: no error code, tenant or key, and
    a 5xx at INFO): now the tenant and key once the key was read, and the error code of every refusal."""
    from fastapi.testclient import TestClient

    from app.observability import Metrics, RequestMetricsMiddleware

    app = RequestMetricsMiddleware(sqlite_api.app, Metrics(), access_log=True)  # the app's own has its log off
    client = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level("INFO", logger="neurules.access"):
        client.get("/v1/models/nope@1", headers=sqlite_api.h())
        client.get("/v1/datasets", headers={"X-API-Key": "nr_wrong"})
        client.get("/v1/datasets", headers=sqlite_api.h())
    lines = [r for r in caplog.records if r.name == "neurules.access"][-3:]
    found = [(r.status, getattr(r, "error_code", None), getattr(r, "tenant_id", None)) for r in lines]  # type: ignore[attr-defined]
    assert found == [
        (404, "not_found", sqlite_api.tenant_a),
        (401, "invalid_api_key", None),
        (200, None, sqlite_api.tenant_a),
    ]


def test_api_answers_are_never_stored_by_caches(sqlite_api: Api, doc: dict) -> None:
    """An API answer is one tenant's data fetched with an X-API-Key header, which shared caches do not treat as
    a credential (RFC 9111 skips only Authorization): every /v1 answer, the directly dispatched prediction
    among them, says `Cache-Control: no-store`; the console's pages keep their own revalidation rule."""
    c, h = sqlite_api.client, sqlite_api.h()
    v = sqlite_api.import_model(doc)
    answers = [
        c.get("/v1/audit", headers=h),
        c.get("/v1/keys", headers=h),
        c.get(f"/v1/models/{v['id']}/export?format=sql&table=t", headers=h),
        c.post(
            f"/v1/models/{v['id']}/predict", json={"records": [{"age": 67, "income": 50, "smoker": "yes"}]}, headers=h
        ),
        c.head("/v1/datasets", headers=h),
        c.get("/v1/keys"),
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 200, 200, 401]
    for r in answers:
        assert r.headers.get_list("cache-control") == ["no-store"], (r.url, r.headers)
    assert c.get("/console/").headers.get_list("cache-control") == ["no-cache"]
