"""A categorical value spelled in another Unicode normalisation form decides as the level it spells.

"Zürich" with a precomposed ü (NFC) and with u + U+0308 (NFD, as macOS and some keyboards send it) print alike;
the second fell to another rule, silently in predict.csv. A value that is no level but spells exactly one level in
another form is now that level, in the evaluator, the encoder, the counterfactual and both exports; a level is
never folded onto another one, and labels are not touched.
"""

from __future__ import annotations

import sqlite3
import unicodedata
from typing import Any

import numpy as np
import pandas as pd

from models.counterfactual import counterfactual
from models.encoding import TabularEncoder
from models.rulelist import RuleList

NFC_CITY = "Z\u00fcrich"
NFD_CITY = unicodedata.normalize("NFD", NFC_CITY)
# two distinct levels with one NFC form (marks in two orders): a third spelling of it matches both, so neither
E_TWO_MARKS = ("e\u0323\u0302", "e\u0302\u0323")
E_COMPOSED = "\u1ec7"


def _doc() -> dict[str, Any]:
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "y",
        "classes": ["no", "yes"],
        "features": [
            {"name": "city", "type": "categorical", "categories": [NFC_CITY, "Bern", None]},
            {"name": "accent", "type": "categorical", "categories": ["\u00e9", "e\u0301", "x"]},
            {"name": "marks", "type": "categorical", "categories": [*E_TWO_MARKS, "y"]},
        ],
        "rules": [
            {
                "conditions": [{"feature": "city", "op": "in", "values": [NFC_CITY]}],
                "class_counts": [1, 9],
                "probabilities": [0.1, 0.9],
            },
            {
                "conditions": [{"feature": "accent", "op": "in", "values": ["e\u0301"]}],
                "class_counts": [2, 8],
                "probabilities": [0.2, 0.8],
            },
            {
                "conditions": [{"feature": "marks", "op": "not_in", "values": ["y"]}],
                "class_counts": [3, 7],
                "probabilities": [0.3, 0.7],
            },
        ],
        "default": {"class_counts": [9, 1], "probabilities": [0.9, 0.1]},
    }


# (record, the rule that decides it)
CASES = [
    ({"city": NFC_CITY, "accent": "x", "marks": "y"}, 1),
    ({"city": NFD_CITY, "accent": "x", "marks": "y"}, 1),  # folded onto the level
    ({"city": "Bern", "accent": "\u00e9", "marks": "y"}, 0),  # both spellings are levels: each its own
    ({"city": "Bern", "accent": "e\u0301", "marks": "y"}, 2),
    ({"city": "Bern", "accent": "x", "marks": E_COMPOSED}, 3),  # spells two levels: unseen, not in {y}
    ({"city": "Bern", "accent": "x", "marks": E_TWO_MARKS[0]}, 3),
    ({"city": "Bern", "accent": "x", "marks": "y"}, 0),
]


def test_the_evaluator_folds_a_value_onto_the_one_level_it_spells() -> None:
    rl = RuleList.from_dict(_doc())
    records = [r for r, _ in CASES]
    expected = [rid for _, rid in CASES]
    assert rl.apply(records).tolist() == expected
    assert rl.apply(pd.DataFrame(records)).tolist() == expected
    assert [rl.explain(r)["rule_id"] for r in records] == expected
    assert rl.feature("city").level_key(NFD_CITY) == NFC_CITY
    assert rl.feature("accent").level_key("e\u0301") == "e\u0301"
    assert rl.feature("marks").level_key(E_COMPOSED) == E_COMPOSED


def test_the_python_export_folds_alike() -> None:
    ns: dict[str, Any] = {}
    exec(compile(RuleList.from_dict(_doc()).to_python(), "<export>", "exec"), ns)
    assert [ns["predict"](r)[1] for r, _ in CASES] == [rid for _, rid in CASES]


def test_the_sql_export_reads_the_composed_and_decomposed_spellings() -> None:
    rl = RuleList.from_dict(_doc())
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (n INTEGER, city TEXT, accent TEXT, marks TEXT)")
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)", [(i, r["city"], r["accent"], r["marks"]) for i, (r, _) in enumerate(CASES)]
    )
    got = [row[-1] for row in con.execute(f"SELECT * FROM ({rl.to_sql('t', output='rule_id')}) ORDER BY n")]
    assert got == [rid for _, rid in CASES]


def test_the_encoder_reads_a_decomposed_value_as_its_level() -> None:
    train = pd.DataFrame({"city": [NFC_CITY, "Bern", NFC_CITY, "Bern"], "n": [1.0, 2.0, 3.0, 4.0]})
    enc = TabularEncoder().fit(train)
    composed = enc.transform(pd.DataFrame({"city": [NFC_CITY], "n": [1.0]}))
    decomposed = enc.transform(pd.DataFrame({"city": [NFD_CITY], "n": [1.0]}))
    np.testing.assert_array_equal(composed, decomposed)
    assert composed[:, :].any()


def test_the_counterfactual_starts_from_the_folded_level() -> None:
    rl = RuleList.from_dict(_doc())
    record = {"city": NFD_CITY, "accent": "x", "marks": "y"}
    cf = counterfactual(rl, record)
    assert cf is not None
    changed = {c["feature"]: c for c in cf["changes"]}
    assert set(changed) == {"city"}, cf  # leaving rule 1 means leaving Zürich, which the record is in
    moved = {**record, **{k: c["to"] for k, c in changed.items()}}
    assert rl.explain(moved)["prediction"] != rl.explain(record)["prediction"]


def test_a_value_a_condition_names_beyond_the_categories_is_a_level_too() -> None:
    """An imported list may name a value its `categories` do not list (`city in {Zürich}` decomposed, with the
    composed spelling as the category): that value must still match itself, in every reading, as before."""
    doc = _doc()
    doc["rules"][0]["conditions"][0]["values"] = [NFD_CITY]
    rl = RuleList.from_dict(doc)
    records = [{"city": NFD_CITY, "accent": "x", "marks": "y"}, {"city": NFC_CITY, "accent": "x", "marks": "y"}]
    assert rl.apply(records).tolist() == [1, 0]
    assert [rl.explain(r)["rule_id"] for r in records] == [1, 0]
    ns: dict[str, Any] = {}
    exec(compile(rl.to_python(), "<export>", "exec"), ns)
    assert [ns["predict"](r)[1] for r in records] == [1, 0]
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (n INTEGER, city TEXT, accent TEXT, marks TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(i, r["city"], "x", "y") for i, r in enumerate(records)])
    got = [row[-1] for row in con.execute(f"SELECT * FROM ({rl.to_sql('t', output='rule_id')}) ORDER BY n")]
    assert got == [1, 0]
    assert RuleList.from_dict(rl.to_dict()) == rl and "named" not in str(rl.to_dict())
    cf = counterfactual(rl, {"city": "Bern", "accent": "x", "marks": "y"}, target_class="yes")
    assert (
        cf["found"]
        and rl.explain({"city": "Bern", "accent": "x", "marks": "y", **{c["feature"]: c["to"] for c in cf["changes"]}})[
            "prediction"
        ]
        == "yes"
    )


def test_the_python_export_builds_its_levels_once_and_only_for_used_features() -> None:
    """The levels were written into the function body: rebuilt on every call, every categorical feature's."""
    doc = _doc()
    doc["features"].append({"name": "unused", "type": "categorical", "categories": [f"u{i}" for i in range(500)]})
    source = RuleList.from_dict(doc).to_python()
    assert "u499" not in source
    body = source[source.index("def predict(record):") :]
    assert "LEVELS = {" not in body and source.index("_predict_levels = {") < source.index("def predict(record):")
