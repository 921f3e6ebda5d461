"""The console's lists and forms as a user with many of them meets them: the datasets, models, column profile and
evaluation slices sort from their headings (by value, not by the text shown) and filter as one types; a field the
service refused is marked at its control (aria-invalid, the message under it, the focus on it) and unmarked once
changed. Every page is checked by axe-core (tests/e2e/console_kit.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import rule_list_doc
from tests.e2e.console_kit import Console, Tab, import_model, serve_console, shot, sign_in, upload_csv

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The service for this module."""
    with serve_console(tmp_path_factory.mktemp("console-lists")) as c:
        yield c


def _url(console: Console, fragment: str) -> str:
    return f"{console.url}/console/#/{fragment}"


def _table(tab: Tab, caption: str) -> Any:
    """The table whose caption starts with this (sorting adds the order to it)."""
    return tab.page.locator(f"table:has(caption:text-matches('^{re.escape(caption)}(,|$)'))")


def _column(tab: Tab, caption: str, index: int) -> list[str]:
    """The text of one column of the table with this caption, top to bottom."""
    rows = _table(tab, caption).locator("tbody tr")
    return [t.strip() for t in rows.locator(f"td:nth-child({index + 1})").all_text_contents()]


def _heading(tab: Tab, caption: str, label: str) -> Any:
    return _table(tab, caption).locator("thead th").filter(has_text=label)


def test_datasets_sort_by_value_and_filter_as_one_types(tab: Tab, console: Console) -> None:
    """With many datasets the list was in upload order only: finding one, or the largest, meant reading them all.
    Sorting by Rows orders 9 < 10 < 100 (not as text), a second press reverses it, the heading says so to a screen
    reader (aria-sort) and keeps the focus; the filter keeps the names holding every typed word."""
    from playwright.sync_api import expect

    sizes = {"alpha clinic": 100, "beta bank": 9, "gamma clinic": 10} | {f"misc {i}": 20 + i for i in range(5)}
    for name, n in sizes.items():
        upload_csv(console, name, ["x", "y"], [[i, i % 2] for i in range(n)])
    sign_in(tab, console)
    page = tab.page
    caption = "Datasets"
    expect(_table(tab, caption).locator("caption")).to_have_text("Datasets, newest first")
    assert _column(tab, caption, 0) == list(reversed(sizes))
    rows = _heading(tab, caption, "Rows")
    expect(rows).to_have_attribute("aria-sort", "none")
    rows.get_by_role("button").click()
    ascending = sorted(sizes.values())
    assert [int(n) for n in _column(tab, caption, 2)] == ascending  # 9, 10, 20, ..., 100: by value, not as text
    expect(_heading(tab, caption, "Rows")).to_have_attribute("aria-sort", "ascending")
    expect(_heading(tab, caption, "Rows").get_by_role("button")).to_be_focused()
    page.keyboard.press("Enter")  # the focus stayed on the heading: pressing again reverses
    assert [int(n) for n in _column(tab, caption, 2)] == ascending[::-1]
    expect(_heading(tab, caption, "Rows")).to_have_attribute("aria-sort", "descending")
    expect(_table(tab, caption).locator("caption")).to_have_text("Datasets, by rows, descending")
    expect(_heading(tab, caption, "Uploaded")).to_have_attribute("aria-sort", "none")
    box = page.get_by_label("Filter by name or file")
    box.fill("CLINIC")
    assert _column(tab, caption, 0) == ["alpha clinic", "gamma clinic"]  # still by rows, descending
    expect(page.locator(".filter-count")).to_have_text("2 of 8 shown.")
    box.fill("clinic gam")
    assert _column(tab, caption, 0) == ["gamma clinic"]
    box.fill("delta")
    expect(page.get_by_text("Nothing matches “delta”.")).to_be_visible()
    shot(tab, "lists-01-datasets-filtered-empty")
    box.fill("")
    assert len(_column(tab, caption, 0)) == 8
    shot(tab, "lists-02-datasets-sorted")


def test_a_wide_profile_and_the_models_list_filter_and_sort(tab: Tab, console: Console) -> None:
    """A 40-column file's profile is found by column name and sorts by missing values; the models list (a short
    one: no filter box) sorts by name."""
    from playwright.sync_api import expect

    header = [f"lab_{i}" for i in range(40)] + ["target"]
    rows = [[None if (j < 12 and i % (j + 2) == 0) else i * j for j in range(40)] + [i % 2] for i in range(60)]
    ds = upload_csv(console, "wide panel", header, rows)
    import_model(console, "zeta-score", rule_list_doc())
    import_model(console, "eta-score", rule_list_doc())
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"datasets/{ds['id']}"))
    page.get_by_label("Filter columns").fill("lab_1")
    names = _column(tab, "Column profile", 0)
    assert names == ["lab_1"] + [f"lab_1{i}" for i in range(10)], names
    page.get_by_label("Filter columns").fill("")
    _heading(tab, "Column profile", "Missing").get_by_role("button").click()
    _heading(tab, "Column profile", "Missing").get_by_role("button").click()
    missing = [int(v.replace(",", "")) for v in _column(tab, "Column profile", 2)]
    assert missing == sorted(missing, reverse=True) and missing[0] == 30, missing  # lab_0: every 2nd row
    shot(tab, "lists-03-profile-sorted")
    page.goto(_url(console, "models"))
    expect(page.get_by_label("Filter by name or alias")).to_have_count(0)
    _heading(tab, "Registered models", "Name").get_by_role("button").click()
    assert _column(tab, "Registered models", 0) == ["eta-score", "zeta-score"]


def test_evaluation_slices_sort_by_a_metric(tab: Tab, console: Console) -> None:
    """A reviewer looks for the group a model serves worst: the slices sort by accuracy."""
    from playwright.sync_api import expect

    doc = rule_list_doc()
    import_model(console, "sliced", doc)
    # age > 60 decides "high" in rule_list_doc; the groups' labels make their accuracies 1, 0.5 and 0
    rows = []
    for group, labels in [("north", ["high", "high"]), ("south", ["high", "low"]), ("east", ["low", "low"])]:
        rows += [[70, 50, "yes", group, lab] for lab in labels]
    ds = upload_csv(console, "regions", ["age", "income", "smoker", "region", "risk"], rows)
    r = console.api.post(
        "/v1/models/sliced@1/evaluations", json={"dataset_id": ds["id"], "target": "risk", "slice_by": "region"}
    )
    assert r.status_code in (200, 201, 202), r.text
    groups = {g["value"]: g["metrics"]["accuracy"] for g in r.json()["slices"]["groups"]}
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"evaluations/{r.json()['id']}"))
    caption = "Metrics per group of region"
    _heading(tab, caption, "Accuracy").get_by_role("button").click()
    expected = sorted(groups, key=lambda g: groups[g])
    assert _column(tab, caption, 0) == expected, (groups, _column(tab, caption, 0))
    assert len(set(groups.values())) == 3, groups  # the order is told by the values, not by ties
    expect(_heading(tab, caption, "Accuracy")).to_have_attribute("aria-sort", "ascending")


def test_a_refused_field_is_marked_at_its_control(tab: Tab, console: Console) -> None:
    """The service's 422 named the field (`model_name`, `name`, `records[0].age`) only in the box above the form;
    the control itself said nothing to a screen reader. It is now marked invalid, described by the message and
    focused; changing it removes the mark; the next refusal marks only what it names."""
    from playwright.sync_api import expect

    ds = upload_csv(console, "marks", ["x", "target"], [[i, i % 2] for i in range(30)])
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"datasets/{ds['id']}"))
    name = page.get_by_label("Model name")
    name.fill("no spaces allowed!")
    page.get_by_role("button", name="Start training").click()
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_be_focused()
    expect(name).to_have_accessible_description(
        re.compile(r"^'no spaces allowed!' is not a valid model name: 1 to 100 .* digit\. Versions are stored under")
    )
    assert page.get_by_label("Rules").get_attribute("aria-invalid") is None
    shot(tab, "lists-04-train-field-refused")
    name.fill("fine-name")
    expect(name).not_to_have_attribute("aria-invalid", "true")
    assert page.locator(".field-error").count() == 0
    hint = page.get_by_label("Target column").get_attribute("aria-describedby")
    assert hint and "error" not in hint  # the hint stays, no error id was left behind

    page.goto(_url(console, "datasets"))
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "d.csv", "mimeType": "text/csv", "buffer": b"x,target\n1,0\n2,1\n"}]
    )
    label = page.get_by_label("Dataset name")
    label.fill("a\u202eb")
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(label).to_have_attribute("aria-invalid", "true")
    expect(label).to_have_accessible_description(
        re.compile(r"^must not contain control or invisible characters \(found U\+202E\)\.")
    )

    import_model(console, "marked", rule_list_doc())
    page.goto(_url(console, "models/marked/1/try"))
    refusal = {
        "error": {
            "code": "invalid_record",
            "message": "records[0].age: out of range",
            "details": [{"field": "records[0].age", "message": "out of range"}],
        }
    }
    page.route(lambda u: u.endswith("/predict"), lambda route: route.fulfill(status=422, json=refusal))
    page.get_by_role("button", name="Decide", exact=True).click()
    age = page.get_by_label("age", exact=True)
    expect(age).to_have_attribute("aria-invalid", "true")
    expect(age).to_be_focused()
    assert page.get_by_label("income", exact=True).get_attribute("aria-invalid") is None
    page.unroute_all()
    page.get_by_role("button", name="Decide", exact=True).click()
    expect(page.locator(".try-answer .answer")).to_be_visible()
    expect(age).not_to_have_attribute("aria-invalid", "true")  # a new answer clears the marks


def test_a_list_read_in_pages_lists_an_item_once_when_one_is_added_meanwhile(tab: Tab, console: Console) -> None:
    """Lists are read 500 at a time, newest first: a dataset uploaded between two pages pushed the first page's
    last item onto the second, and the list showed it twice. Each item is listed once."""
    from playwright.sync_api import expect

    def item(i: int) -> dict[str, Any]:
        return {
            "id": f"ds_{i:024x}",
            "name": f"set {i}",
            "filename": "f.csv",
            "n_rows": i,
            "n_columns": 2,
            "size_bytes": 10,
            "created_at": "2026-11-27T00:00:00Z",
        }

    before = [item(i) for i in range(501, 0, -1)]  # newest first
    after = [item(502), *before]  # one uploaded after the first page was read

    def answer(route: Any) -> None:
        offset = int(route.request.url.split("offset=")[1].split("&")[0])
        rows = (before if offset == 0 else after)[offset : offset + 500]
        route.fulfill(json={"items": rows, "total": len(before) if offset == 0 else len(after)})

    sign_in(tab, console)
    page = tab.page
    page.route(lambda u: "/v1/datasets?" in u, answer)
    page.goto(_url(console, "models"))
    page.goto(_url(console, "datasets"))
    rows = _table(tab, "Datasets").locator("tbody tr")
    expect(rows).to_have_count(501)
    names = _column(tab, "Datasets", 0)
    assert len(set(names)) == 501 and names[0] == "set 501" and names[-1] == "set 1", names[-3:]
    page.unroute_all()


def test_rows_without_a_target_are_announced_before_and_after_training(tab: Tab, console: Console) -> None:
    """A data probe: a clinical target None / Minor / Major ("None" = no complication) lost its None rows, read as
    missing, and the job and version said nothing (44 % of the rows, holdout accuracy 1.0). The training form says
    how many rows have no target value, and the version page says they were left out."""
    from playwright.sync_api import expect

    from tests.e2e.console_kit import train_via_api

    rows = [[age, ["None", "Minor", "Major"][age % 3]] for age in range(20, 80)]
    ds = upload_csv(console, "complications", ["age", "outcome"], rows)
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"datasets/{ds['id']}"))
    page.get_by_label("Target column").select_option("outcome")
    expect(page.locator(".train-form .notice-warning")).to_contain_text("20 of 60 rows have no value in outcome")
    page.get_by_label("Target column").select_option("age")
    expect(page.locator(".train-form .notice-warning")).to_have_count(0)
    job = train_via_api(console, ds["id"], "complications", seed=0, epochs=5, target="outcome", n_rules=3)
    assert job["model_version_id"]
    page.goto(_url(console, "models/complications/1"))
    expect(page.get_by_text("20 rows without a target value")).to_be_visible()
    shot(tab, "lists-05-version-rows-without-target")


def test_the_jobs_list_keeps_its_order_and_the_headings_focus_while_it_polls(tab: Tab, console: Console) -> None:
    """A reviewer: the jobs list is drawn again every 2 s while a job runs, and the heading just pressed went with
    the old table: the focus fell to the page, so a keyboard user could not press it again to reverse the order."""
    from playwright.sync_api import expect

    from tests.e2e.console_kit import wait_job

    ds = upload_csv(console, "long-job", ["u", "label"], [[i, i % 2] for i in range(40)])
    long = {"dataset_id": ds["id"], "target": "label", "parameters": {"n_rules": 2, "epochs": 5000}}
    jobs = [console.api.post("/v1/jobs", json=long) for _ in range(2)]  # one runs, one waits: two rows to sort
    assert [r.status_code for r in jobs] == [202, 202], [r.text for r in jobs]
    try:
        sign_in(tab, console)
        page = tab.page
        polls: list[str] = []
        page.on("request", lambda q: polls.append(q.url) if "/v1/jobs?" in q.url else None)
        page.goto(_url(console, "jobs"))
        state = _heading(tab, "Training jobs", "State")
        state.get_by_role("button").click()
        expect(state).to_have_attribute("aria-sort", "ascending")
        seen = len(polls)
        deadline = 30
        while len(polls) < seen + 2 and deadline:  # two redraws of the list
            page.wait_for_timeout(1000)
            deadline -= 1
        assert len(polls) >= seen + 2, polls
        expect(_heading(tab, "Training jobs", "State")).to_have_attribute("aria-sort", "ascending")
        expect(_heading(tab, "Training jobs", "State").get_by_role("button")).to_be_focused()
        page.keyboard.press("Enter")
        expect(_heading(tab, "Training jobs", "State")).to_have_attribute("aria-sort", "descending")
        link = page.get_by_role("link", name=jobs[0].json()["id"])  # a job's link keeps the focus too (a probe)
        link.focus()
        seen = len(polls)
        while len(polls) < seen + 2 and deadline:
            page.wait_for_timeout(1000)
            deadline -= 1
        expect(page.get_by_role("link", name=jobs[0].json()["id"])).to_be_focused()
    finally:
        for r in jobs:
            console.api.post(f"/v1/jobs/{r.json()['id']}/cancel")
        for r in jobs:
            wait_job(console, r.json()["id"])


def test_slices_of_a_numeric_column_sort_by_value(tab: Tab, console: Console) -> None:
    """A console probe: slice groups come as text ('-0.5'), and sorted as text gave -0.5, -0.25, -0.75, ...; they
    sort by value."""
    from playwright.sync_api import expect

    import_model(console, "graded", rule_list_doc())
    grades = ["-1.0", "-0.75", "-0.5", "-0.25", "0.125", "0.5", "10"]
    rows = [[70, 50, "yes", g, lab] for g in grades for lab in ("high", "low")]
    ds = upload_csv(console, "grades", ["age", "income", "smoker", "grade", "risk"], rows)
    r = console.api.post(
        "/v1/models/graded@1/evaluations", json={"dataset_id": ds["id"], "target": "risk", "slice_by": "grade"}
    )
    assert r.status_code in (200, 201, 202), r.text
    sign_in(tab, console)
    page = tab.page
    page.goto(_url(console, f"evaluations/{r.json()['id']}"))
    caption = "Metrics per group of grade"
    _heading(tab, caption, "grade").get_by_role("button").click()
    assert [float(v) for v in _column(tab, caption, 0)] == sorted(float(g) for g in grades)
    page.keyboard.press("Enter")
    expect(_heading(tab, caption, "grade")).to_have_attribute("aria-sort", "descending")
    assert [float(v) for v in _column(tab, caption, 0)] == sorted((float(g) for g in grades), reverse=True)


def test_nothing_is_wider_than_a_phone_at_double_zoom(tab: Tab, console: Console) -> None:
    """A console probe: at 375 px and 200 % zoom (188 CSS px) the upload form's fields (at least 180 px) and the
    brand pushed the datasets page to 261 px, so it scrolled sideways. Pages reflow (tables scroll in their box)."""
    upload_csv(console, "narrow", ["x", "y"], [[i, i % 2] for i in range(10)])
    sign_in(tab, console)
    page = tab.page
    page.set_viewport_size({"width": 188, "height": 600})
    try:
        for fragment in ("datasets", "jobs", "models", "audit"):
            page.goto(_url(console, fragment))
            page.wait_for_selector("h1")
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= 188, (fragment, wide)
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
