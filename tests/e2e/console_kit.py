"""Shared pieces of the console's browser tests: the real service (`neurules-admin serve`, embedded mode, a
temp data dir), Debian's Chromium driven by Playwright, a tab that records every request, script error,
5xx answer and dialog, the accessibility check (axe-core, test-only, tests/e2e/vendor/axe-core) and
screenshots under tests/artifacts/console/.

Each test module builds its own server and browser from these (module-scoped fixtures), so the modules
stay independent; `tab` fails a test whose pages left the app's origin, put the key in a URL, threw a
script error, got a 5xx or opened a dialog.
"""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.conftest import DATASETS, ROOT, skip_unless_ci
from tests.e2e.conftest import BIN, Proc, admin, clean_env, free_port, wait_ready

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "tests" / "artifacts" / "console"
AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"  # test-only (README beside it)
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
FEATURES = [f"att_{i}" for i in range(1, 13)] + ["att_13_-1.0", "att_13_0.5", "att_13_1.0"]


@dataclass
class Console:
    """The running service, an API client for checks, and the key."""

    url: str
    key: str
    proc: Proc
    api: httpx.Client
    admin_env: dict[str, str] = field(default_factory=dict)  # what `neurules-admin` needs to reach its database
    admin_cwd: Path = ROOT

    def create_key(self, label: str, scope: str) -> str:
        """Another key of the console's tenant, made as an operator makes one (`neurules-admin create-key`)."""
        return admin(["create-key", "console", "--label", label, "--scope", scope], self.admin_env, self.admin_cwd)


@dataclass
class Tab:
    """A browser page with everything it requested and every uncaught script error."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def serve_console(tmp: Path, **settings: str) -> Iterator[Console]:
    """`neurules-admin serve` as `make run` starts it, reporting progress every epoch (so curves grow);
    `settings` are extra NEURULES_* variables."""
    if not (DATASETS / "heart.csv").exists():
        skip_unless_ci(f"shared dataset missing: {DATASETS / 'heart.csv'}")
    env = clean_env(
        NEURULES_PROGRESS_EVERY_EPOCHS="1", NEURULES_AUTH_CACHE_TTL_S="0", NEURULES_ALIAS_CACHE_TTL_S="0", **settings
    )
    admin(["create-tenant", "console"], env, tmp)
    key = admin(["create-key", "console"], env, tmp)
    port = free_port()
    proc = Proc([str(BIN / "neurules-admin"), "serve", "--port", str(port)], env, tmp, tmp / "serve.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30) as api:
            yield Console(url, key, proc, api, env, tmp)
    finally:
        proc.stop()


@contextmanager
def launch_browser() -> Iterator[Any]:
    """One headless Debian Chromium for the module (scripts/browser.sh installs it)."""
    if not CHROMIUM.exists():
        skip_unless_ci(f"{CHROMIUM} missing: run scripts/browser.sh (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@contextmanager
def open_tab(browser: Any, console: Console) -> Iterator[Tab]:
    """A fresh browser context (empty sessionStorage) recording requests and script errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    t = Tab(context.new_page())
    t.page.on("request", lambda r: t.requests.append(r.url))
    t.page.on("pageerror", lambda e: t.errors.append(str(e)))
    t.page.on("response", lambda r: t.server_errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    t.page.on("dialog", lambda d: (t.dialogs.append(d.message), d.dismiss()))
    try:
        yield t
    finally:
        context.close()
    assert not t.server_errors, f"the server answered 5xx: {t.server_errors}"
    assert not t.dialogs, f"a script opened a dialog (injected markup ran?): {t.dialogs}"
    foreign = [u for u in t.requests if not same_origin(u, console.url)]
    assert not foreign, f"requests left the app's origin: {foreign}"
    assert not [u for u in t.requests if console.key in u], "the API key appeared in a URL"
    assert not t.errors, f"uncaught script errors: {t.errors}"


def same_origin(url: str, origin: str) -> bool:
    """Whether a request stays on the app (data: and blob: URLs never leave the browser)."""
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob") or f"{parts.scheme}://{parts.netloc}" == origin


UNLABELLED_CONTROLS = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter((el) => el.type !== 'hidden' && el.offsetParent !== null)
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                  && !el.getAttribute('aria-labelledby') && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map((el) => el.outerHTML.slice(0, 120))"""


SETTLE = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"  # layout done
AXE_RUN = r"""async (tags) => {
  const res = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
  const line = (v, n) => `${v.id} (${v.impact}): ${n.target.join(" ")}: ${n.failureSummary.replace(/\s+/g, " ")}`;
  return res.violations.flatMap((v) => v.nodes.map((n) => line(v, n)));
}"""


def axe_violations(tab: Tab) -> list[str]:
    """axe-core's WCAG 2.1 A/AA and best-practice violations on the page as it is now, one line per
    rule and element. Injected through DevTools (`page.evaluate`), so the page's CSP stays as served."""
    page = tab.page
    page.evaluate(SETTLE)
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
    found = page.evaluate(AXE_RUN, AXE_TAGS)
    return list(found)


def shot(tab: Tab, name: str) -> Path:
    """On a console page: every visible control has a label and axe-core finds no violation; then save a
    full-page screenshot."""
    if "/console/" in tab.page.url:
        assert tab.page.evaluate(UNLABELLED_CONTROLS) == [], f"{name}: controls without a label"
        violations = axe_violations(tab)
        assert not violations, f"{name}: accessibility violations:\n" + "\n".join(violations)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    tab.page.evaluate("() => window.scrollTo(0, 0)")  # else the sticky top bar lands mid-page in a full-page shot
    tab.page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def heart_rows(n: int) -> list[dict[str, str]]:
    """The first n rows of heart.csv as strings (target removed)."""
    with open(DATASETS / "heart.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))[:n]
    for r in rows:
        r.pop("target")
    return rows


def sign_in(tab: Tab, console: Console, key: str | None = None) -> None:
    """Open the console and sign in with the key (the console's own unless another is given)."""
    from playwright.sync_api import expect

    page = tab.page
    page.goto(f"{console.url}/console")
    page.get_by_label("API key").fill(key or console.key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Datasets", exact=True)).to_be_visible()


def start_training(tab: Tab, console: Console, dataset_id: str, *, epochs: int, seed: int, rules: int = 5) -> str:
    """Start a training job from the dataset page; returns the job id (the page is then on the job)."""
    from playwright.sync_api import expect

    page = tab.page
    page.goto(f"{console.url}/console/#/datasets/{dataset_id}")
    page.get_by_label("Target column").select_option("target")
    page.get_by_label("Rules").fill(str(rules))
    page.get_by_label("Epochs").fill(str(epochs))
    page.get_by_label("Seed").fill(str(seed))
    page.get_by_role("button", name="Start training").click()
    expect(page.get_by_role("heading", name="Training curve")).to_be_visible()
    m = re.search(r"#/jobs/(job_\w+)", page.url)
    assert m, page.url
    return m.group(1)


def loss_points(tab: Tab) -> int:
    """Points drawn in the job page's loss chart."""
    return int(tab.page.locator("figure:has(figcaption:text-is('Training loss')) svg circle").count())


def wait_job(console: Console, job_id: str, timeout: float = 120) -> dict[str, Any]:
    """Poll the API until the job has finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = console.api.get(f"/v1/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job  # type: ignore[no-any-return]
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still running after {timeout}s")


def fill_record(tab: Tab, row: dict[str, str]) -> None:
    """Type a heart.csv row into the try-a-record form."""
    for name in FEATURES:
        tab.page.get_by_label(name, exact=True).fill(row[name])


def as_record(row: dict[str, str]) -> dict[str, float]:
    """A heart.csv row as the JSON record the page sends."""
    return {k: float(row[k]) for k in FEATURES}


def require(console: Console, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """Call a governance endpoint; fail naming it when the server does not have it yet."""
    r = console.api.request(method, path, **kwargs)
    unrouted = r.status_code in (404, 405) and r.json()["error"]["message"] in ("Not Found", "Method Not Allowed")
    assert not unrouted, (
        f"governance endpoint {method} {path} is not on this server yet (docs/governance-api.md): "
        f"{r.status_code} {r.text[:200]}"
    )
    assert r.status_code < 400, f"{method} {path}: {r.status_code} {r.text[:500]}"
    return r


def train_via_api(
    console: Console, dataset_id: str, model: str, seed: int, epochs: int = 40, target: str = "target", n_rules: int = 5
) -> dict[str, Any]:
    """Train one version through the API (the console's training form has its own test)."""
    r = console.api.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset_id,
            "target": target,
            "model_name": model,
            "parameters": {"n_rules": n_rules, "epochs": epochs, "random_state": seed},
        },
    )
    assert r.status_code == 202, r.text
    job = wait_job(console, r.json()["id"])
    assert job["state"] == "succeeded", job
    return job


def cells(locator: Any) -> list[int]:
    """The counts of a heat-mapped table."""
    return [int(t.replace(",", "")) for t in locator.locator(".heat-count").all_text_contents()]


def upload_csv(console: Console, name: str, header: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    """Upload rows as a CSV dataset through the API (201 expected)."""
    from app.services.csvdata import write_csv

    data = write_csv(header, [["" if v is None else v for v in r] for r in rows]).encode()
    r = console.api.post("/v1/datasets", files={"file": ("data.csv", data, "text/csv")}, data={"name": name})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def import_model(console: Console, name: str, document: dict[str, Any]) -> dict[str, Any]:
    """Import a rule-list document as the next version of `name` (201 expected)."""
    r = console.api.post("/v1/models", json={"name": name, "rule_list": document})
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


FOCUS_RING = """(el) => { const s = getComputedStyle(el);
  return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2; }"""


def press_until(tab: Tab, key: str, target: Any, limit: int = 80) -> int:
    """Press `key` (Tab, Shift+Tab) until `target` has the focus, which must show a focus ring; the presses used."""
    for n in range(1, limit + 1):
        tab.page.keyboard.press(key)
        if target.evaluate("(el) => el === document.activeElement"):
            assert target.evaluate(FOCUS_RING), f"{target} has the focus but shows no focus ring"
            return n
    focused = tab.page.evaluate("() => document.activeElement && document.activeElement.outerHTML.slice(0, 160)")
    raise AssertionError(f"{limit} x {key} never reached {target}; the focus is on {focused}")
