"""The crisp rule-list document: validation, evaluation, explanations and exports."""

from __future__ import annotations

import copy
import json
import math
import re
import sqlite3
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from models.rulelist import RuleList, category_key, label_key, smoothed_probabilities

DOC = {
    "format": "neurules.rulelist",
    "version": 1,
    "target": "risk",
    "classes": ["low", "high"],
    "features": [
        {"name": "age", "type": "numeric", "fill_value": 40.0, "min": 18.0, "max": 90.0},
        {"name": "chest pain", "type": "categorical", "categories": ["typical", "asymptomatic", None]},
        {"name": "smoker", "type": "categorical", "categories": ["true", "false"]},
        {"name": "unused", "type": "numeric", "fill_value": 0.0},
    ],
    "rules": [
        {
            "conditions": [
                {"feature": "age", "op": "between", "low": 45.5, "high": 66.4},
                {"feature": "chest pain", "op": "in", "values": ["asymptomatic"]},
            ],
            "class_counts": [2, 8],
            "probabilities": [0.25, 0.75],
        },
        {
            "conditions": [{"feature": "smoker", "op": "not_in", "values": ["false", None]}],
            "class_counts": [1, 3],
            "probabilities": [1 / 3, 2 / 3],
        },
        {
            "conditions": [{"feature": "age", "op": "between", "low": None, "high": 30.0}],
            "class_counts": [5, 0],
            "probabilities": [6 / 7, 1 / 7],
        },
    ],
    "default": {"class_counts": [6, 4], "probabilities": [7 / 12, 5 / 12]},
    "smoothing": 1.0,
    "metadata": {"seed": 1},
}

RECORDS = [
    {"age": 50, "chest pain": "asymptomatic", "smoker": False, "unused": 1.0},  # rule 1
    {"age": 50, "chest pain": "typical", "smoker": True, "unused": 1.0},  # rule 2
    {"age": 25, "chest pain": "typical", "smoker": False, "unused": None},  # rule 3
    {"age": None, "chest pain": "asymptomatic", "smoker": "false", "unused": 1.0},  # age -> 40: default
    {"age": 66.4, "chest pain": "asymptomatic", "smoker": None, "unused": 1.0},  # bound inclusive: rule 1
    {"age": 45.5, "chest pain": "never-seen", "smoker": "maybe", "unused": 1.0},  # unseen: rule 2
    {"age": 31, "chest pain": None, "smoker": None, "unused": 1.0},  # default
]
EXPECTED_IDS = [1, 2, 3, 0, 1, 2, 0]


@pytest.fixture()
def rl() -> RuleList:
    return RuleList.from_dict(DOC)


def test_round_trip_is_exact(rl: RuleList) -> None:
    doc = rl.to_dict()
    assert doc == DOC
    assert json.loads(json.dumps(doc)) == DOC
    assert RuleList.from_dict(json.loads(json.dumps(doc))) == rl


def test_apply_predict_and_proba(rl: RuleList) -> None:
    assert rl.apply(RECORDS).tolist() == EXPECTED_IDS
    assert rl.predict(RECORDS).tolist() == ["high", "high", "low", "low", "high", "high", "low"]
    proba = rl.predict_proba(RECORDS)
    assert proba.shape == (7, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba[2], [6 / 7, 1 / 7])


def test_input_shapes_agree(rl: RuleList) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(RECORDS)
    columns = {k: [r[k] for r in RECORDS] for k in RECORDS[0]}
    array = np.array([[r[f] for f in rl.feature_names] for r in RECORDS], dtype=object)
    for X in (frame, columns, array):
        assert rl.apply(X).tolist() == EXPECTED_IDS


def test_pandas_nullable_and_string_dtypes(rl: RuleList) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(RECORDS)
    frame["age"] = frame["age"].astype("Float64")  # pd.NA for the missing age
    frame["chest pain"] = frame["chest pain"].astype("string")
    frame["smoker"] = frame["smoker"].map(category_key).astype("string")
    frame.loc[5, "smoker"] = "maybe"
    assert rl.apply(frame).tolist() == EXPECTED_IDS


def test_integer_classes_predict_integers() -> None:
    doc = copy.deepcopy(DOC)
    doc["classes"] = [0, 1]
    out = RuleList.from_dict(doc).predict(RECORDS)
    assert out.dtype == np.int64
    assert out.tolist() == [1, 1, 0, 0, 1, 1, 0]


def test_explain_matched_rule_and_failures(rl: RuleList) -> None:
    ex = rl.explain(RECORDS[1])
    assert ex["rule_id"] == 2 and not ex["is_default"]
    assert ex["prediction"] == "high"
    assert ex["rule_text"] == "smoker not in {false, <missing>}"
    assert ex["conditions"][0]["value"] is True and ex["conditions"][0]["holds"]
    [skipped] = ex["not_fired"]
    assert skipped["rule_id"] == 1
    failed = skipped["failed_condition"]
    assert failed["feature"] == "chest pain" and failed["value"] == "typical" and not failed["holds"]


def test_explain_default_and_missing_fill(rl: RuleList) -> None:
    ex = rl.explain(RECORDS[3])
    assert ex["rule_id"] == 0 and ex["is_default"]
    assert [n["rule_id"] for n in ex["not_fired"]] == [1, 2, 3]
    first = ex["not_fired"][0]["failed_condition"]
    assert first["feature"] == "age" and first["value"] is None and first["filled_value"] == 40.0
    assert math.isclose(sum(ex["probabilities"]), 1.0)


def test_explain_agrees_with_apply(rl: RuleList) -> None:
    assert [rl.explain(r)["rule_id"] for r in RECORDS] == EXPECTED_IDS


def test_text_rendering(rl: RuleList) -> None:
    text = rl.to_text()
    lines = text.splitlines()
    assert lines[0].startswith("if 45.5 <= age <= 66.4 and chest pain in {asymptomatic} then risk = high")
    assert lines[1].startswith("else if smoker not in {false, <missing>} then risk = high")
    assert lines[2].startswith("else if age <= 30 then risk = low")
    assert lines[3].startswith("else risk = low") and "support 10" in lines[3]


def test_text_quotes_names_and_categories_that_would_read_ambiguously() -> None:
    """A name holding an operator or a rule word, or a category holding a comma, brace or the missing
    marker, is written as a JSON string; plain names (spaces and punctuation included) stay as they are."""
    doc = copy.deepcopy(DOC)
    renames = {"age": "a=b", "chest pain": "pain and fever", "smoker": "smoker"}
    for f in doc["features"]:
        f["name"] = renames.get(f["name"], f["name"])
    doc["features"][2]["categories"] = ["true", "no, never", "<missing>"]
    doc["rules"][0]["conditions"][0]["feature"] = "a=b"
    doc["rules"][0]["conditions"][1]["feature"] = "pain and fever"
    doc["rules"][1]["conditions"][0]["values"] = ["no, never", "<missing>", None]
    doc["rules"][2]["conditions"][0]["feature"] = "a=b"
    doc["target"], doc["classes"] = "risk (5y)", ["low", "very high"]
    lines = RuleList.from_dict(doc).to_text().splitlines()
    assert lines[0].startswith(
        'if 45.5 <= "a=b" <= 66.4 and "pain and fever" in {asymptomatic} then risk (5y) = very high'
    )
    assert lines[1].startswith('else if smoker not in {"no, never", "<missing>", <missing>} then')
    assert lines[2].startswith('else if "a=b" <= 30 then risk (5y) = low')
    doc["features"][0]["name"] = doc["rules"][0]["conditions"][0]["feature"] = "30"  # a name that reads as a number
    doc["rules"][2]["conditions"][0]["feature"] = "30"
    doc["features"][1]["name"] = doc["rules"][0]["conditions"][1]["feature"] = "pain\u2028type"  # a line separator
    text = RuleList.from_dict(doc).to_text()
    assert len(text.splitlines()) == 4, text
    assert text.startswith('if 45.5 <= "30" <= 66.4 and "pain\\u2028type" in {asymptomatic} then')


def test_python_export_matches(rl: RuleList) -> None:
    namespace: dict = {}
    exec(compile(rl.to_python(), "<rulelist>", "exec"), namespace)
    for rec, rid in zip(RECORDS, EXPECTED_IDS, strict=True):
        cls, got_id, probs = namespace["predict"](rec)
        assert got_id == rid
        assert cls == rl.prediction_of(rid)
        assert probs == list(rl.rule(rid).probabilities)


def test_sql_export_matches(rl: RuleList) -> None:
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE patients (age REAL, "chest pain" TEXT, smoker TEXT, unused REAL)')
    rows = [(r["age"], r["chest pain"], category_key(r["smoker"]), r["unused"]) for r in RECORDS]
    con.executemany("INSERT INTO patients VALUES (?, ?, ?, ?)", rows)
    ids = [row[-1] for row in con.execute(rl.to_sql("patients", output="rule_id"))]
    assert ids == EXPECTED_IDS
    preds = [row[-1] for row in con.execute(rl.to_sql("patients"))]
    assert preds == rl.predict(RECORDS).tolist()


def test_sql_export_reads_booleans_stored_as_integers(rl: RuleList) -> None:
    """SQLite keeps a boolean as 1 / 0: a feature trained on booleans reads them as true / false.

    A categorical feature with other categories still compares '1' as the text it is."""
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE patients (age REAL, "chest pain" TEXT, smoker, unused REAL)')
    rows = [(r["age"], r["chest pain"], r["smoker"], r["unused"]) for r in RECORDS]  # True/False stored as 1/0
    con.executemany("INSERT INTO patients VALUES (?, ?, ?, ?)", rows)
    assert [row[-1] for row in con.execute(rl.to_sql("patients", output="rule_id"))] == EXPECTED_IDS
    doc = copy.deepcopy(DOC)
    doc["features"][2]["categories"] = ["true", "false", "1"]  # "1" is a category of its own here
    mixed = RuleList.from_dict(doc)
    con.execute("INSERT INTO patients VALUES (50, 'typical', '1', 1.0)")
    assert [row[-1] for row in con.execute(mixed.to_sql("patients", output="rule_id"))][-1] == mixed.apply(
        [{"age": 50, "chest pain": "typical", "smoker": "1", "unused": 1.0}]
    ).tolist()[0]


def test_category_key() -> None:
    assert category_key(None) is None
    assert category_key(float("nan")) is None
    assert category_key("") is None
    assert category_key(True) == "true" and category_key(np.bool_(False)) == "false"
    assert category_key(2.0) == "2" and category_key(np.int64(3)) == "3" and category_key(2.5) == "2.5"
    assert category_key("red") == "red"


def test_build_measures_counts() -> None:
    rl = RuleList.from_dict(DOC)
    labels = ["high", "low", "low", "low", "high", "high", "high"]
    built = RuleList.build(
        classes=rl.classes,
        features=rl.features,
        rules=[r.conditions for r in rl.rules],
        X=RECORDS,
        y=labels,
        smoothing=1.0,
    )
    assert [r.class_counts for r in built.rules] == [(0, 2), (1, 1), (1, 0)]
    assert built.default.class_counts == (1, 1)
    assert built.rules[0].probabilities == smoothed_probabilities((0, 2), 1.0) == (0.25, 0.75)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d.update(classes=["a"]), "classes"),
        (lambda d: d["rules"][0]["conditions"][0].update(low="x"), "rules[0].conditions[0].low"),
        (lambda d: d["rules"][0]["conditions"][0].update(low=70.0), "rules[0].conditions[0].low"),
        (lambda d: d["rules"][1]["conditions"][0].update(feature="nope"), "rules[1].conditions[0].feature"),
        (lambda d: d["rules"][1]["conditions"][0].update(op="between"), "rules[1].conditions[0].op"),
        (lambda d: d["rules"][1]["conditions"][0].update(feature=["age"]), "rules[1].conditions[0].feature"),
        (lambda d: d["rules"][2].update(probabilities=[0.5, 0.6]), "rules[2].probabilities"),
        (lambda d: d["rules"][2].update(class_counts=[1]), "rules[2].class_counts"),
        (lambda d: d["default"].update(class_counts=[-1, 2]), "default.class_counts[0]"),
        (lambda d: d["features"].append({"name": "age", "type": "numeric", "fill_value": 1}), "features[4].name"),
        (lambda d: d["features"][0].update(fill_value=float("nan")), "features[0].fill_value"),
        (lambda d: d["features"][0].update(fill_value=10**400), "features[0].fill_value"),
        (lambda d: d["features"][1].update(name="  "), "features[1].name"),
    ],
)
def test_malformed_documents_name_the_path(mutate, path: str) -> None:
    doc = copy.deepcopy(DOC)
    mutate(doc)
    with pytest.raises(ValueError, match=re.escape(path) + ":"):
        RuleList.from_dict(doc)


def test_a_document_error_names_its_path_and_survives_pickling() -> None:
    import pickle

    from models.rulelist import DocumentError

    doc = copy.deepcopy(DOC)
    doc["rules"][0]["conditions"][0]["low"] = "x"
    with pytest.raises(DocumentError) as info:
        RuleList.from_dict(doc)
    again = pickle.loads(pickle.dumps(info.value))
    assert again.path == info.value.path == "rules[0].conditions[0].low"
    assert (
        str(again)
        == str(info.value)
        == "invalid rule list document: rules[0].conditions[0].low: must be a finite number or null"
    )


def test_mistyped_numeric_value_names_feature_and_row(rl: RuleList) -> None:
    bad = [dict(RECORDS[0]), dict(RECORDS[1], age="old")]
    with pytest.raises(ValueError, match=r"'age': row 1"):
        rl.apply(bad)


def test_missing_used_feature_is_an_error(rl: RuleList) -> None:
    with pytest.raises(ValueError, match="record 0: missing feature"):
        rl.apply([{"age": 1}])


def test_rulelist_never_imports_torch_or_pandas() -> None:
    code = (
        "import sys, models; from models import RuleList; "
        f"RuleList.from_dict({DOC!r}).predict([{RECORDS[0]!r}]); "
        "assert 'torch' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_two_valued_numeric_features_read_as_equalities() -> None:
    doc = copy.deepcopy(DOC)
    doc["features"].append({"name": "diabetic", "type": "numeric", "fill_value": 0.0, "values": [0.0, 1.0]})
    doc["rules"][1]["conditions"].append({"feature": "diabetic", "op": "between", "low": 0.5, "high": None})
    doc["rules"][2]["conditions"].append({"feature": "diabetic", "op": "between", "low": None, "high": 0.5})
    rl = RuleList.from_dict(doc)
    assert rl.to_dict() == doc
    text = rl.to_text()
    assert "diabetic = 1" in text and "diabetic = 0" in text and "diabetic >=" not in text
    assert "-- rule 2: smoker not in {false, <missing>} and diabetic = 1" in rl.to_sql("t")
    assert "# rule 3: age <= 30 and diabetic = 0" in rl.to_python()
    assert rl.rule_text(2) == "smoker not in {false, <missing>} and diabetic = 1"
    assert rl.rules[1].text() == rl.rule_text(2)  # conditions of a parsed list carry the feature's values
    assert rl.rules[1].conditions[1] == RuleList.from_dict(DOC).rules[1].conditions[0].__class__(
        feature="diabetic", op="between", low=0.5, high=None
    )  # ... which take no part in equality
    assert rl.condition_text(rl.rules[2].conditions[1]) == "diabetic = 0"
    rec = {**RECORDS[1], "diabetic": 1}
    explained = rl.explain(rec)
    assert explained["rule_id"] == 2 and explained["conditions"][1]["text"] == "diabetic = 1"
    assert rl.explain({**rec, "diabetic": 0})["not_fired"][1]["failed_condition"]["text"] == "diabetic = 1"
    # evaluation is unchanged: a value between the two is compared numerically
    assert rl.apply([{**RECORDS[1], "diabetic": 0.7}])[0] == 2
    old = copy.deepcopy(doc)
    del old["features"][-1]["values"]  # documents without `values` stay valid and read as before
    assert "diabetic >= 0.5" in RuleList.from_dict(old).to_text()
    bad = copy.deepcopy(doc)
    bad["features"][-1]["values"] = [1.0, 0.0]
    with pytest.raises(ValueError, match=r"features\[4\].values"):
        RuleList.from_dict(bad)


def test_short_thresholds_render_every_digit_they_have() -> None:
    from models.rulelist import Condition

    stamp = Condition(feature="ts", op="between", low=1700000000.5, high=1700000002.5)
    assert stamp.text() == "1700000000.5 <= ts <= 1700000002.5"  # was 1.7e+09 <= ts <= 1.7e+09
    assert Condition(feature="t", op="between", high=1.0000000003).text() == "t <= 1.0000000003"
    # not short: the shortest text that reads back as the number (6 digits read 0.3, another bound)
    assert Condition(feature="t", op="between", low=0.1 + 0.2).text() == "t >= 0.30000000000000004"


def test_whole_number_classes_beyond_int64_predict_as_python_ints() -> None:
    doc = copy.deepcopy(DOC)
    doc["classes"] = [2**63, 2**64]  # was an OverflowError from astype(int64)
    out = RuleList.from_dict(doc).predict(RECORDS)
    assert out.tolist() == [2**64, 2**64, 2**63, 2**63, 2**64, 2**64, 2**63]
    doc["classes"] = [-(2**63), 2**63 - 1]  # the int64 range itself stays int64
    assert RuleList.from_dict(doc).predict(RECORDS).dtype == np.int64


def test_booleans_and_numbers_in_one_column_keep_their_own_keys() -> None:
    # True == 1 and False == 0 hash alike: a per-column cache once gave a later True the key of
    # an earlier 1 ("1", not "true"), so predict disagreed with explain and the Python export
    doc = copy.deepcopy(DOC)
    doc["rules"][1]["conditions"] = [{"feature": "smoker", "op": "in", "values": ["true"]}]
    rl = RuleList.from_dict(doc)
    records = [{**RECORDS[1], "smoker": v} for v in (1, True, 0, False, 1.0, True, np.True_)]
    ids = rl.apply(records).tolist()
    assert ids == [0, 2, 0, 0, 0, 2, 2]
    assert ids == [rl.explain(r)["rule_id"] for r in records]
    ns: dict[str, object] = {}
    exec(rl.to_python(), ns)
    assert ids == [ns["predict"](r)[1] for r in records]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("value", "message"),
    [(10**400, r"'age': row 1: the number is too large"), (1 + 2j, r"'age': row 1: expected a real number")],
)
def test_huge_whole_numbers_and_complex_values_name_feature_and_row(rl: RuleList, value: object, message: str) -> None:
    records = [dict(RECORDS[0]), dict(RECORDS[1], age=value)]
    with pytest.raises(ValueError, match=message):
        rl.apply(records)
    with pytest.raises(ValueError, match=message):
        rl.apply({k: [r[k] for r in records] for k in records[0]})
    with pytest.raises(ValueError, match=message.replace("row 1", "row 0")):
        rl.explain(records[1])
    with pytest.raises(ValueError, match=r"expected a real number"):  # not its real part, silently
        rl.apply({k: np.array([complex(v)]) if k == "age" else [v] for k, v in RECORDS[0].items()})


def test_a_mapping_of_columns_needs_lists_of_one_length(rl: RuleList) -> None:
    columns = {k: [r[k] for r in RECORDS] for k in RECORDS[0]}
    short = dict(columns, smoker=columns["smoker"][:1])  # was broadcast over every row, silently
    with pytest.raises(ValueError, match=r"column 'smoker' has 1 values, but column 'age' has 7"):
        rl.apply(short)
    with pytest.raises(ValueError, match=r"column 'age': a mapping of columns needs a list of values"):
        rl.apply(RECORDS[0])  # one record's scalars (was a TypeError from len())
    assert rl.apply(dict(columns, unused=[None])).tolist() == EXPECTED_IDS  # an unused column is not read


def test_smoothing_near_the_float_limit_gives_probabilities_that_sum_to_one() -> None:
    """(count + s) / (n + s k) with s * k past the float range: the same ratio, still a valid document."""
    from models.rulelist import smoothed_probabilities

    p = smoothed_probabilities([3, 1], 1e308)
    assert p == pytest.approx((0.5, 0.5)) and abs(sum(p) - 1.0) < 1e-12
    assert smoothed_probabilities([3, 1], 1.0) == (4 / 6, 2 / 6)


def test_explain_reaches_an_undeclared_feature_only_when_a_record_does() -> None:
    """A list built in Python with a condition on a feature it does not declare (from_dict refuses one):
    records decided before that condition are explained; one that reaches it is a KeyError naming it."""
    from dataclasses import replace

    from models.rulelist import Condition, Rule, RuleList
    from tests.conftest import rule_list_doc

    rl = RuleList.from_dict(rule_list_doc())
    ghost = Rule(
        conditions=(Condition(feature="ghost", op="between", low=1.0),), class_counts=(1, 1), probabilities=(0.5, 0.5)
    )
    odd = replace(rl, rules=(rl.rules[0], ghost))
    first = next(r for r in _records_of(rl) if rl.explain(r)["rule_id"] == 1)
    assert odd.explain(first)["rule_id"] == 1
    later = next(r for r in _records_of(rl) if rl.explain(r)["rule_id"] != 1)
    with pytest.raises(KeyError, match="ghost"):
        odd.explain(later)


def _records_of(rl: Any) -> list[dict[str, Any]]:
    """A spread of records over the list's features (numbers across a wide range, each category)."""
    import itertools

    choices = [[0.0, 30.0, 67.0, 1e3] if f.type == "numeric" else [*(f.categories or ()), "other"] for f in rl.features]
    return [dict(zip([f.name for f in rl.features], combo, strict=True)) for combo in itertools.product(*choices)]


def test_sql_export_compares_numbers_exactly_sqlite() -> None:
    """SQLite writes a REAL as text with 15 digits: read through its text, 0.30000000000000004 was 0.3
    and fell below a bound at 0.30000000000000004 (another rule than RuleList's)."""
    rl = _bound_list(0.30000000000000004)
    values = [0.30000000000000004, 0.3, 1.0000000000000003e20, 1e20, None]
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE t ("a" REAL, "b" TEXT)')
    con.executemany("INSERT INTO t VALUES (?, ?)", [(v, None) for v in values])
    assert [row[-1] for row in con.execute(rl.to_sql("t", output="rule_id"))] == rl.apply({"a": values}).tolist()
    texts = ["0.30000000000000004", " 0.30000000000000004 ", "0.3", "  ", "", None]  # numbers stored as text
    con.execute('CREATE TABLE s ("a" TEXT, "b" TEXT)')
    con.executemany("INSERT INTO s VALUES (?, ?)", [(v, None) for v in texts])
    assert [row[-1] for row in con.execute(rl.to_sql("s", output="rule_id"))] == rl.apply({"a": texts}).tolist()
    assert rl.apply({"a": texts}).tolist() == [1, 1, 2, 0, 0, 0]


@pytest.mark.integration
def test_sql_export_compares_numbers_exactly_postgresql() -> None:
    """The same SQL on PostgreSQL: DOUBLE PRECISION and TEXT columns, compared as numbers."""
    from tests.conftest import PG_ADMIN_URL, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    import psycopg

    rl = _bound_list(0.30000000000000004)
    rows = [(0.30000000000000004, "0.30000000000000004"), (0.3, " 0.3 "), (1e20, "  "), (None, "")]
    with psycopg.connect(PG_ADMIN_URL.replace("postgresql+psycopg", "postgresql")) as con:
        con.execute('CREATE TEMP TABLE n ("a" DOUBLE PRECISION, "b" TEXT)')
        con.execute('CREATE TEMP TABLE s ("a" TEXT, "b" TEXT)')
        with con.cursor() as cur:
            cur.executemany("INSERT INTO n VALUES (%s, NULL)", [(a,) for a, _ in rows])
            cur.executemany("INSERT INTO s VALUES (%s, NULL)", [(t,) for _, t in rows])
        numbers = [row[-1] for row in con.execute(rl.to_sql("n", output="rule_id"))]
        texts = [row[-1] for row in con.execute(rl.to_sql("s", output="rule_id"))]
    assert numbers == rl.apply({"a": [a for a, _ in rows]}).tolist() == [1, 2, 1, 0]
    assert texts == rl.apply({"a": [t for _, t in rows]}).tolist() == [1, 2, 0, 0]


def test_sql_export_reads_nan_as_missing() -> None:
    """RuleList reads NaN (a float, or the text 'NaN') as missing; the SQL took the text 'NaN' as 0.0 in SQLite
    (another rule), and an export probe found titanic rows decided otherwise on PostgreSQL, whose float NaN is no
    NULL. The SQL stays printable ASCII (a line-ending conversion of the file changes nothing)."""
    rl = _bound_list(0.30000000000000004)
    texts = ["NaN", "nan", " -NaN ", "  ", "0.3", None]
    expected = rl.apply({"a": texts}).tolist()
    assert expected == [0, 0, 0, 0, 2, 0]
    assert all(" " <= ch <= "~" for ch in rl.to_sql("s").replace("\n", ""))
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE s ("a" TEXT, "b" TEXT)')
    con.executemany("INSERT INTO s VALUES (?, ?)", [(v, None) for v in texts])
    assert [row[-1] for row in con.execute(rl.to_sql("s", output="rule_id"))] == expected


@pytest.mark.integration
def test_sql_export_reads_nan_as_missing_on_postgresql() -> None:
    """PostgreSQL keeps a float NaN (not NULL: COALESCE kept it and it compares above every number)."""
    from tests.conftest import PG_ADMIN_URL, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    import psycopg

    rl = _bound_list(0.30000000000000004)
    numbers = [math.nan, 0.3, None]
    texts = ["NaN", "nan", " ", "0.3"]
    with psycopg.connect(PG_ADMIN_URL.replace("postgresql+psycopg", "postgresql")) as con:
        con.execute('CREATE TEMP TABLE n ("a" DOUBLE PRECISION, "b" TEXT)')
        con.execute('CREATE TEMP TABLE s ("a" TEXT, "b" TEXT)')
        with con.cursor() as cur:
            cur.executemany("INSERT INTO n VALUES (%s, NULL)", [(a,) for a in numbers])
            cur.executemany("INSERT INTO s VALUES (%s, NULL)", [(t,) for t in texts])
        from_numbers = [row[-1] for row in con.execute(rl.to_sql("n", output="rule_id"))]
        from_texts = [row[-1] for row in con.execute(rl.to_sql("s", output="rule_id"))]
    assert from_numbers == rl.apply({"a": numbers}).tolist() == [0, 2, 0]
    assert from_texts == rl.apply({"a": texts}).tolist() == [0, 0, 0, 2]


def test_category_keys_of_numpy_text_are_plain_text_and_equal_decimals_keep_their_own_keys() -> None:
    """numpy's str_ stayed the key (the Python export wrote np.str_('u'), which does not run); Decimal('1') and
    Decimal('1.0') are equal, hash alike and shared one cached key, so a column's keys depended on its order."""
    from decimal import Decimal

    from models.rulelist import category_key_column

    key = category_key(np.str_("u"))
    assert type(key) is str and repr(key) == "'u'"
    assert category_key_column([Decimal("1"), Decimal("1.0")]).tolist() == ["1", "1.0"]
    assert category_key_column([Decimal("1.0"), Decimal("1")]).tolist() == ["1.0", "1"]
    assert category_key_column(np.array(["u", "v"], dtype=object)).tolist() == ["u", "v"]


def _bound_list(low: float) -> RuleList:
    """Rule 1: a >= low; rule 2: a <= low; missing a -> 1e21 (the default rule)."""
    doc = copy.deepcopy(DOC)
    doc["features"] = [
        {"name": "a", "type": "numeric", "fill_value": 1e21},
        {"name": "b", "type": "categorical", "categories": ["x"]},
    ]
    doc["rules"] = [
        {"conditions": [{"feature": "a", "op": "between", "low": low, "high": 1e20}], **_COUNTS},
        {"conditions": [{"feature": "a", "op": "between", "low": None, "high": low}], **_COUNTS},
    ]
    return RuleList.from_dict(doc)


_COUNTS: dict[str, Any] = {"class_counts": [1, 1], "probabilities": [0.5, 0.5]}


def _odd_values() -> list[Any]:
    """Values a record may hold: missing in every form, booleans, numpy scalars, texts, numbers of other types."""
    from decimal import Decimal
    from fractions import Fraction

    import pandas as pd

    return [
        *(None, math.nan, np.nan, np.float32("nan"), np.float16("nan"), np.longdouble("nan"), pd.NA, pd.NaT),
        *("", "  ", "\t", " 50 ", "nan", "inf", "-inf", "abc", "1_000", "\u0665\u0660", b"47"),
        *(True, False, np.True_, np.False_, 0, 1, 1.0, 0.0, -0.0, np.int64(50), np.int8(1), np.uint64(70)),
        *(45.5, 66.4, 30.0, 50, np.float32(45.5), np.float32(0.1), np.float64(66.4), np.longdouble(2.0)),
        *(math.inf, -math.inf, 10**400, 2**64, 1 + 2j, np.complex64(1), Decimal("50"), Decimal("NaN")),
        *(Fraction(91, 2), Fraction(3, 1), "asymptomatic", "typical", "true", "false", "1", "2", [1], (2,)),
    ]


def _exported_ids(rl: RuleList, records: list[dict[str, Any]]) -> list[Any]:
    """Rule id of each record by the exported function, or ValueError where it refuses the record."""
    ns: dict[str, Any] = {}
    exec(compile(rl.to_python(), "<export>", "exec"), ns)
    out: list[Any] = []
    for rec in records:
        try:
            out.append(ns["predict"](rec)[1])
        except ValueError:
            out.append(ValueError)
    return out


def _list_ids(rl: RuleList, records: list[dict[str, Any]]) -> list[Any]:
    """Rule id of each record by RuleList.apply (one at a time), or ValueError where it refuses the record."""
    out: list[Any] = []
    for rec in records:
        try:
            out.append(int(rl.apply([rec])[0]))
        except ValueError:
            out.append(ValueError)
    return out


def test_python_export_reads_odd_values_as_the_rule_list_does() -> None:
    """NaN of any float type, pandas' NA / NaT and blank text are missing (the fill value, here inside a bound),
    booleans are refused by a numeric feature: as RuleList decides (the export once disagreed or crashed)."""
    doc = copy.deepcopy(DOC)
    doc["features"][0]["fill_value"] = 50.0  # inside rule 1's 45.5..66.4: missing is not "no rule holds"
    rl = RuleList.from_dict(doc)
    base = {"age": 50, "chest pain": "asymptomatic", "smoker": False, "unused": 1.0}
    import pandas as pd

    for v in (np.float32("nan"), "  ", pd.NA, pd.NaT):
        assert _exported_ids(rl, [dict(base, age=v)]) == [1] == rl.apply([dict(base, age=v)]).tolist(), repr(v)
    assert _exported_ids(rl, [dict(base, age=True)]) == [ValueError]  # RuleList refuses a boolean number
    rng = np.random.default_rng(0)
    values = _odd_values()
    records = [
        {f["name"]: values[i] for f, i in zip(doc["features"], rng.integers(len(values), size=4), strict=True)}
        for _ in range(3000)
    ]
    records += [dict(base, **{name: v}) for v in values for name in ("age", "chest pain", "smoker")]
    expected = _list_ids(rl, records)
    assert _exported_ids(rl, records) == expected
    kept = [r for r, e in zip(records, expected, strict=True) if e is not ValueError]
    assert rl.apply(kept).tolist() == [e for e in expected if e is not ValueError]  # the batch decides alike
    assert [rl.explain(r)["rule_id"] for r in kept[:300]] == [e for e in expected if e is not ValueError][:300]


CONTROL = ["p\x00", "\x1b[31mred", "del\x7f", "c1\x9b", "rtl\u202eltr", "half\ud800", "tab\there", "ok"]


def test_control_characters_are_escaped_in_text_and_the_python_export_compiles() -> None:
    """A NUL in a category made `to_python` uncompilable (raw in a `# rule` comment); a terminal escape or DEL
    went raw into `to_text`. Now quoted and escaped as JSON, reading back with json.loads."""
    doc = copy.deepcopy(DOC)
    doc["features"][1]["name"] = doc["rules"][0]["conditions"][1]["feature"] = "chest\x1bpain"
    doc["features"][2]["categories"] = CONTROL
    doc["rules"][1]["conditions"][0]["values"] = CONTROL
    doc["target"], doc["classes"] = "risk\x07", ["low\x00", "high\x7f"]
    rl = RuleList.from_dict(doc)
    text = rl.to_text()
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e\ud800]", text), repr(text)
    assert len(text.splitlines()) == 4
    line = text.splitlines()[1]
    quoted = re.findall(r'"(?:[^"\\]|\\.)*"', line[line.index("{") : line.index("}")])
    assert [json.loads(q) for q in quoted] == CONTROL[:-1]  # each round-trips; "ok" needs no quotes
    assert line.endswith('then "risk\\u0007" = "high\\u007f"  (p=0.67, support 4)')
    assert text.splitlines()[0].startswith('if 45.5 <= age <= 66.4 and "chest\\u001bpain" in {asymptomatic} then')
    source = rl.to_python()
    ns: dict[str, Any] = {}
    exec(compile(source, "<export>", "exec"), ns)
    records = [{**RECORDS[1], "chest\x1bpain": "typical", "smoker": c} for c in [*CONTROL, "other"]]
    assert [ns["predict"](r)[1] for r in records] == rl.apply(records).tolist() == [0] * 8 + [2]
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e\ud800]", source)
    no_nul = json.loads(json.dumps(doc).replace("\\u0000", ""))  # SQL cannot hold a NUL: refused
    comments = [line for line in RuleList.from_dict(no_nul).to_sql("t").splitlines() if "-- rule" in line]
    assert len(comments) == 3 and not re.search(r"[\x00-\x1f\x7f-\x9f\u202e\ud800]", "".join(comments))


def test_distinct_bounds_never_read_alike() -> None:
    """15 digits, then 6: 0.30000000000000004 read 0.3, and 1.0000000000000003e20 and 9.999999999999997e19
    both read 1e+20 (a rule `1e+20 <= a <= 1e+20`). Now the shortest text that reads back as the number."""
    from models.rulelist import Condition, format_number

    assert format_number(0.30000000000000004) == "0.30000000000000004"
    assert Condition(feature="a", op="between", low=9.999999999999997e19, high=1.0000000000000003e20).text() == (
        "9.999999999999997e+19 <= a <= 1.0000000000000003e+20"
    )
    assert format_number(np.float64(0.1) + np.float64(0.2)) == "0.30000000000000004"  # not np.float64(...)
    assert [format_number(x) for x in (0.3, 45.5, 1e20, 1e-7, 123456.5, 2.0)] == [
        "0.3",
        "45.5",
        "1e+20",
        "1e-07",
        "123456.5",
        "2",
    ]
    rng = np.random.default_rng(1)
    for x in rng.normal(size=2000) * 10.0 ** rng.integers(-30, 30, size=2000):
        assert float(format_number(x)) == x
        assert float(format_number(np.nextafter(x, math.inf))) != float(format_number(x))


def _class_list(classes: list[Any]) -> RuleList:
    """A one-rule list over `a` whose rule predicts classes[0] and whose default predicts classes[1]."""
    return RuleList.from_dict(
        {
            "format": "neurules.rulelist",
            "version": 1,
            "target": "y",
            "classes": classes,
            "features": [{"name": "a", "type": "numeric", "fill_value": 0.0}],
            "rules": [
                {
                    "conditions": [{"feature": "a", "op": "between", "low": 1.0, "high": None}],
                    "class_counts": [5, 1],
                    "probabilities": [0.8, 0.2],
                }
            ],
            "default": {"class_counts": [1, 5], "probabilities": [0.2, 0.8]},
        }
    )


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        ([True, 1], ["true", "1"]),  # both were 1
        ([0, "a"], ["0", "a"]),  # a CASE mixing 0 and 'a': a type error on PostgreSQL
        ([2**63 + 1, 0], [str(2**63 + 1), "0"]),  # beyond BIGINT: SQLite answered a rounded float
        ([3, 7], [3, 7]),
        ([False, True], [0, 1]),
    ],
)
def test_sql_export_keeps_classes_apart_in_one_sql_type(classes: list[Any], expected: list[Any]) -> None:
    rl = _class_list(classes)
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE t ("a" REAL)')
    con.executemany("INSERT INTO t VALUES (?)", [(2.0,), (0.0,)])
    assert [row[-1] for row in con.execute(rl.to_sql("t"))] == expected
    assert [label_key(c) for c in rl.predict({"a": [2.0, 0.0]}).tolist()] == [label_key(c) for c in classes]


@pytest.mark.parametrize("classes", [["1", 1], ["true", True]])
def test_sql_export_refuses_classes_it_cannot_tell_apart(classes: list[Any]) -> None:
    """Two classes writing one SQL value ('1' for "1" and 1) answered both as one: refused, naming them."""
    with pytest.raises(ValueError, match="read alike as SQL text"):
        _class_list(classes).to_sql("t")
    assert "THEN 1" in _class_list(classes).to_sql("t", output="rule_id")  # rule ids write no class


@pytest.mark.integration
def test_sql_export_of_mixed_classes_runs_on_postgresql() -> None:
    from tests.conftest import PG_ADMIN_URL, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    import psycopg

    rl = _class_list([0, "a"])
    with psycopg.connect(PG_ADMIN_URL.replace("postgresql+psycopg", "postgresql")) as con:
        con.execute('CREATE TEMP TABLE m ("a" DOUBLE PRECISION)')
        con.execute("INSERT INTO m VALUES (2.0), (0.0)")
        assert [row[-1] for row in con.execute(rl.to_sql("m"))] == ["0", "a"]


@pytest.mark.parametrize(
    ("label", "cell"),
    [
        ("=1+1", "'=1+1"),
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("@SUM(1)", "'@SUM(1)"),
        ("+a", "'+a"),
        ("-2+3", "'-2+3"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-1", "-1"),
        ("+2.5", "+2.5"),
        ("-1e5", "-1e5"),
        ("+", "+"),
        ("-", "-"),
        ("=", "'="),
        ("a=b", "a=b"),
        ("yes", "yes"),
        (-1, -1),
        (True, True),
    ],
)
def test_csv_label_neutralises_what_a_spreadsheet_runs(label: Any, cell: Any) -> None:
    """A text label beginning with = + - @, a tab or a CR gets a leading `'`; numbers and other labels stay."""
    from models.rulelist import csv_label

    assert csv_label(label) == cell


def test_sql_export_names_its_column_apart_from_a_feature_of_that_name() -> None:
    """A probe trained on a column named `prediction`: the export's `SELECT *, ... AS prediction` gave two columns
    of that name, and `SELECT prediction FROM (export)` read the feature (79) instead of the class, on 150 of 150
    rows. The added column is `neurules_prediction` then, and reading it by name gives the class."""
    doc = {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "y",
        "classes": ["no", "yes"],
        "features": [
            {"name": "Prediction", "type": "numeric", "fill_value": 0.0},
            {"name": "neurules_prediction", "type": "numeric", "fill_value": 0.0},
        ],
        "rules": [
            {
                "conditions": [{"feature": "Prediction", "op": "between", "low": 50.5, "high": None}],
                "class_counts": [0, 5],
                "probabilities": [1 / 7, 6 / 7],
            }
        ],
        "default": {"class_counts": [5, 0], "probabilities": [6 / 7, 1 / 7]},
        "smoothing": 1.0,
        "metadata": {},
    }
    rl = RuleList.from_dict(doc)
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE t ("Prediction" REAL, "neurules_prediction" REAL)')
    con.executemany("INSERT INTO t VALUES (?, ?)", [(79.0, 1.0), (3.0, 2.0)])
    sql = rl.to_sql("t")
    names = [d[0] for d in con.execute(sql).description]
    assert names == ["Prediction", "neurules_prediction", "neurules_prediction_2"], names
    got = [r[0] for r in con.execute(f"SELECT neurules_prediction_2 FROM ({sql}) ORDER BY 1")]
    assert got == ["no", "yes"]
    assert rl.to_sql("t", output="rule_id").endswith('END AS rule_id\nFROM "t"')  # no feature holds that name
