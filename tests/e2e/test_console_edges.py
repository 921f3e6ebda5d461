"""The console as a clinician, a credit-risk officer and a model validator meet it at the edges: keyboard only;
category values and names that look like HTML or script (shown as text, never run); a list with one rule and
one with 40; a three-class model; an evaluation where every target is a class the model never saw; a version
compared with itself; monitoring with no decision, with sparse traffic (gaps, not zeros) and with a real drift
alert; a background evaluation that fails and a comparison on a file too large for a request; a training job
that failed. Every page is checked by axe-core and must show what the API says (tests/e2e/console_kit.py:
no 5xx, no script error, no dialog, nothing loaded from elsewhere).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import DATASETS, rule_list_doc
from tests.e2e.console_kit import (
    SETTLE,
    Console,
    Tab,
    import_model,
    open_tab,
    press_until,
    serve_console,
    shot,
    sign_in,
    train_via_api,
    upload_csv,
    wait_job,
)

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(300)]

SYNC_MAX_ROWS = 300  # heart-sized files are scored in the request; a 301-row file goes to the workers
EVIL = ["<script>window.__pwned = 1</script>", '<img src=x onerror="window.__pwned = 2">', 'Tom & "Jerry" <b>x</b>']


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The service for this module, with a small synchronous-evaluation limit."""
    with serve_console(
        tmp_path_factory.mktemp("console-edges"), NEURULES_EVALUATION_SYNC_MAX_ROWS=str(SYNC_MAX_ROWS)
    ) as c:
        yield c


def _url(console: Console, fragment: str) -> str:
    return f"{console.url}/console/#/{fragment}"


def test_keyboard_only_walkthrough(tab: Tab, console: Console) -> None:
    """Sign in, open a version, move an alias through the confirmation dialog and try a record, with the
    keyboard alone; every stop on the way shows a focus ring."""
    from playwright.sync_api import expect

    import_model(console, "kb-risk", rule_list_doc())
    import_model(console, "kb-risk", rule_list_doc())
    page = tab.page
    page.goto(f"{console.url}/console")
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type(console.key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Datasets", exact=True)).to_be_visible()

    press_until(tab, "Shift+Tab", page.get_by_role("link", name="Models", exact=True))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Models", exact=True, level=1)).to_be_visible()
    press_until(tab, "Tab", page.get_by_role("link", name="kb-risk", exact=True))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="kb-risk", exact=True)).to_be_visible()
    press_until(tab, "Tab", page.get_by_role("link", name="version 1", exact=True))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="kb-risk version 1")).to_be_visible()
    expect(page.locator(".rule-list > li")).to_have_count(3)

    # back to the model through its breadcrumb, then the alias: the dialog opens on Cancel, Tab reaches the move
    press_until(tab, "Shift+Tab", page.get_by_role("link", name="kb-risk", exact=True))
    page.keyboard.press("Enter")
    move = page.get_by_role("button", name="Move alias…")
    expect(move).to_be_visible()
    press_until(tab, "Tab", page.get_by_label("Point it at"))
    page.keyboard.press("ArrowDown")  # versions newest first: 2, then 1
    expect(page.get_by_label("Point it at")).to_have_value("1")
    press_until(tab, "Tab", move)
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Tab")
    expect(dialog.get_by_role("button", name="Move to version 1")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".notice-success")).to_contain_text("kb-risk@production now points at version 1")
    expect(move).to_be_focused()
    v1 = console.api.get("/v1/models/kb-risk@1").json()
    assert console.api.get("/v1/registered-models/kb-risk").json()["aliases"] == {"production": v1["id"]}

    # try a record on version 1 (the versions table's link): change the age, keep the other fields, decide
    versions = page.locator("table:has(caption:text-is('Versions, newest first'))")
    press_until(tab, "Shift+Tab", versions.get_by_role("link", name="version 1", exact=True))
    page.keyboard.press("Enter")
    press_until(tab, "Tab", page.get_by_role("link", name="Try a record"))
    page.keyboard.press("Enter")
    age = page.get_by_label("age", exact=True)
    expect(age).to_be_visible()
    press_until(tab, "Tab", age)
    page.keyboard.press("Control+A")
    page.keyboard.type("70")
    press_until(tab, "Tab", page.get_by_role("button", name="Decide", exact=True))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Decision", exact=True)).to_be_visible()
    record = {"age": 70, "income": 30, "smoker": "yes"}  # income: the training median; smoker: the first category
    answer = console.api.post("/v1/models/kb-risk@1/predict", json={"records": [record]}).json()["predictions"][0]
    expect(page.locator(".decision-value")).to_have_text(answer["prediction"])
    expect(page.get_by_role("heading", name=f"Rule {answer['rule_id']} fired")).to_be_visible()
    shot(tab, "20-keyboard-try")


def _one_rule_doc() -> dict[str, Any]:
    """One rule on a category whose values look like markup, and the default rule."""
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "label",
        "classes": ["no", "yes"],
        "features": [
            {"name": "score", "type": "numeric", "fill_value": 5.0, "min": 0.0, "max": 10.0},
            {"name": "note", "type": "categorical", "categories": [*EVIL, None]},
        ],
        "rules": [
            {
                "conditions": [{"feature": "note", "op": "in", "values": [EVIL[1], EVIL[2]]}],
                "class_counts": [5, 30],
                "probabilities": [6 / 37, 31 / 37],
            }
        ],
        "default": {"class_counts": [60, 5], "probabilities": [61 / 67, 6 / 67]},
        "smoothing": 1.0,
        "metadata": {},
    }


def test_a_profile_shows_hidden_characters_as_the_rules_do(tab: Tab, console: Console) -> None:
    """A level holding a bidi override showed raw in the dataset's profile ("ok\u202eevil" read "oklive"), while
    the rules built from it show it escaped: the profile shows it as rule text does, quoted with the escape."""
    from playwright.sync_api import expect

    from models.rulelist import RuleList

    level = "ok\u202eevil"
    ds = upload_csv(console, "hidden characters", ["score", "note", "label"], [[i, level, i % 2] for i in range(12)])
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"datasets/{ds['id']}"))
    pill = page.locator("table:has(caption:text-is('Column profile')) .value-pill", has_text="evil")
    expect(pill).to_have_count(1)
    shown = pill.text_content()
    assert shown == '"ok\\u202eevil"' and "\u202e" not in (shown or ""), shown
    doc = _one_rule_doc()
    doc["features"][1]["categories"] = [level, None]
    doc["rules"][0]["conditions"][0]["values"] = [level]
    assert shown in RuleList.from_dict(doc).to_text()  # as the rule text writes the level


def test_markup_in_data_one_rule_unseen_targets_and_a_version_against_itself(tab: Tab, console: Console) -> None:
    from playwright.sync_api import expect

    import_model(console, "one-rule", _one_rule_doc())
    rows = [[i % 10, EVIL[i % 3], "perhaps"] for i in range(30)]  # every target a class the model never saw
    ds = upload_csv(console, f"{EVIL[0]} file", ["score", "note", "label"], rows)
    sign_in(tab, console)
    page = tab.page

    # the dataset: its name, profile and first rows show the markup as text
    page.goto(_url(console, f"datasets/{ds['id']}"))
    expect(page.get_by_role("heading", name=f"{EVIL[0]} file")).to_be_visible()
    expect(page.locator("table.preview tbody")).to_contain_text(EVIL[1])
    expect(page.locator("table:has(caption:text-is('Column profile'))")).to_contain_text(EVIL[2])
    shot(tab, "21-markup-as-text")

    # the version: one rule and the default, the chip the server's text verbatim
    page.goto(_url(console, "models/one-rule/1"))
    cards = page.locator(".rule-list > li")
    expect(cards).to_have_count(2)
    texts = console.api.get("/v1/models/one-rule@1").json()["condition_texts"]
    expect(cards.first.locator(".chip")).to_have_text(texts[0])
    assert json.dumps(EVIL[1]) in texts[0][0]  # a category holding quotes is written as a JSON string

    # an evaluation where every target is unseen: refused with the API's reason, nothing stored
    page.get_by_label("Labelled dataset").select_option(ds["id"])
    page.get_by_label("Target column").select_option("label")
    page.get_by_role("button", name="Run evaluation").click()
    refusal = page.locator(".eval-form [role=alert]")
    expect(refusal).to_contain_text("no_rows_to_score")
    expect(refusal).to_contain_text("HTTP 422")
    assert console.api.get("/v1/models/one-rule@1/evaluations").json()["total"] == 0
    shot(tab, "22-one-rule-version")

    # the version against itself on the file: nothing changed, no disagreement, no metrics (no known target)
    page.goto(_url(console, f"models/one-rule/compare?base=1&other=1&dataset={ds['id']}"))
    expect(page.get_by_role("heading", name="Unchanged (1)")).to_be_visible()
    expect(page.get_by_role("heading", name="Changed (0)")).to_be_visible()
    expect(page.get_by_text("0 (0.0%)")).to_be_visible()
    # the file has the target column; no row could be scored (every label unseen): say that, not "no target"
    expect(page.locator(".notice-info")).to_contain_text("No row could be scored")
    expect(page.get_by_text("No target column")).to_have_count(0)
    shot(tab, "23-compare-itself")

    # monitoring before any decision, then a decision on a markup category
    page.goto(_url(console, "models/one-rule/monitoring"))
    expect(page.get_by_text("No decision in this window")).to_be_visible()
    shot(tab, "24-monitoring-no-decision")
    page.goto(_url(console, "models/one-rule/1/try"))
    page.get_by_label("note", exact=True).select_option(EVIL[1])
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.locator(".decision-value")).to_have_text("yes")
    expect(page.get_by_role("heading", name="Rule 1 fired")).to_be_visible()
    expect(page.locator("section:has(h2:text-is('Rule 1 fired')) tbody")).to_contain_text(EVIL[1])
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("main img, main script, main b").count() == 0
    shot(tab, "25-try-markup")


def _forty_rules_doc() -> dict[str, Any]:
    """40 rules on consecutive ranges of `x` (0..100), alternating classes, and a default rule."""
    rules = []
    for j in range(40):
        counts = [8, 2] if j % 2 else [2, 8]
        rules.append(
            {
                "conditions": [{"feature": "x", "op": "between", "low": 2.5 * j, "high": 2.5 * j + 2.4}],
                "class_counts": counts,
                "probabilities": [(counts[0] + 1) / 12, (counts[1] + 1) / 12],
            }
        )
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "y",
        "classes": [0, 1],
        "features": [{"name": "x", "type": "numeric", "fill_value": 50.0, "min": 0.0, "max": 100.0}],
        "rules": rules,
        "default": {"class_counts": [10, 10], "probabilities": [0.5, 0.5]},
        "smoothing": 1.0,
        "metadata": {},
    }


def _predict(console: Console, ref: str, records: list[dict[str, Any]]) -> None:
    r = console.api.post(f"/v1/models/{ref}/predict", json={"records": records, "explain": "none"})
    assert r.status_code == 200, r.text


def test_monitoring_forty_rules_sparse_traffic_and_a_real_alert(tab: Tab, console: Console) -> None:
    """Sparse traffic on a 40-rule list: one panel per rule with its training share, buckets with decisions
    drawn as steps, empty buckets as gaps (never zeros), too few decisions to judge; then a small list with
    enough drifted decisions to raise the alert."""
    from playwright.sync_api import expect

    import_model(console, "long-list", _forty_rules_doc())
    since = datetime.now(UTC) - timedelta(seconds=10)
    until, n_buckets = since + timedelta(seconds=60), 30  # 2-second buckets
    _predict(console, "long-list@1", [{"x": 2.5 * (i % 12)} for i in range(60)])
    time.sleep(4.5)  # the second batch lands at least one empty bucket later
    _predict(console, "long-list@1", [{"x": 30 + 2.5 * (i % 6)} for i in range(60)])
    iso = {"since": since.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "until": until.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    window = {**iso, "buckets": n_buckets}
    (block,) = console.api.get("/v1/models/long-list@1/monitoring", params=window).json()["versions"]
    used = [i for i, b in enumerate(block["series"]) if b["total"]]
    assert len(used) == 2 and used[1] - used[0] >= 2, used  # a gap between the two batches
    assert (block["drift_state"], block["min_decisions"]) == ("insufficient_data", 410)

    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/long-list/1"))
    expect(page.locator(".rule-list > li")).to_have_count(41)
    shot(tab, "26-forty-rules")
    page.goto(_url(console, f"models/long-list/monitoring?since={window['since']}&until={window['until']}&buckets=30"))
    panels = page.locator(".panels > li")
    expect(panels).to_have_count(41)
    expect(page.locator(".panels svg .training-line")).to_have_count(41)
    first = panels.first
    expect(first.locator("rect.gap")).to_have_count(n_buckets - 2)  # the empty buckets, as gaps
    expect(first.locator("path.share-line")).to_have_count(2)  # two runs of buckets with decisions, not joined
    expect(first.locator("circle.share-point")).to_have_count(2)
    expect(page.get_by_text("not judged: 120 of the 410 decisions needed")).to_be_visible()
    page.get_by_text("Show data").first.click()
    expect(page.locator(".multiples .chart-data tbody tr")).to_have_count(1 + 2)  # training shares, then 2 buckets
    shot(tab, "27-monitoring-forty-rules")

    # a small list (2 rules + default: 100 decisions needed), every decision by rule 1: drift, judged
    import_model(console, "drifting", rule_list_doc())
    _predict(console, "drifting@1", [{"age": 70, "income": 50, "smoker": "yes"}] * 120)
    page.goto(_url(console, "models/drifting/monitoring"))
    expect(page.get_by_text("Drift alert:")).to_be_visible()
    expect(page.locator(".monitor-head .badge")).to_have_text("drift alert")
    shot(tab, "28-monitoring-alert")


def _three_class_rows() -> tuple[list[str], list[list[str]]]:
    """heart.csv with a three-class label: the tertile of att_8 (maximum heart rate), att_8 itself removed."""
    with open(DATASETS / "heart.csv", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    col = header.index("att_8")
    values = np.array([float(r[col]) for r in rows])
    low, high = np.quantile(values, [1 / 3, 2 / 3])
    labels = ["low" if v <= low else "mid" if v <= high else "high" for v in values]
    keep = [i for i in range(len(header)) if i != col]
    return [header[i] for i in keep] + ["rate"], [
        [r[i] for i in keep] + [lab] for r, lab in zip(rows, labels, strict=True)
    ]


def _rows_also_in(header: list[str], training: list[list[str]], rows: list[list[str]]) -> int:
    """How many rows equal a training row in every column (numbers compared as numbers), counted here apart from
    the service's own check."""
    assert header[-1] == "rate"

    def key(r: list[str]) -> tuple[Any, ...]:
        return (*(float(v) for v in r[:-1]), r[-1])

    seen = {key(r) for r in training}
    return sum(key(r) in seen for r in rows)


def test_three_classes_a_failed_background_evaluation_and_a_file_too_large_to_compare(
    tab: Tab, console: Console
) -> None:
    from playwright.sync_api import expect

    header, rows = _three_class_rows()
    train = upload_csv(console, "rate-train", header, rows[:200])
    held = upload_csv(console, "rate-held-out", header, rows[200:])
    big_rows = [list(r) for r in (rows * 2)[: SYNC_MAX_ROWS + 5]]
    big_rows[7][0] = "n/a?"  # a number column holding text: only the background scoring finds it
    big = upload_csv(console, "rate-big", header, big_rows)
    train_via_api(console, train["id"], "rate", seed=0, epochs=30, target="rate", n_rules=4)
    sign_in(tab, console)
    page = tab.page

    # the version: three probability bars per rule
    page.goto(_url(console, "models/rate/1"))
    expect(page.locator(".rule-list > li").first.locator(".class-bar")).to_have_count(3)
    page.get_by_label("Labelled dataset").select_option(held["id"])
    page.get_by_role("button", name="Run evaluation").click()
    expect(page.get_by_role("heading", name="Evaluation of rate version 1")).to_be_visible()
    ev = console.api.get(f"/v1/evaluations/{page.url.rsplit('/', 1)[1]}").json()
    assert ev["state"] == "succeeded" and ev["n_rows"] == len(rows) - 200
    heat = page.locator("table.heat").first
    expect(heat.locator(".heat-count")).to_have_count(9)
    assert sum(int(t) for t in heat.locator(".heat-count").all_text_contents()) == ev["n_rows"]
    expect(page.get_by_text("top-class probability against accuracy").first).to_be_visible()
    expect(page.locator("table:has(caption:text-is('Per class')) tbody tr")).to_have_count(3)
    expect(page.get_by_text("Not held out:")).to_have_count(0)
    also = _rows_also_in(header, rows[:200], rows[200:])
    expect(page.locator("dd", has_text=f"{also} of {ev['n_rows']} (")).to_be_visible()
    shot(tab, "29-three-class-evaluation")

    # a file cut from the training rows and new ones (another SHA-256): the page says how many rows it trained on
    cut = upload_csv(console, "rate-cut", header, rows[150:250])
    r = console.api.post("/v1/models/rate@1/evaluations", json={"dataset_id": cut["id"]})
    assert r.status_code == 201, r.text
    page.goto(_url(console, f"evaluations/{r.json()['id']}"))
    shared = _rows_also_in(header, rows[:200], rows[150:250])
    assert shared >= 50 and r.json()["training_overlap"]["rows"] == shared
    expect(page.get_by_text("Partly not held out:")).to_be_visible()
    expect(page.get_by_text(f"{shared} of the {r.json()['n_rows']} scored rows")).to_be_visible()
    shot(tab, "29-partly-held-out")
    expect(page.get_by_role("link", name="the version's training file")).to_have_attribute(
        "href", f"#/datasets/{train['id']}"
    )
    page.goto(_url(console, "models/rate/1"))  # per-rule accuracy from that evaluation says so too
    expect(
        page.get_by_text(f"{shared} of them equal rows of the training file, more than chance explains")
    ).to_be_visible()
    # a file of training rows only is not held out: its per-rule figures are not used as held-out ones
    only = upload_csv(console, "rate-train-part", header, rows[:40])
    assert console.api.post("/v1/models/rate@1/evaluations", json={"dataset_id": only["id"]}).status_code == 201
    page.goto(_url(console, "models/rate"))
    page.goto(_url(console, "models/rate/1"))
    expect(page.get_by_text("scored the training file itself or only its rows")).to_be_visible()
    expect(
        page.get_by_text(f"{shared} of them equal rows of the training file, more than chance explains")
    ).to_be_visible()

    # try a record: three class bars with the decision
    page.goto(_url(console, "models/rate/1/try"))
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.locator("section:has(h2:text-is('Decision')) .class-bar")).to_have_count(3)

    # a file over the request limit: the evaluation runs in the background and fails with its reason ...
    page.goto(_url(console, "models/rate/1"))
    page.get_by_label("Labelled dataset").select_option(big["id"])
    page.get_by_role("button", name="Run evaluation").click()
    failed = page.get_by_text("The evaluation failed:")
    expect(failed).to_be_visible(timeout=60_000)
    expect(page.locator(".notice-error")).to_contain_text("invalid_values")
    shot(tab, "30-evaluation-failed")

    # ... and comparing on it is refused, saying what to run instead
    page.goto(_url(console, f"models/rate/compare?base=1&other=1&dataset={big['id']}"))
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("dataset_too_large_to_compare")
    expect(refusal).to_contain_text("Run an evaluation of each version")
    expect(page.locator(".notice-info").get_by_role("link", name="version 1")).to_have_attribute(
        "href", "#/models/rate/1"
    )
    shot(tab, "31-compare-too-large")


def test_a_failed_training_job_shows_its_error(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A job that ran past the training time limit: the job page and the list show it failed, and why."""
    from playwright.sync_api import expect

    limits = {"NEURULES_TRAINING_TIME_LIMIT_S": "3", "NEURULES_TRAINING_SOFT_TIME_LIMIT_S": "1"}
    with serve_console(tmp_path_factory.mktemp("console-fail"), **limits) as c, open_tab(browser, c) as t:
        with open(DATASETS / "heart.csv", "rb") as fh:
            ds = c.api.post("/v1/datasets", files={"file": ("heart.csv", fh, "text/csv")}).json()
        r = c.api.post(
            "/v1/jobs",
            json={"dataset_id": ds["id"], "target": "target", "parameters": {"n_rules": 5, "epochs": 5000}},
        )
        job = wait_job(c, r.json()["id"], timeout=90)
        assert job["state"] == "failed" and "time limit" in job["error"], job
        sign_in(t, c)
        t.page.goto(f"{c.url}/console/#/jobs/{job['id']}")
        expect(t.page.locator(".notice-error")).to_contain_text("Training failed:")
        expect(t.page.locator(".notice-error")).to_contain_text(job["error"])
        expect(t.page.locator(".job-status .badge").first).to_have_text("failed")
        assert job["api_key_id"], job  # who asked for the training: on the page too
        expect(t.page.get_by_text(job["api_key_id"], exact=True)).to_be_visible()
        shot(t, "32-job-failed")


def test_try_names_a_category_training_never_saw(tab: Tab, console: Console) -> None:
    """A categorical value training never saw (a typo) decides without an error, as outside every condition's
    set: the decision must say so, naming the feature and the value the API lists in `unseen_categories`."""
    from playwright.sync_api import expect

    import_model(console, "typo-risk", rule_list_doc())
    record = {"age": 50, "income": 30, "smoker": "yse"}  # the fill values, and a typo of "yes"
    answer = console.api.post("/v1/models/typo-risk@1/predict", json={"records": [record]}).json()["predictions"][0]
    assert answer["unseen_categories"] == {"smoker": "yse"}, answer

    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/typo-risk/1/try"))
    page.get_by_label("smoker", exact=True).select_option(label="other value…")
    page.get_by_label("smoker: other value").fill("yse")
    page.get_by_role("button", name="Decide", exact=True).click()
    decision = page.locator("section:has(h2:text-is('Decision'))")
    expect(page.locator(".decision-value")).to_have_text(answer["prediction"])
    warning = decision.locator(".notice-warning")
    expect(warning).to_contain_text("not seen in training")
    expect(warning).to_contain_text("smoker = yse")
    shot(tab, "33-try-unseen-category")

    # a value seen in training: no warning
    page.get_by_label("smoker", exact=True).select_option("yes")
    with page.expect_response(lambda r: r.url.endswith("/predict")):
        page.get_by_role("button", name="Decide", exact=True).click()
    expect(decision.locator(".notice-warning")).to_have_count(0)
    expect(page.locator(".decision-value")).to_be_visible()


def test_an_alias_move_shows_in_the_versions_table_and_a_bad_alias_name_is_caught(tab: Tab, console: Console) -> None:
    """After a move, the versions table's Aliases column shows where the alias now points (not the page's first
    load); an alias name the server cannot take is refused by the form, saying the rule, before any request."""
    from playwright.sync_api import expect

    import_model(console, "moves", rule_list_doc())
    import_model(console, "moves", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/moves"))
    versions = page.locator("table:has(caption:text-is('Versions, newest first')) tbody tr")
    expect(versions).to_have_count(2)
    expect(versions.nth(1).locator(".badge-alias")).to_have_count(0)

    page.get_by_label("Alias", exact=True).fill("production")
    page.get_by_label("Point it at").select_option("1")
    page.get_by_role("button", name="Move alias…").click()
    page.get_by_role("dialog").get_by_role("button", name="Move to version 1").click()
    expect(page.locator(".notice-success")).to_contain_text("moves@production now points at version 1")
    expect(versions.nth(1).locator(".badge-alias")).to_have_text(["production"])  # version 1's row
    expect(versions.nth(0).locator(".badge-alias")).to_have_count(0)

    page.get_by_label("Point it at").select_option("2")
    page.get_by_role("button", name="Move alias…").click()
    page.get_by_role("dialog").get_by_role("button", name="Move to version 2").click()
    expect(page.locator(".notice-success")).to_contain_text("moves@production now points at version 2")
    expect(versions.nth(0).locator(".badge-alias")).to_have_text(["production"])
    expect(versions.nth(1).locator(".badge-alias")).to_have_count(0)

    # "<b>x</b>" holds a "/": sent, it would not reach the alias check (a bare 404 naming no field)
    alias = page.get_by_label("Alias", exact=True)
    alias.fill("<b>x</b>")
    page.get_by_role("button", name="Move alias…").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    assert alias.evaluate("(el) => el.validity.patternMismatch"), "the form accepted an alias the server refuses"
    assert "letters, digits" in alias.evaluate("(el) => el.title")
    expect(page.locator(".alias-form .hint")).to_contain_text("a letter, then letters, digits, '_' or '-'")
    assert not [u for u in tab.requests if "/aliases/%3C" in u], tab.requests
    v2 = console.api.get("/v1/models/moves@2").json()
    assert console.api.get("/v1/registered-models/moves").json()["aliases"] == {"production": v2["id"]}
    shot(tab, "34-alias-moved-versions-table")


def test_long_ids_and_alias_names_fit_a_phone_screen(tab: Tab, console: Console) -> None:
    """At 390 px wide, a job page (its id in the title, its progress bar) and a version and its monitoring with a
    64-character alias stay within the screen: nothing is cut off or makes the page scroll sideways."""
    from playwright.sync_api import expect

    rows = [[i % 7, (i * 3) % 11, "a" if i % 3 else "b", "yes" if i % 7 > 3 else "no"] for i in range(60)]
    ds = upload_csv(console, "phone", ["u", "v", "w", "label"], rows)
    job = train_via_api(console, ds["id"], "phone", seed=0, epochs=5, target="label", n_rules=2)
    long_alias = "a" + "b" * 63
    r = console.api.put(f"/v1/registered-models/phone/aliases/{long_alias}", json={"version": 1})
    assert r.status_code == 200, r.text
    _predict(console, "phone@1", [{"u": 1, "v": 2, "w": "a"}])

    sign_in(tab, console)
    page = tab.page
    page.set_viewport_size({"width": 390, "height": 800})
    for fragment, heading, name in [
        (f"jobs/{job['id']}", f"Job {job['id']}", "35-narrow-job"),
        ("models/phone/1", "phone version 1", "36-narrow-version-long-alias"),
        ("models/phone/monitoring", "Monitoring phone", "37-narrow-monitoring-long-alias"),
        ("models/phone", "phone", "37b-narrow-model-long-alias"),
    ]:
        page.goto(_url(console, fragment))
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        expect(page.get_by_text(long_alias).or_(page.locator(".job-status")).first).to_be_visible()
        widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], f"#/{fragment} is {widths[0]} px wide on a {widths[1]} px screen"
        title = page.get_by_role("heading", level=1).bounding_box()
        assert title is not None and title["x"] + title["width"] <= 390, f"#/{fragment}: the title is cut off"
        # a badge (state, action, verdict) breaks between words at most; only an alias name may break inside one
        broken = page.eval_on_selector_all(
            ".badge:not(.badge-alias)",
            """(els) => els.map((el) => {
                 const text = document.createRange();
                 text.selectNodeContents(el);
                 const lines = new Set([...text.getClientRects()].map((r) => Math.round(r.top))).size;
                 return [el.textContent, lines];
               }).filter(([t, lines]) => lines > t.trim().split(/\\s+/).length)""",
        )
        assert broken == [], f"#/{fragment}: badges broken inside a word: {broken}"
        shot(tab, name)
    # the sections and "Sign out" each on one line (five sections since the Audit page)
    lines = page.eval_on_selector_all(
        "#nav a, #sign-out",
        """(els) => Object.fromEntries(els.map((el) => {
             const text = document.createRange();
             text.selectNodeContents(el);
             return [el.textContent.trim(), new Set([...text.getClientRects()].map((r) => Math.round(r.top))).size];
           }))""",
    )
    assert set(lines.values()) == {1}, f"a section or Sign out breaks over two lines at 390 px: {lines}"


def test_signed_out_the_page_shows_no_navigation_and_no_sign_out(tab: Tab, console: Console) -> None:
    """Before signing in, and after signing out, the sections and "Sign out" are hidden (the `hidden` attribute
    the script sets must not be undone by the style sheet's `display`); signed in, they are shown."""
    from playwright.sync_api import expect

    page = tab.page
    page.goto(f"{console.url}/console")
    expect(page.get_by_label("API key")).to_be_visible()
    nav = page.get_by_role("navigation", name="Sections", include_hidden=True)
    sign_out = page.get_by_role("button", name="Sign out", include_hidden=True)
    expect(nav).to_be_hidden()
    expect(sign_out).to_be_hidden()
    shot(tab, "38-signed-out")
    sign_in(tab, console)
    expect(nav).to_be_visible()
    expect(sign_out).to_be_visible()
    sign_out.click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(nav).to_be_hidden()
    expect(sign_out).to_be_hidden()


def test_the_audit_trail_lists_verifies_and_finds_a_decision(tab: Tab, console: Console) -> None:
    """A reviewer follows a decision from "Try a record" to its audit record (the row the API returns for its
    audit_seq), checks the hash chain (what GET /v1/audit/verify says), pages back through the decisions, and
    gets the API's reason for a place that is not a number."""
    from playwright.sync_api import expect

    import_model(console, "audited", rule_list_doc())
    _predict(console, "audited@1", [{"age": 20 + i, "income": 5 * i, "smoker": "no"} for i in range(60)])
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/audited/1/try"))
    page.get_by_role("button", name="Decide", exact=True).click()
    link = page.get_by_role("link", name=re.compile(r"^record \d+ of this tenant's audit chain$"))
    seq = int(link.inner_text().split()[1])
    link.click()
    expect(page.get_by_role("heading", name="Audit trail", level=1)).to_be_visible()
    (row,) = console.api.get("/v1/audit", params={"seq": seq}).json()["items"]
    found = page.locator(".audit-record")
    expect(found.get_by_role("heading", name=f"Decision {seq}")).to_be_visible()
    expect(found).to_contain_text(row["row_hash"])
    expect(found).to_contain_text(row["input_digest"])
    expect(found.get_by_role("link", name="audited version 1")).to_be_visible()
    expect(found.locator("dd").nth(4)).to_have_text(row["output"]["prediction"])

    page.get_by_role("button", name="Verify the chain").click()
    check = console.api.get("/v1/audit/verify").json()
    assert check["intact"], check
    expect(page.locator(".notice-success").first).to_contain_text(
        f"Decisions intact: {check['rows_checked']} record(s) checked"
    )
    reg = check["registry_events"]
    expect(page.locator(".notice-success").nth(1)).to_contain_text(
        f"Registry events intact: {reg['events_checked']} alias change(s) and new version(s) of "
        f"{reg['models_checked']} model(s)"
    )

    listed = page.locator("table:has(caption:text-is('Decisions, newest first')) tbody tr")
    expect(listed).to_have_count(50)
    expect(listed.first.locator("td").first).to_have_text(str(check["head"]["seq"]))
    older = page.get_by_role("button", name="Show older decisions")
    older.focus()
    page.keyboard.press("Enter")
    expect(listed).to_have_count(min(100, check["rows_checked"]))
    expect(listed.last.locator("td").first).to_have_text(
        str(check["head"]["seq"] - min(100, check["rows_checked"]) + 1)
    )
    while older.is_visible():  # page on by keyboard to the last page
        shown = listed.count()
        older.focus()
        page.keyboard.press("Enter")
        expect(listed).not_to_have_count(shown)
    expect(listed).to_have_count(check["rows_checked"])
    # the button went with the last page, and the keyboard focus with it to the list (not to the page's top)
    focus = "document.activeElement !== document.body && document.activeElement.querySelector('table') !== null"
    page.wait_for_function(focus, timeout=5000)
    shot(tab, "39-audit")

    page.goto(_url(console, "audit?seq=abc"))
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("query.seq: must be an integer")
    expect(refusal).to_contain_text("HTTP 422")
    page.get_by_label("Place in the chain (audit_seq)").fill("999999")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_text("No decision at place 999999")).to_be_visible()
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(_url(console, f"audit?seq={seq}"))
    expect(found).to_contain_text(row["row_hash"])
    page.get_by_role("button", name="Verify the chain").click()
    expect(page.locator(".notice-success").first).to_contain_text("every link holds")  # with the head's 64-hex hash
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the audit page is {widths[0]} px wide on a {widths[1]} px screen"
    shot(tab, "40-audit-narrow")


def test_the_upload_form_offers_and_takes_a_gzipped_csv(tab: Tab, console: Console, tmp_path: Path) -> None:
    """The API reads a .csv.gz (README); the file chooser must offer one (its `accept` list filters what the
    native dialog shows) and the form must upload it: the dataset is the decompressed CSV."""
    from playwright.sync_api import expect

    packed = tmp_path / "heart-packed.csv.gz"
    packed.write_bytes(gzip.compress((DATASETS / "heart.csv").read_bytes()))
    sign_in(tab, console)
    page = tab.page
    chooser = page.get_by_label("CSV file")
    accept = [a.strip() for a in chooser.get_attribute("accept").split(",")]
    assert ".gz" in accept and ".csv" in accept, accept
    expect(page.locator(".upload-form .hint")).to_contain_text(".csv.gz")
    chooser.set_input_files(str(packed))
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.locator(".upload-form .notice-success")).to_contain_text("heart-packed (270 rows, 16 columns)")


def test_an_alias_can_be_removed_with_a_confirmation(tab: Tab, console: Console) -> None:
    """An alias set by mistake can be removed from the model page (the API's DELETE), after a confirmation that
    Escape cancels; the tables and the registry events then show it gone."""
    from playwright.sync_api import expect

    import_model(console, "removes", rule_list_doc())
    for alias in ("production", "stagging"):
        r = console.api.put(f"/v1/registered-models/removes/aliases/{alias}", json={"version": 1})
        assert r.status_code == 200, r.text
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/removes"))
    remove = page.get_by_role("button", name="Remove alias stagging")
    remove.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Remove removes@stagging?")
    expect(dialog).to_contain_text("It points at version 1")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(remove).to_be_focused()
    assert set(console.api.get("/v1/registered-models/removes").json()["aliases"]) == {"production", "stagging"}

    remove.click()
    dialog.get_by_role("button", name="Remove alias").click()
    expect(page.locator(".notice-success")).to_contain_text("removes@stagging removed.")
    assert set(console.api.get("/v1/registered-models/removes").json()["aliases"]) == {"production"}
    aliases = page.locator("table:has(caption:text-is('Where each alias points')) tbody tr")
    expect(aliases).to_have_count(1)
    expect(aliases.first).to_contain_text("removes@production")
    events = page.locator("table:has(caption:text-is('Registry events, newest first')) tbody tr")
    expect(events.first).to_contain_text("alias_deleted")
    expect(events.first).to_contain_text("stagging")
    expect(page.get_by_role("heading", name="Aliases", level=2)).to_be_focused()  # not lost with the row
    shot(tab, "41-alias-removed")


def test_try_keeps_the_typed_record_when_the_reader_follows_a_link_and_comes_back(tab: Tab, console: Console) -> None:
    """A reviewer types a record, decides, opens its audit record from the answer and goes back: the fields still
    hold the record (kept in the tab, per version), with a way back to the starting values; signing out
    removes it."""
    from playwright.sync_api import expect

    import_model(console, "keeps", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/keeps/1/try"))
    age = page.get_by_label("age", exact=True)
    expect(age).to_have_value("50")
    age.fill("70")
    page.get_by_label("smoker", exact=True).select_option(label="other value…")
    page.get_by_label("smoker: other value").fill("sometimes")
    page.get_by_role("button", name="Decide", exact=True).click()
    page.get_by_role("link", name=re.compile("of this tenant's audit chain")).click()
    expect(page.get_by_role("heading", name="Audit trail", level=1)).to_be_visible()
    page.go_back()
    expect(age).to_have_value("70")
    expect(page.get_by_label("smoker", exact=True).locator("option:checked")).to_have_text("other value…")
    expect(page.get_by_label("smoker: other value")).to_have_value("sometimes")
    expect(page.get_by_label("income", exact=True)).to_have_value("30")
    expect(page.get_by_text("The fields hold the record you last decided")).to_be_visible()
    shot(tab, "42-try-record-kept")

    page.get_by_role("button", name="Reset to the starting values").click()
    expect(age).to_have_value("50")
    expect(page.get_by_label("smoker", exact=True)).to_have_value("yes")
    page.reload()
    expect(age).to_have_value("50")

    age.fill("65")
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.locator(".decision-value")).to_be_visible()
    slots = "() => Object.keys(sessionStorage).filter((k) => k.startsWith('neurules.try.'))"
    assert len(page.evaluate(slots)) == 1
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate(slots) == [], "a typed record outlived the sign-out"


def test_a_versions_compare_link_reads_from_the_previous_version_to_this_one(tab: Tab, console: Console) -> None:
    """The "Compare…" link of version 2 compares version 1 (base) with version 2, as the model page's "Compare versions"
    does: the rule version 2 brought is listed as added in v2, not as removed."""
    from playwright.sync_api import expect

    first = rule_list_doc()
    second = rule_list_doc()
    second["rules"].append(
        {
            "conditions": [{"feature": "smoker", "op": "in", "values": ["no"]}],
            "class_counts": [50, 5],
            "probabilities": [51 / 57, 6 / 57],
        }
    )
    second["default"] = {"class_counts": [70, 25], "probabilities": [71 / 97, 26 / 97]}
    import_model(console, "grows", first)
    import_model(console, "grows", second)
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/grows/2"))
    page.get_by_role("link", name="Compare…").click()
    expect(page.get_by_role("heading", name="Rules: version 1 → version 2")).to_be_visible()
    expect(page.get_by_role("heading", name="Added in v2 (1)")).to_be_visible()
    expect(page.get_by_role("heading", name="Removed from v1 (0)")).to_be_visible()
    expect(page.get_by_label("Base version")).to_have_value("1")
    expect(page.get_by_label("Other version")).to_have_value("2")
    # version 1 has none before it: from it to the newest (its link once pre-filled v1 against v1)
    page.goto(_url(console, "models/grows/1"))
    page.get_by_role("link", name="Compare…").click()
    expect(page.get_by_role("heading", name="Rules: version 1 → version 2")).to_be_visible()
    expect(page.get_by_label("Base version")).to_have_value("1")
    expect(page.get_by_label("Other version")).to_have_value("2")


def test_try_asks_for_the_other_value_instead_of_sending_an_empty_category(tab: Tab, console: Console) -> None:
    """Choosing "other value…" and typing nothing would send "" (a category training never saw, which the answer
    does not even list as unseen): the form asks for the value instead, and "(missing)" sends no value."""
    from playwright.sync_api import expect

    import_model(console, "empty-other", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/empty-other/1/try"))
    page.get_by_label("smoker", exact=True).select_option(label="other value…")
    other = page.get_by_label("smoker: other value")
    expect(other).to_be_focused()
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.get_by_role("heading", name="Decision", exact=True)).to_have_count(0)
    assert other.evaluate("(el) => el.validity.valueMissing"), "an empty other value was accepted"
    assert not [u for u in tab.requests if u.endswith("/predict")], "the empty value was sent"

    page.get_by_label("smoker", exact=True).select_option(label="(missing)")
    expect(other).to_be_hidden()
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.get_by_role("heading", name="Decision", exact=True)).to_be_visible()


def test_long_names_break_in_their_cell_and_leave_the_other_columns_in_view(tab: Tab, console: Console) -> None:
    """A 200-character dataset name and a 100-character model name (both allowed) break inside their cells: the
    lists' other columns (rows, size, upload time; versions, aliases) stay in the table's box, not scrolled out."""
    from playwright.sync_api import expect

    long_ds = "d" * 200
    upload_csv(console, long_ds, ["u", "label"], [[i, i % 2] for i in range(10)])
    long_model = "m" * 100
    import_model(console, long_model, rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    for fragment, name, last in [("datasets", long_ds, "Uploaded"), ("models", long_model, "Created")]:
        page.goto(_url(console, fragment))
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
        box = page.locator(".table-wrap").last
        sizes = box.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
        assert sizes[0] <= sizes[1], f"#/{fragment}: the table is {sizes[0]} px wide in a {sizes[1]} px box"
        header = box.get_by_role("columnheader", name=last).bounding_box()
        frame = box.bounding_box()
        assert header and frame and header["x"] + header["width"] <= frame["x"] + frame["width"] + 1, header
        shot(tab, f"43-long-name-{fragment}")


def test_a_broken_escape_in_the_address_and_an_unknown_model_to_compare(tab: Tab, console: Console) -> None:
    """A link with a broken %-escape says there is no such page (not the script's "URI malformed"); comparing the
    versions of a model that does not exist answers the API's 404, not "This model has one version"."""
    from playwright.sync_api import expect

    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/%E0%A4/1"))
    expect(page.locator("main .notice-warning")).to_contain_text("No page at #/models/%E0%A4/1")
    expect(page.get_by_text("URI malformed")).to_have_count(0)
    expect(page.get_by_role("link", name="Go to datasets")).to_be_visible()

    page.goto(_url(console, "models/no-such-model/compare"))
    error = page.locator("main .notice-error")
    expect(error).to_contain_text("model 'no-such-model' not found")
    expect(page.get_by_text("This model has one version")).to_have_count(0)


def test_a_cancelled_job_is_not_shown_as_a_failure(tab: Tab, console: Console) -> None:
    """A job the reader cancelled keeps why in `error` ("cancelled by request"): the page says it was cancelled,
    in a warning, not "Training failed" in an error box."""
    from playwright.sync_api import expect

    ds = upload_csv(console, "to-cancel", ["u", "label"], [[i, i % 2] for i in range(40)])
    r = console.api.post(
        "/v1/jobs", json={"dataset_id": ds["id"], "target": "label", "parameters": {"n_rules": 2, "epochs": 5000}}
    )
    assert r.status_code == 202, r.text
    assert console.api.post(f"/v1/jobs/{r.json()['id']}/cancel").status_code < 300
    job = wait_job(console, r.json()["id"])
    assert job["state"] == "cancelled" and job["error"], job
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"jobs/{job['id']}"))
    expect(page.locator(".job-status .badge").first).to_have_text("cancelled")
    expect(page.locator("main .notice-warning")).to_contain_text(f"Cancelled: {job['error']}")
    expect(page.locator("main .notice-error")).to_have_count(0)
    expect(page.get_by_text("Training failed")).to_have_count(0)
    shot(tab, "44-job-cancelled")


def test_a_compare_link_naming_a_version_that_does_not_exist_says_so(tab: Tab, console: Console) -> None:
    """A link to compare a version the model does not have (a typo, or one from before a version went away) says
    that version does not exist, and its select asks for a choice: it once showed another version selected in
    its place, which "Compare" would then have compared. An alias in the link is read as its version."""
    from playwright.sync_api import expect

    import_model(console, "gone", rule_list_doc())
    import_model(console, "gone", rule_list_doc())
    r = console.api.put("/v1/registered-models/gone/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/gone/compare?base=7&other=2"))
    warning = page.locator("main .notice-warning")
    expect(warning).to_contain_text("gone has no version 7")
    expect(warning).to_contain_text("It has versions 1, 2")
    base = page.get_by_label("Base version")
    expect(base).to_have_value("")
    expect(base.locator("option:checked")).to_have_text("version 7 (does not exist): choose one")
    expect(page.get_by_label("Other version")).to_have_value("2")
    expect(page.get_by_role("heading", name=re.compile("^Rules: "))).to_have_count(0)
    assert not [u for u in tab.requests if "/compare?" in u], "a comparison was asked for a version that is not there"
    page.get_by_role("button", name="Compare").click()  # the select still asks for a version: nothing is compared
    assert base.evaluate("(el) => el.validity.valueMissing")
    expect(base.locator("option[value='1']")).to_have_text("version 1 (production)")  # what is live, named
    base.select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name="Rules: version 1 → version 2")).to_be_visible()
    expect(warning).to_have_count(0)

    page.goto(_url(console, "models/gone/compare?base=1&other=9"))
    expect(warning).to_contain_text("gone has no version 9")
    expect(page.get_by_label("Other version")).to_have_value("")
    expect(page.get_by_label("Base version")).to_have_value("1")
    page.goto(_url(console, "models/gone/compare?base=production&other=2"))
    expect(page.get_by_role("heading", name="Rules: version 1 → version 2")).to_be_visible()
    expect(page.get_by_label("Base version")).to_have_value("1")
    shot(tab, "45-compare-missing-version")
    # a dataset that is gone: the select keeps it (it showed "(rules only)", which "Compare" then compared)
    page.goto(_url(console, "models/gone/compare?base=1&other=2&dataset=ds_gone"))
    expect(page.locator("main .notice-error")).to_contain_text("dataset 'ds_gone' not found")
    expect(page.get_by_label("On dataset (optional)")).to_have_value("ds_gone")


def test_missing_columns_are_named_once(tab: Tab, console: Console) -> None:
    """An evaluation or a comparison on a file without some of the model's columns is refused (missing_columns):
    the console names each missing column once (the API's message lists them all, its details name each again
    under one field: both were shown, the list twice). A refusal naming several cells lists each one."""
    from playwright.sync_api import expect

    import_model(console, "lacks", rule_list_doc())
    import_model(console, "lacks", rule_list_doc())
    ds = upload_csv(console, "only-age", ["age", "risk"], [[20 + i, "low" if i % 2 else "high"] for i in range(30)])
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/lacks/1"))
    page.get_by_label("Labelled dataset").select_option(ds["id"])
    page.get_by_label("Target column").select_option("risk")
    page.get_by_role("button", name="Run evaluation").click()
    _names_each_missing_column_once(page.locator(".eval-form [role=alert]"))
    page.goto(_url(console, f"models/lacks/compare?base=1&other=2&dataset={ds['id']}"))
    _names_each_missing_column_once(page.locator("main .notice-error"))
    shot(tab, "46-missing-columns-once")

    # cells that are not numbers: the message names the first, the list every other one (all with the same
    # message, on other lines: the list once left them all out, leaving "(and 2 more problem(s))" unnamed)
    bad = upload_csv(
        console,
        "bad-ages",
        ["age", "income", "smoker", "risk"],
        [["old" if i < 3 else 40 + i, 20, "no", "low"] for i in range(30)],
    )
    page.goto(_url(console, "models/lacks/1"))
    page.get_by_label("Labelled dataset").select_option(bad["id"])
    page.get_by_label("Target column").select_option("risk")
    page.get_by_role("button", name="Run evaluation").click()
    refusal = page.locator(".eval-form [role=alert]")
    expect(refusal).to_contain_text("line 2.age: expected a number, got 'old' (row 0) (and 2 more problem(s))")
    expect(refusal.locator("li")).to_have_text(
        ["line 3.age expected a number, got 'old' (row 1)", "line 4.age expected a number, got 'old' (row 2)"]
    )


def _names_each_missing_column_once(refusal: Any) -> None:
    from playwright.sync_api import expect

    expect(refusal).to_contain_text("missing_columns")
    text = refusal.inner_text()
    assert text.count("income") == 1 and text.count("smoker") == 1, text
    assert "dataset_id" not in text, text


RTL_DOC: dict[str, Any] = {
    "format": "neurules.rulelist",
    "version": 1,
    "target": "סיכון",
    "classes": ["נמוך", "גבוה"],
    "features": [
        {"name": "גיל", "type": "numeric", "fill_value": 50.0, "min": 20.0, "max": 80.0},
        {"name": "الدخل", "type": "numeric", "fill_value": 30.0, "min": 0.0, "max": 200.0},
        {"name": "עישון", "type": "categorical", "categories": ["כן", "לא", "לפעמים בערב", None]},
    ],
    "rules": [
        {
            "conditions": [
                {"feature": "גיל", "op": "between", "low": 60.0, "high": None},
                {"feature": "עישון", "op": "in", "values": ["כן", "לפעמים בערב"]},
            ],
            "class_counts": [3, 40],
            "probabilities": [4 / 45, 41 / 45],
        },
        {
            "conditions": [{"feature": "الدخل", "op": "between", "low": 5.0, "high": 10.0}],
            "class_counts": [10, 20],
            "probabilities": [11 / 32, 21 / 32],
        },
    ],
    "default": {"class_counts": [120, 30], "probabilities": [121 / 152, 31 / 152]},
    "smoothing": 1.0,
    "metadata": {},
}

# the horizontal middle of each piece of an element's text, in the order given (first occurrence of each)
CENTRES = """(el, pieces) => {
  const nodes = [];
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n, at = 0; (n = walk.nextNode()); at += n.data.length) nodes.push([n, at]);
  const locate = (i) => { const [n, at] = nodes.find(([n, at]) => i < at + n.data.length); return [n, i - at]; };
  const text = el.textContent;
  return pieces.map((piece) => {
    const i = text.indexOf(piece);
    if (i < 0) return null;
    const range = document.createRange();
    range.setStart(...locate(i));
    const [n, off] = locate(i + piece.length - 1);
    range.setEnd(n, off + 1);
    const box = range.getBoundingClientRect();
    return box.left + box.width / 2;
  });
}"""


def _reads_in_order(locator: Any, pieces: list[str]) -> None:
    """The pieces of the element's text are laid out left to right in the order given (the rule syntax's)."""
    xs = locator.evaluate(CENTRES, pieces)
    assert None not in xs, (locator.text_content(), pieces, xs)
    assert xs == sorted(xs), f"{locator.text_content()!r} does not read {pieces} left to right: {xs}"


def test_right_to_left_names_and_values_keep_each_condition_in_order(tab: Tab, console: Console) -> None:
    """Hebrew and Arabic column names and category values: each condition still reads name, operator, value left
    to right (the browser's bidi algorithm once pulled the operators and numbers into the right-to-left runs:
    `גיל >= 60` showed as `60 =< גיל`, `{כן, לפעמים בערב}` with its values swapped)."""
    from playwright.sync_api import expect

    import_model(console, "rtl", RTL_DOC)
    texts = console.api.get("/v1/models/rtl@1").json()["condition_texts"]
    assert texts == [["גיל >= 60", "עישון in {כן, לפעמים בערב}"], ["5 <= الدخل <= 10"]], texts
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/rtl/1"))
    chips = page.locator(".rule-list .chip")
    expect(chips).to_have_count(3)
    expect(chips.nth(0)).to_have_text(texts[0][0])  # the server's text, verbatim
    _reads_in_order(chips.nth(0), ["גיל", ">=", "60"])
    _reads_in_order(chips.nth(1), ["עישון", " in ", "כן", "לפעמים בערב", "}"])
    _reads_in_order(chips.nth(2), ["5", "الدخل", "10"])
    _reads_in_order(page.locator(".rule-list .decision").first, ["סיכון", "=", "גבוה"])
    shot(tab, "47-rtl-version")

    page.goto(_url(console, "models/rtl/1/try"))
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.get_by_role("heading", name="The default rule fired")).to_be_visible()
    _reads_in_order(page.locator(".decision-line"), ["סיכון", "=", "נמוך", "by the default rule"])
    failed = page.locator(".not-fired li")
    expect(failed).to_have_count(2)
    _reads_in_order(failed.nth(0).locator("code.fails"), ["גיל", ">=", "60"])
    _reads_in_order(failed.nth(0).locator("div code"), ["גיל", ">=", "60", "and", "עישון", "כן", "לפעמים בערב"])
    _reads_in_order(failed.nth(1).locator("code.fails"), ["5", "<=", "الدخل", "10"])
    shot(tab, "48-rtl-try")


def test_long_names_and_values_in_rules_break_instead_of_widening_the_page(tab: Tab, console: Console) -> None:
    """A 180-character category and a 128-character column name (both allowed) in a rule: the chips, the try-a-record
    labels and the explanation's rule text break inside their boxes; the page never scrolls sideways (the rule
    card's chips once ran 300 px past the card, the try page's label and rule text past the screen)."""
    from playwright.sync_api import expect

    long_value, long_name = "x" * 180, "feature_" + "n" * 120
    doc = _one_rule_doc()
    doc["features"] = [
        {"name": long_name, "type": "numeric", "fill_value": 5.0, "min": 0.0, "max": 10.0},
        {"name": "note", "type": "categorical", "categories": [long_value, "short", None]},
    ]
    doc["rules"][0]["conditions"] = [
        {"feature": "note", "op": "in", "values": [long_value, "short"]},
        {"feature": long_name, "op": "between", "low": 1.0, "high": 3.0},
    ]
    import_model(console, "long-words", doc)
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/long-words/1"))
    expect(page.locator(".rule-list .chip")).to_have_count(2)
    page.evaluate(SETTLE)
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the version page is {widths[0]} px wide on a {widths[1]} px screen"
    page.goto(_url(console, "models/long-words/1/try"))
    page.get_by_label("note", exact=True).select_option(long_value)
    page.get_by_label(long_name, exact=True).fill("2")
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.get_by_role("heading", name="Rule 1 fired")).to_be_visible()
    page.evaluate(SETTLE)
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the try page is {widths[0]} px wide on a {widths[1]} px screen"
    shot(tab, "49-long-words-try")


def test_a_decision_that_never_reached_the_service_is_not_called_refused(tab: Tab, console: Console) -> None:
    """The network drops the "Decide" request: the page says the record was not decided because the service did not
    answer (it said "The service refused the record: the service did not answer"), keeps what was typed, and the
    next try decides it."""
    from playwright.sync_api import expect

    import_model(console, "offline", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/offline/1/try"))
    page.get_by_label("age", exact=True).fill("70")
    page.route("**/predict", lambda route: route.abort())
    page.get_by_role("button", name="Decide", exact=True).click()
    failure = page.locator(".try-answer [role=alert]")
    expect(failure).to_contain_text("The record was not decided: the service did not answer")
    expect(failure).not_to_contain_text("refused")
    page.unroute("**/predict")
    expect(page.get_by_label("age", exact=True)).to_have_value("70")
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.get_by_role("heading", name="Decision", exact=True)).to_be_visible()


def test_compare_asks_what_changes_if_the_newest_is_promoted(tab: Tab, console: Console) -> None:
    """With production on an older version, the model page's compare button compares production (base) with the newest
    and says so (it compared the previous version with the newest, which is not what a promotion changes); it follows
    an alias move. A candidate's version page compares it with production; without production another alias serves;
    with production on the newest, previous against newest as before."""
    from playwright.sync_api import expect

    for _ in range(3):
        import_model(console, "promote", rule_list_doc())
    for _ in range(2):
        import_model(console, "staged", rule_list_doc())
    assert console.api.put("/v1/registered-models/staged/aliases/staging", json={"version": 1}).status_code == 200
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/promote"))
    compare = page.locator(".page-header").get_by_role("link", name=re.compile("^Compare"))
    expect(compare).to_have_text("Compare versions")
    expect(compare).to_have_attribute("href", "#/models/promote/compare?base=2&other=3")

    page.get_by_label("Point it at").select_option("1")
    page.get_by_role("button", name="Move alias…").click()
    page.get_by_role("dialog").get_by_role("button", name="Move to version 1").click()
    expect(page.locator(".notice-success")).to_contain_text("promote@production now points at version 1")
    expect(compare).to_have_text("Compare newest with production")
    expect(compare).to_have_attribute(
        "title", "Version 1 (production) → version 3 (newest): what changes if version 3 is promoted"
    )
    compare.click()
    expect(page.get_by_role("heading", name="Rules: version 1 → version 3")).to_be_visible()

    # a candidate's version page: compared with what is live; the live version's own page: previous to it
    page.goto(_url(console, "models/promote/2"))
    page.get_by_role("link", name="Compare with production…").click()
    expect(page.get_by_role("heading", name="Rules: version 1 → version 2")).to_be_visible()
    page.goto(_url(console, "models/promote/1"))
    expect(page.get_by_role("link", name="Compare…")).to_have_attribute("href", "#/models/promote/compare?base=1")

    # no production: another alias is what is live
    page.goto(_url(console, "models/staged"))
    expect(compare).to_have_text("Compare newest with staging")
    expect(compare).to_have_attribute("href", "#/models/staged/compare?base=1&other=2")

    # production on the newest: nothing to promote, previous against newest
    assert console.api.put("/v1/registered-models/promote/aliases/production", json={"version": 3}).status_code == 200
    page.goto(_url(console, "models/promote"))
    expect(compare).to_have_text("Compare versions")
    expect(compare).to_have_attribute("href", "#/models/promote/compare?base=2&other=3")
    shot(tab, "50-compare-with-production")


def test_the_job_page_names_its_dataset(tab: Tab, console: Console) -> None:
    """The job page showed its dataset as an id: it shows the name, linked to the dataset, the id beside it; the model's
    registry events link the job that created the version."""
    from playwright.sync_api import expect

    ds = upload_csv(console, "loans-2026-q3", ["u", "label"], [[i, i % 2] for i in range(40)])
    job = train_via_api(console, ds["id"], "named-ds", seed=0, epochs=3, target="label", n_rules=2)
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"jobs/{job['id']}"))
    facts = page.locator("main dl.facts")
    link = facts.get_by_role("link", name="loans-2026-q3", exact=True)
    expect(link).to_have_attribute("href", f"#/datasets/{ds['id']}")
    expect(link).to_have_attribute("title", ds["id"])
    expect(facts).to_contain_text(ds["id"])
    link.click()
    expect(page.get_by_role("heading", name="loans-2026-q3", level=1)).to_be_visible()
    # the model's registry events name the job that created the version (the row said "—" for who did it)
    page.goto(_url(console, "models/named-ds"))
    created = page.locator("table:has(caption:text-is('Registry events, newest first')) tbody tr").last
    expect(created).to_contain_text("version_created")
    expect(created.get_by_role("link", name=job["id"])).to_have_attribute("href", f"#/jobs/{job['id']}")


def test_a_dependency_down_says_when_to_try_again(tab: Tab, console: Console) -> None:
    """A 503 with Retry-After (the database or broker down) says how long to wait, as the answer did, on a page that
    could not load and on an upload (fetch and XMLHttpRequest both read the header)."""
    from playwright.sync_api import expect

    import_model(console, "outage", rule_list_doc())
    down = json.dumps(
        {"error": {"code": "database_unavailable", "message": "the database is unavailable", "details": []}}
    )
    sign_in(tab, console)
    page = tab.page
    try:
        page.route(
            "**/v1/registered-models/outage",
            lambda r: r.fulfill(status=503, headers={"Retry-After": "5"}, content_type="application/json", body=down),
        )
        page.goto(_url(console, "models/outage"))
        expect(page.locator("main .notice-error")).to_contain_text(
            "the database is unavailable (HTTP 503, database_unavailable). Try again in 5 s."
        )

        page.route(
            "**/v1/datasets",
            lambda r: (
                r.fulfill(status=503, headers={"Retry-After": "30"}, content_type="application/json", body=down)
                if r.request.method == "POST"
                else r.fallback()
            ),
        )
        page.goto(_url(console, "datasets"))
        page.get_by_label("CSV file").set_input_files(
            {"name": "x.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"}
        )
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(page.locator(".upload-form .notice-error")).to_contain_text("Try again in 30 s.")
    finally:  # the 503s are the test's own, not the server's
        tab.server_errors[:] = [e for e in tab.server_errors if not e.startswith("503 ")]


def test_comparing_on_the_training_file_says_the_metrics_are_not_held_out(tab: Tab, console: Console) -> None:
    """Two versions compared on the file they were trained on: the metrics side by side are mostly on rows training
    fitted, and the page says so (it showed them as plainly as held-out ones, as the evaluation page does not); on a
    file neither saw, no such warning."""
    from playwright.sync_api import expect

    rows = [[i % 9, (i * 7) % 5, "yes" if (i % 9) + (i * 7) % 5 > 6 else "no"] for i in range(80)]
    train = upload_csv(console, "fit-file", ["u", "v", "label"], rows)
    # (u and v swapped, as this file had them, gave rows of the training file back: its label is symmetric in them)
    fresh = upload_csv(console, "unseen-file", ["u", "v", "label"], [[u + 0.5, v, y] for u, v, y in rows[:40]])
    for seed in (0, 1):
        train_via_api(console, train["id"], "fitted", seed=seed, epochs=3, target="label", n_rules=2)
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"models/fitted/compare?base=1&other=2&dataset={train['id']}"))
    on_file = page.locator("section:has(h2:text-is('On the dataset'))")
    expect(on_file.get_by_role("table", name="Metrics side by side")).to_be_visible()
    expect(on_file.locator(".notice-warning")).to_contain_text(
        "fit-file is the file both versions were trained on: these metrics are mostly on rows training fitted"
    )
    shot(tab, "51-compare-on-training-file")
    page.goto(_url(console, f"models/fitted/compare?base=1&other=2&dataset={fresh['id']}"))
    expect(on_file.get_by_role("table", name="Metrics side by side")).to_be_visible()
    expect(on_file.locator(".notice-warning")).to_have_count(0)
    # new rows from the same source: every one equals a training row (few distinct values), as chance predicts
    # from the training file's own repeats (70 of its 80 rows): counted, and no warning
    later = [[i % 9, (i * 7) % 5, "yes" if (i % 9) + (i * 7) % 5 > 6 else "no"] for i in range(80, 120)]
    same_source = upload_csv(console, "same-source", ["u", "v", "label"], later)
    c = console.api.get(
        "/v1/models/fitted@1/compare", params={"other": "fitted@2", "dataset_id": same_source["id"]}
    ).json()
    assert c["dataset"]["training_overlap"]["base"] | {"training_dataset_id": None} == {
        "training_dataset_id": None,
        "rows": 40,
        "scored_rows": 40,
        "training_rows": 80,
        "training_repeated_rows": 70,
        "unchecked_reason": None,
    }
    page.goto(_url(console, f"models/fitted/compare?base=1&other=2&dataset={same_source['id']}"))
    expect(on_file.get_by_role("table", name="Metrics side by side")).to_be_visible()
    expect(on_file.locator(".notice-warning")).to_have_count(0)
    r = console.api.post("/v1/models/fitted@1/evaluations", json={"dataset_id": same_source["id"]})
    page.goto(_url(console, f"evaluations/{r.json()['id']}"))
    expect(page.locator("dd", has_text="40 of 40 (100.0%); new rows from the same source: about 87.5%")).to_be_visible()
    expect(page.get_by_text("held out:")).to_have_count(0)


def test_the_whole_alias_history_can_be_read(tab: Tab, console: Console) -> None:
    """A model promoted and rolled back many times: the registry events said nothing of the events past the newest
    100 (the first promotion silently missing); the page says how many there are and pages back to the first."""
    from playwright.sync_api import expect

    import_model(console, "flapping", rule_list_doc())
    import_model(console, "flapping", rule_list_doc())
    for i in range(110):
        r = console.api.put("/v1/registered-models/flapping/aliases/production", json={"version": 1 + i % 2})
        assert r.status_code == 200, r.text
    total = console.api.get("/v1/registered-models/flapping/events", params={"limit": 1}).json()["total"]
    assert total == 112
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/flapping"))
    events = page.locator("table:has(caption:text-is('Registry events, newest first')) tbody tr")
    expect(events).to_have_count(100)
    expect(page.get_by_text("The newest 100 of 112 events.")).to_be_visible()
    page.get_by_role("button", name="Show older events").click()
    expect(events).to_have_count(112)
    expect(page.get_by_role("button", name="Show older events")).to_be_hidden()
    expect(page.get_by_text("The newest 100 of 112 events.")).to_have_count(0)
    first_move = events.nth(109)  # the oldest alias event: production created on version 1
    expect(first_move).to_contain_text("alias_set")
    expect(first_move.get_by_role("link", name="v1", exact=True)).to_have_attribute("href", "#/models/flapping/1")
    expect(events.last).to_contain_text("version_created")


def test_the_training_form_proposes_the_name_the_service_would_give(tab: Tab, console: Console) -> None:
    """A dataset named `_scores ...` (or longer than a model name may be) pre-filled a model name the service
    refuses (a leading '_', over 100 characters): the form now proposes the service's own default."""
    import re

    from playwright.sync_api import expect

    name = "_scores \U0001f600 of 2026 " + "x" * 120  # an emoji: one '-' per code point, as the service
    ds = upload_csv(console, name, ["a", "target"], [[i, i % 2] for i in range(20)])
    sign_in(tab, console)
    tab.page.goto(_url(console, f"datasets/{ds['id']}"))
    field = tab.page.locator("input[name=model_name]")
    expect(field).to_be_visible()
    proposed = field.input_value()
    expected = (re.sub(r"[^A-Za-z0-9_.-]", "-", name).lstrip("-._").rstrip("-.") or "model")[:100]
    assert proposed == expected and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", proposed), proposed


def _answer(status: int, body: str) -> Any:
    """A route handler answering every request with this status and JSON body (and Retry-After: 5)."""
    return lambda route: route.fulfill(
        status=status, headers={"Retry-After": "5"}, content_type="application/json", body=body
    )


def test_the_candidate_can_be_promoted_from_the_compare_page(tab: Tab, console: Console) -> None:
    """Having compared production (base) with a candidate, the reviewer promotes the candidate on the compare page
    (it sent them back to the model page's form): the alias chosen (production preselected), the same confirmation,
    the same PUT, the same refusals (409 alias_conflict, 503 with Retry-After); afterwards the selects say the
    candidate is live and a link leads to the registry events. Not offered where the alias already points at it."""
    from playwright.sync_api import expect

    for _ in range(3):
        import_model(console, "ship", rule_list_doc())
    for alias, version in (("production", 1), ("staging", 2)):
        r = console.api.put(f"/v1/registered-models/ship/aliases/{alias}", json={"version": version})
        assert r.status_code == 200, r.text
    v3 = console.api.get("/v1/models/ship@3").json()
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/ship/compare?base=production&other=3"))
    expect(page.get_by_role("heading", name="Rules: version 1 → version 3")).to_be_visible()
    alias = page.get_by_label("Alias", exact=True)
    expect(alias).to_have_value("production")
    expect(alias.locator("option")).to_have_text(["production (version 1)", "staging (version 2)"])
    alias.select_option("staging")
    expect(page.get_by_role("button", name="Promote version 3 to staging")).to_be_visible()
    alias.select_option("production")
    promote = page.get_by_role("button", name="Promote version 3 to production")
    dialog = page.get_by_role("dialog")

    promote.click()  # the model page's confirmation; cancelled, nothing is sent
    expect(dialog.get_by_role("heading", name="Move ship@production?")).to_be_visible()
    expect(dialog).to_contain_text("From version 1 to version 3.")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert not [u for u in tab.requests if "/aliases/" in u], tab.requests

    message = page.locator(".promote-form .form-message")
    refusals = [
        (409, "alias_conflict", "alias ship@production is being changed concurrently; try again", "HTTP 409"),
        (503, "database_unavailable", "the database is unavailable", "Try again in 5 s."),
    ]
    try:
        for status, code, text, said in refusals:
            body = json.dumps({"error": {"code": code, "message": text, "details": []}})
            page.route("**/v1/registered-models/ship/aliases/production", _answer(status, body))
            promote.click()
            dialog.get_by_role("button", name="Move to version 3").click()
            expect(message.locator("[role=alert]")).to_contain_text(f"Could not move the alias: {text}")
            expect(message.locator("[role=alert]")).to_contain_text(said)
            page.unroute("**/v1/registered-models/ship/aliases/production")
    finally:  # the 503 is the test's own, not the server's
        tab.server_errors[:] = [e for e in tab.server_errors if not e.startswith("503 ")]
    assert console.api.get("/v1/registered-models/ship").json()["aliases"]["production"] != v3["id"]

    promote.click()
    with page.expect_request("**/v1/registered-models/ship/aliases/production") as sent:
        dialog.get_by_role("button", name="Move to version 3").click()
    assert sent.value.method == "PUT" and sent.value.post_data_json == {"version": 3}
    expect(message.locator(".notice-success")).to_contain_text("ship@production now points at version 3.")
    assert console.api.get("/v1/registered-models/ship").json()["aliases"]["production"] == v3["id"]
    # the selects name the aliases as they are now; production is done, staging (on version 2) is still offered
    expect(page.get_by_label("Other version").locator("option:checked")).to_have_text("version 3 (production)")
    expect(page.get_by_label("Base version").locator("option:checked")).to_have_text("version 1")
    expect(promote).to_have_count(0)
    expect(page.get_by_role("button", name="Promote version 3 to staging")).to_be_visible()
    expect(alias).to_have_count(0)  # one alias left to choose: no select
    shot(tab, "52-promoted-from-compare")

    message.get_by_role("link", name="registry events").click()
    events = page.locator("table:has(caption:text-is('Registry events, newest first')) tbody tr")
    expect(events.first).to_contain_text("alias_set")
    expect(events.first).to_contain_text("production")
    expect(events.first.get_by_role("link", name="v1", exact=True)).to_be_visible()
    expect(events.first.get_by_role("link", name="v3", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Registry events")).to_be_focused()

    # every alias on the candidate: nothing to promote
    assert console.api.put("/v1/registered-models/ship/aliases/staging", json={"version": 3}).status_code == 200
    page.goto(_url(console, "models/ship/compare?base=1&other=3"))
    expect(page.get_by_role("heading", name="Rules: version 1 → version 3")).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("^Promote"))).to_have_count(0)


def test_compare_says_which_metric_differences_favour_the_candidate(tab: Tab, console: Console) -> None:
    """The metrics side by side showed a bare signed difference: +0.1 on the Brier score is worse, on accuracy better.
    Each difference now says, in words, whether the other version (the candidate) does better or worse."""
    from playwright.sync_api import expect

    base = rule_list_doc()
    candidate = rule_list_doc()
    candidate["rules"][1].update(class_counts=[20, 10], probabilities=[21 / 32, 11 / 32])  # low income: low risk
    import_model(console, "direction", base)
    import_model(console, "direction", candidate)
    rows = [[70, 50, "yes", "high"], [30, 5, "no", "low"], [30, 50, "no", "low"]] * 10
    ds = upload_csv(console, "direction-check", ["age", "income", "smoker", "risk"], rows)
    sign_in(tab, console)
    page = tab.page

    def metric_rows() -> dict[str, list[str]]:
        metrics = page.get_by_role("table", name="Metrics side by side")
        expect(metrics).to_be_visible()
        found = [r.locator("td").all_text_contents() for r in metrics.locator("tbody tr").all()]
        return {r[0].split()[0]: r for r in found}

    page.goto(_url(console, f"models/direction/compare?base=1&other=2&dataset={ds['id']}"))
    expect(page.get_by_role("table", name="Metrics side by side").locator("th")).to_contain_text(
        ["Metric", "version 1", "version 2", "difference", "version 2 is"]
    )
    got = metric_rows()
    assert got["accuracy"][0] == "accuracy (higher is better)" and got["brier"][0] == "brier (lower is better)", got
    assert got["accuracy"][3].startswith("+") and got["accuracy"][4] == "better", got  # 2/3 -> 1
    assert got["brier"][3].startswith("−") and got["brier"][4] == "better", got  # lower is better
    assert got["roc_auc"][3] == "0" and got["roc_auc"][4] == "no change", got  # both rank every row right
    shot(tab, "53-compare-metric-direction")
    page.goto(_url(console, f"models/direction/compare?base=2&other=1&dataset={ds['id']}"))
    expect(page.get_by_role("table", name="Metrics side by side").locator("th").last).to_have_text("version 1 is")
    got = metric_rows()
    assert got["accuracy"][4] == "worse" and got["brier"][4] == "worse" and got["f1_macro"][4] == "worse", got


def _placeholder_doc() -> dict[str, Any]:
    """Categories spelt like the try page's placeholders, each deciding by its own rule."""
    doc = rule_list_doc()
    doc["features"][2]["categories"] = ["__missing__", "__other__", "(missing)", None]
    doc["rules"] = [
        {"conditions": [{"feature": "smoker", "op": "in", "values": [v]}], "class_counts": c, "probabilities": p}
        for v, c, p in (
            ("__missing__", [1, 30], [2 / 33, 31 / 33]),
            ("__other__", [2, 20], [3 / 24, 21 / 24]),
            (None, [30, 1], [31 / 33, 2 / 33]),
        )
    ]
    return doc


def test_try_sends_a_category_spelt_like_a_placeholder_as_itself(tab: Tab, console: Console) -> None:
    """The "(missing)" and "other value…" choices were told apart by the values `__missing__` and `__other__`: the
    real category `__missing__` was sent as no value (another rule decided, and was audited), and `__other__`
    opened the free-text box. Each option now sends what it says."""
    from playwright.sync_api import expect

    import_model(console, "placeholders", _placeholder_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/placeholders/1/try"))
    smoker = page.get_by_label("smoker", exact=True)
    expect(smoker.locator("option")).to_have_text(
        ["__missing__", "__other__", "(missing)", "(missing)", "other value…"]
    )
    other = page.get_by_label("smoker: other value")
    # option index -> value sent, rule that decides (0: the default rule)
    for index, sent, rule in ((0, "__missing__", 1), (1, "__other__", 2), (2, "(missing)", 0), (3, None, 3)):
        smoker.select_option(index=index)
        expect(other).to_be_hidden()
        with page.expect_request(lambda r: r.url.endswith("/predict")) as req:
            page.get_by_role("button", name="Decide", exact=True).click()
        assert json.loads(req.value.post_data)["records"][0]["smoker"] == sent, (index, req.value.post_data)
        name = "The default rule fired" if rule == 0 else f"Rule {rule} fired"
        expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    smoker.select_option(index=4)
    expect(other).to_be_visible()
    other.fill("__missing__")
    with page.expect_request(lambda r: r.url.endswith("/predict")) as req:
        page.get_by_role("button", name="Decide", exact=True).click()
    assert json.loads(req.value.post_data)["records"][0]["smoker"] == "__missing__"
    expect(page.get_by_role("heading", name="Rule 1 fired", exact=True)).to_be_visible()


def _with_metrics(extra: dict[str, Any]) -> Any:
    """A route handler answering the version as the server does, with `extra` merged into its metrics (a version
    stored before imports were checked, or by an older service)."""

    def handle(route: Any) -> None:
        body = route.fetch().json()
        body["metrics"] = {**body["metrics"], **extra}
        route.fulfill(json=body)

    return handle


def _with_version_metrics(extra: dict[str, Any]) -> Any:
    """A route handler answering a versions list with `extra` merged into each version's metrics."""

    def handle(route: Any) -> None:
        body = route.fetch().json()
        for item in body["items"]:
            item["metrics"] = {**item["metrics"], **extra}
        route.fulfill(json=body)

    return handle


BAD_SPLIT = {"n_rows": 100000, "rules": [None, {"x": 1}, {"rule_id": 1, "n": 50000, "accuracy": 0.99}]}


def test_an_imported_versions_metrics_are_labelled_as_supplied(tab: Tab, console: Console) -> None:
    """An importer's `holdout_evaluation` showed as "Held-out accuracy per rule from the 100,000 rows training held
    out", and one with a null rule broke the page ("Cannot read properties of null"). The server now refuses those
    keys on import; a version stored before that shows its metrics as supplied with the import, never as held out,
    and the versions table shows no held-out figure for it."""
    from playwright.sync_api import expect

    r = console.api.post(
        "/v1/models",
        json={"name": "supplied", "rule_list": rule_list_doc(), "metrics": {"holdout_evaluation": BAD_SPLIT}},
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "metrics.holdout_evaluation", r.text
    r = console.api.post(
        "/v1/models",
        json={
            "name": "supplied",
            "rule_list": rule_list_doc(),
            "metrics": {"notebook": {"accuracy": 0.97, "auc": "high"}},
        },
    )
    assert r.status_code == 201, r.text
    sign_in(tab, console)
    page = tab.page
    page.route(
        lambda u: u.endswith("/v1/models/supplied%401"),
        _with_metrics({"holdout_evaluation": BAD_SPLIT, "holdout": {"accuracy": 0.99}}),
    )
    page.goto(_url(console, "models/supplied/1"))
    expect(page.get_by_role("heading", name="supplied version 1")).to_be_visible()
    metrics = page.locator("section:has(h2:text-is('Metrics'))")
    expect(metrics.locator(".notice-info")).to_contain_text("Supplied with the import, not measured by the service")
    table = page.get_by_role("table", name="Metrics supplied with the import, not measured by the service")
    expect(table).to_contain_text("0.97")
    expect(table.locator("tr:has(td:text-is('auc')) td").nth(1)).to_have_text("not a number")
    expect(page.get_by_text("training held out")).to_have_count(0)
    expect(page.get_by_text("Held-out split of training")).to_have_count(0)
    expect(page.get_by_text("n=50000")).to_have_count(0)
    expect(page.locator(".rule-list").get_by_text("no held-out figure yet")).to_have_count(3)

    supplied_list = _with_version_metrics({"holdout": {"accuracy": 0.99, "weighted_f1": 0.9}})
    page.route(lambda u: "/v1/models?" in u and "name=supplied&" in u, supplied_list)
    page.goto(_url(console, "models/supplied"))
    row = page.locator("table:has(caption:text-is('Versions, newest first')) tbody tr").first
    expect(row.locator("td").nth(1)).to_have_text("—")
    expect(row.locator("td").nth(2)).to_have_text("—")


def test_per_rule_accuracy_comes_from_the_newest_evaluation_on_another_file(tab: Tab, console: Console) -> None:
    """The version page took only the newest evaluation: when that one scored the training file, an older one on
    another file was ignored for the training's split (README: "the latest evaluation on a file other than the
    training file"). Also: a badly shaped split or metric is skipped and named, not a broken page or a string
    shown as a figure; and export failures show one error box, gone on the next success."""
    from playwright.sync_api import expect

    with open(DATASETS / "heart.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    fit = upload_csv(console, "pick-fit", rows[0], rows[1:])
    # another file: rows cut from the training file would be training rows (training_overlap), not held out
    other = upload_csv(console, "pick-other", rows[0], [[str(float(r[0]) + 0.5), *r[1:]] for r in rows[1:151]])
    train_via_api(console, fit["id"], "pick", seed=0, epochs=10, n_rules=3)
    evals = [
        console.api.post("/v1/models/pick@1/evaluations", json={"dataset_id": d["id"], "target": "target"})
        for d in (other, fit)  # the newest scores the training file
    ]
    assert all(r.status_code == 201 and r.json()["state"] == "succeeded" for r in evals), [r.text for r in evals]
    on_other = evals[0].json()
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "models/pick/1"))
    note = page.locator("section:has(h2:text-is('Rule list'))")
    expect(
        note.get_by_role("link", name="the latest evaluation on a file other than the training file")
    ).to_have_attribute("href", f"#/evaluations/{on_other['id']}")
    expect(note.get_by_role("link", name="a newer evaluation")).to_have_attribute(
        "href", f"#/evaluations/{evals[1].json()['id']}"
    )
    cards = page.locator(".rule-list > li")
    for i, r in enumerate(on_other["rules"]):  # list order, then the default rule: as the cards
        if r["n"]:
            expect(cards.nth(i).locator(".rule-stats")).to_contain_text(f"n={r['n']}")

    # the split and the metrics badly shaped (no evaluation to prefer): skipped and named, the page still reads
    page.route(lambda u: "/v1/models/pick%401/evaluations?" in u, lambda r: r.fulfill(json={"items": [], "total": 0}))
    page.route(
        lambda u: u.endswith("/v1/models/pick%401"),
        _with_metrics({"holdout_evaluation": BAD_SPLIT, "holdout": {"accuracy": "0.9"}}),
    )
    page.reload()
    expect(page.get_by_text("2 per-rule entries of this block could not be read")).to_be_visible()
    expect(cards.first.locator(".rule-stats")).to_contain_text("n=50000")
    measured = page.get_by_role("table", name="Metrics measured when the version was trained")
    expect(measured.locator("tr:has(td:text-is('accuracy')) td").nth(1)).to_have_text("not a number")

    # exports: two failures, one error box; the next success clears it
    export = page.locator("section:has(h2:text-is('Export'))")
    try:
        page.route("**/export?*", _answer(503, '{"error": {"code": "database_unavailable", "message": "down"}}'))
        for _ in range(2):
            with page.expect_response(lambda r: "/export?" in r.url):
                export.get_by_role("button", name="sql").click()
            expect(export.locator(".notice-error")).to_have_count(1)
        expect(export.locator(".notice-error")).to_contain_text("Export as sql failed: down")
        page.unroute("**/export?*")
        with page.expect_download():
            export.get_by_role("button", name="text").click()
        expect(export.locator(".notice-error")).to_have_count(0)
    finally:  # the 503s are the test's own, not the server's
        tab.server_errors[:] = [e for e in tab.server_errors if not e.startswith("503 ")]


def test_the_jobs_list_and_an_evaluation_keep_polling_after_a_failed_poll(tab: Tab, console: Console) -> None:
    """One failed poll stopped the jobs list (and a background evaluation's page) from refreshing for good: the
    error stayed and the states froze. They now try again, later after each failure, and the next answer clears
    the error."""
    from playwright.sync_api import expect

    down = '{"error": {"code": "database_unavailable", "message": "the database is unavailable"}}'
    running = {
        "id": "job_0123456789abcdef01234567",
        "model_name": "polled",
        "target": "risk",
        "state": "running",
        "progress": {"epoch": 1, "n_epochs": 10},
        "created_at": "2026-01-01T00:00:00Z",
    }
    answers = [
        {"items": [running], "total": 1},
        None,  # the second poll fails
        {"items": [{**running, "state": "succeeded", "progress": {"epoch": 10, "n_epochs": 10}}], "total": 1},
    ]

    def jobs(route: Any) -> None:
        body = answers.pop(0) if len(answers) > 1 else answers[0]
        if body is None:
            _answer(503, down)(route)
        else:
            route.fulfill(json=body)

    sign_in(tab, console)
    page = tab.page
    try:
        page.route("**/v1/jobs?*", jobs)
        page.goto(_url(console, "jobs"))
        section = page.locator("section:has(h2:text-is('Jobs'))")
        expect(section.locator(".notice-error")).to_contain_text("Could not list jobs")
        expect(section.get_by_role("table")).to_contain_text("running")  # the last list stays under the error
        expect(section.locator(".notice-error")).to_have_count(0, timeout=15_000)
        expect(section.get_by_role("table")).to_contain_text("succeeded")

        import_model(console, "polled", rule_list_doc())
        ds = upload_csv(console, "polled-rows", ["age", "income", "smoker", "risk"], [[70, 50, "yes", "high"]] * 5)
        r = console.api.post("/v1/models/polled@1/evaluations", json={"dataset_id": ds["id"], "target": "risk"})
        assert r.status_code == 201, r.text
        ev = r.json()
        seen: list[int] = []

        def evaluation(route: Any) -> None:
            seen.append(1)
            if len(seen) == 1:
                route.fulfill(json={**route.fetch().json(), "state": "running", "progress": 0.5})
            elif len(seen) == 2:
                _answer(503, down)(route)
            else:
                route.fallback()

        page.route(f"**/v1/evaluations/{ev['id']}", evaluation)
        page.goto(_url(console, f"evaluations/{ev['id']}"))
        expect(page.get_by_text("Could not refresh the evaluation")).to_be_visible()
        expect(page.get_by_text("Could not refresh the evaluation")).to_have_count(0, timeout=15_000)
        expect(page.get_by_role("heading", name="Confusion matrix and calibration")).to_be_visible()
    finally:  # the 503s are the test's own, not the server's
        tab.server_errors[:] = [e for e in tab.server_errors if not e.startswith("503 ")]


def test_a_model_with_more_versions_than_one_page_lists_them_all(tab: Tab, console: Console) -> None:
    """The model page (and compare, audit, the dataset lists) asked for one page of 500 versions (200 datasets)
    and showed no more: a model's 501st version was missing from its own page. They now page through the list."""
    from urllib.parse import parse_qs, urlparse

    from playwright.sync_api import expect

    real = import_model(console, "paged", rule_list_doc())
    template = console.api.get("/v1/models", params={"name": "paged"}).json()["items"][0]
    total, seen_offsets = 1203, []

    def pages(route: Any) -> None:
        q = parse_qs(urlparse(route.request.url).query)
        offset, limit = int(q.get("offset", ["0"])[0]), int(q.get("limit", ["50"])[0])
        seen_offsets.append(offset)
        items = [
            {**template, "version": total - i, "id": real["id"] if i == total - 1 else f"mv_fake{i}"}
            for i in range(offset, min(offset + limit, total))
        ]
        route.fulfill(json={"items": items, "total": total, "limit": limit, "offset": offset})

    sign_in(tab, console)
    page = tab.page
    page.route(lambda u: "/v1/models?" in u and "name=paged" in u, pages)
    page.goto(_url(console, "models/paged"))
    rows = page.locator("table:has(caption:text-is('Versions, newest first')) tbody tr")
    expect(rows).to_have_count(total)
    assert sorted(set(seen_offsets)) == [0, 500, 1000], seen_offsets


def test_the_audit_trail_names_each_key_and_shows_a_record_that_cannot_be_read(tab: Tab, console: Console) -> None:
    """Events, jobs and audit records showed a bare key id: nobody could tell whose key it was. They now show the
    key's label (GET /v1/keys). An audit record the API lists as `unreadable` (changed outside the service: its
    output null) made the audit page fail (it read `output.prediction`); it now says it cannot be read."""
    from playwright.sync_api import expect

    import_model(console, "labelled", rule_list_doc())
    _predict(console, "labelled@1", [{"age": 70, "income": 5, "smoker": "yes"}] * 2)
    (me,) = [k for k in console.api.get("/v1/keys").json()["items"] if k["current"]]
    sign_in(tab, console)
    page = tab.page

    def labelled(route: Any) -> None:
        body = route.fetch().json()
        for k in body["items"]:
            k["label"] = "dr. jones (cardiology) \u05d3\u05f4\u05e8" if k["id"] == me["id"] else k["label"]
        route.fulfill(json=body)

    def one_unreadable(route: Any) -> None:
        body = route.fetch().json()
        body["items"][0].update(output=None, unreadable="output is not JSON ('not json')")
        route.fulfill(json=body)

    page.route("**/v1/keys", labelled)
    page.route(lambda u: "/v1/audit?" in u and "seq=" not in u, one_unreadable)
    page.goto(_url(console, "audit"))
    listed = page.locator("table:has(caption:text-is('Decisions, newest first')) tbody tr")
    expect(listed.first).to_contain_text("cannot be read")
    expect(listed.first).to_contain_text("dr. jones (cardiology)")
    expect(listed.nth(1)).to_contain_text(me["id"])
    page.goto(_url(console, "models/labelled"))
    events = page.locator("table:has(caption:text-is('Registry events, newest first')) tbody tr")
    expect(events.first).to_contain_text("dr. jones (cardiology)")
    # the label in its own isolate: a right-to-left label (or one stored before labels were checked, holding a bidi
    # override) cannot pull the key id beside it into its run
    label = events.first.locator("bdi", has_text="dr. jones (cardiology)")
    expect(label).to_have_count(1)
    expect(label.locator("code")).to_have_count(0)


def test_try_announces_the_decision_and_refuses_a_decimal_comma(tab: Tab, console: Console) -> None:
    """An accessibility probe: after Decide the answer appeared below the form and a screen reader heard nothing
    (focus stayed, nothing announced); a typed `31,5` in a number field was read by Chromium as 315 and decided.
    The answer is focused and announced; a decimal comma is refused with what to write, and nothing is sent."""
    from playwright.sync_api import expect

    import_model(console, "announced", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.url.endswith("/predict") else None)
    page.goto(_url(console, "models/announced/1/try"))
    age = page.get_by_label("age", exact=True)
    age.fill("31,5")
    page.get_by_role("button", name="Decide", exact=True).click()
    assert "decimal point: 31.5" in age.evaluate("el => el.validationMessage")
    page.wait_for_timeout(300)
    assert sent == [] and not page.locator(".try-answer .answer").count()
    age.fill("70")
    page.get_by_role("button", name="Decide", exact=True).click()
    answer = console.api.post(
        "/v1/models/announced@1/predict", json={"records": [{"age": 70, "income": 30, "smoker": "yes"}]}
    ).json()["predictions"][0]
    expect(page.locator(".try-answer")).to_be_focused()
    expect(page.locator("#live")).to_have_text(f"Decided: risk = {answer['prediction']}, by rule {answer['rule_id']}.")
    assert len(sent) == 1
    # applying a suggested change decides too: with a field holding a comma it sent that field as null
    income = page.get_by_label("income", exact=True)
    income.fill("3,5")
    page.get_by_role("button", name="Apply this change and decide again").first.click()
    page.wait_for_timeout(300)
    assert len(sent) == 1 and "decimal point: 3.5" in income.evaluate("el => el.validationMessage")


def test_each_page_names_the_tab_and_a_failed_page_offers_a_way_on(tab: Tab, console: Console) -> None:
    """The tab read "NeuRules console" on every page; a page whose data could not be loaded showed one line with
    no heading, no retry and no way back; at a narrow width the sticky top bar (three rows) hid the focused
    element under it. Each page names the tab; a failed one has a heading, Try again and a link to its list;
    the bar scrolls away on small screens."""
    from playwright.sync_api import expect

    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, "audit"))
    expect(page).to_have_title(re.compile(r"^Audit.* · NeuRules console$"))
    page.route(
        lambda u: "/v1/registered-models" in u,
        lambda route: route.fulfill(
            status=500, json={"error": {"code": "internal_error", "message": "boom", "details": []}}
        ),
    )
    page.goto(_url(console, "models"))
    expect(page.get_by_role("heading", name="Could not load this page", level=1)).to_be_visible()
    expect(page).to_have_title("Could not load this page · NeuRules console")
    expect(page.get_by_role("link", name="Back to models")).to_have_attribute("href", "#/models")
    page.unroute_all()
    tab.server_errors[:] = [e for e in tab.server_errors if "/v1/registered-models" not in e]  # ours, faked
    page.get_by_role("button", name="Try again").click()
    expect(page.get_by_role("heading", name="Could not load this page")).to_have_count(0)
    expect(page).to_have_title(re.compile(r"^Models · NeuRules console$"))
    page.set_viewport_size({"width": 375, "height": 800})
    assert page.locator(".topbar").evaluate("el => getComputedStyle(el).position") == "static"
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.locator(".topbar").evaluate("el => getComputedStyle(el).position") == "sticky"


def test_a_read_only_key_reviews_the_audit_trail_and_is_told_why_it_cannot_promote(tab: Tab, console: Console) -> None:
    """A regulator's or auditor's `read` key (`create-key --scope read`) signs in, follows the decisions and checks
    the chain like any reviewer; moving an alias is refused by the API with the key's scope named on the page, and
    nothing moves."""
    from playwright.sync_api import expect

    import_model(console, "reviewed", rule_list_doc())
    import_model(console, "reviewed", rule_list_doc())
    _predict(console, "reviewed@1", [{"age": 30, "income": 5, "smoker": "no"}])
    key = console.create_key("regulator", "read")
    sign_in(tab, console, key)
    page = tab.page
    page.goto(_url(console, "audit"))
    expect(page.get_by_role("heading", name="Audit trail", level=1)).to_be_visible()
    page.get_by_role("button", name="Verify the chain").click()
    expect(page.locator(".notice-success").first).to_contain_text("Decisions intact")
    listed = page.locator("table:has(caption:text-is('Decisions, newest first')) tbody tr")
    expect(listed.first).to_be_visible()

    page.goto(_url(console, "models/reviewed"))
    page.get_by_label("Point it at").select_option("2")
    page.get_by_role("button", name="Move alias…").click()
    page.get_by_role("dialog").get_by_role("button", name="Move to version 2").click()
    expect(page.locator(".notice-error[data-error-code=key_scope]")).to_contain_text("scope 'read'")
    assert console.api.get("/v1/registered-models/reviewed").json()["aliases"] == {}
    keys = {k["label"]: k["scope"] for k in console.api.get("/v1/keys").json()["items"]}
    assert keys["regulator"] == "read"
