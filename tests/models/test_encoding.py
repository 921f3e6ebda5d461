"""Tabular encoding: numeric / categorical / bool / missing / constant / unseen categories."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.encoding import TabularEncoder, to_frame


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [20.0, 30.0, np.nan, 50.0, 40.0],
            "colour": ["red", "blue", None, "red", ""],
            "flag": [True, False, True, True, False],
            "const": [7, 7, 7, 7, 7],
            "code": [1, 2, 2, 1, 3],
        }
    )


def test_column_kinds_and_feature_documents() -> None:
    enc = TabularEncoder().fit(_frame())
    kinds = {c.name: c.kind for c in enc.columns}
    assert kinds == {
        "age": "numeric",
        "colour": "categorical",
        "flag": "categorical",
        "const": "numeric",
        "code": "numeric",
    }
    feats = {f["name"]: f for f in enc.feature_dicts()}
    assert feats["age"]["fill_value"] == 35.0  # median of the observed values
    assert feats["age"]["min"] == 20.0 and feats["age"]["max"] == 50.0
    # "" and None are both the missing level (key None), listed last
    assert feats["colour"]["categories"] == ["blue", "red", None]
    assert feats["flag"]["categories"] == ["false", "true"]


def test_numeric_standardised_with_median_fill() -> None:
    df = _frame()
    enc = TabularEncoder().fit(df)
    Z = enc.transform(df)
    u = next(i for i, unit in enumerate(enc.units) if enc.columns[unit.feature].name == "age")
    filled = np.array([20.0, 30.0, 35.0, 50.0, 40.0])
    q1, med, q3 = np.quantile(filled, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(Z[:, u], (filled - med) / ((q3 - q1) / 1.349))
    # plain standardisation where the IQR is 0 (mostly-constant columns)
    sparse = pd.DataFrame({"s": [0.0] * 8 + [5.0, 9.0]})
    enc2 = TabularEncoder().fit(sparse)
    z = enc2.transform(sparse)[:, 0]
    np.testing.assert_allclose(z, (sparse["s"] - sparse["s"].mean()) / sparse["s"].std(ddof=0))


def test_constant_columns_give_no_input() -> None:
    enc = TabularEncoder().fit(_frame())
    names = {enc.columns[u.feature].name for u in enc.units}
    assert "const" not in names
    assert "const" in [c.name for c in enc.columns]  # still a feature of the document
    single = TabularEncoder().fit(pd.DataFrame({"c": ["a", "a", "a"], "x": [1.0, 2.0, 3.0]}))
    assert [single.columns[u.feature].name for u in single.units] == ["x"]


def test_one_hot_with_missing_level_and_unseen_category() -> None:
    df = _frame()
    enc = TabularEncoder().fit(df)
    levels = [(enc.columns[u.feature].name, u.level) for u in enc.units if u.kind == "onehot"]
    assert ("colour", None) in levels and ("colour", "red") in levels
    test = df.copy()
    test["colour"] = ["green", "red", np.nan, "blue", None]
    Z = enc.transform(test)
    cols = [i for i, u in enumerate(enc.units) if enc.columns[u.feature].name == "colour"]
    block = Z[:, cols]
    assert block[0].sum() == 0  # unseen -> all zero
    assert block[1].sum() == 1 and block[2].sum() == 1 and block[4].sum() == 1
    assert block[2].tolist() == block[4].tolist()  # NaN and None are the same missing level


def test_bool_column_is_categorical_and_infinity_is_rejected() -> None:
    enc = TabularEncoder().fit(_frame())
    flag = [u for u in enc.units if enc.columns[u.feature].name == "flag"]
    assert {u.level for u in flag} == {"true", "false"}
    bad = _frame()
    bad.loc[0, "age"] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        TabularEncoder().fit(bad)


@pytest.mark.parametrize(
    "values",
    [
        pd.date_range("2024-01-01", periods=5, freq="h"),
        pd.date_range("2024-01-01", periods=5, freq="h", tz="UTC"),
        pd.to_timedelta(np.arange(5), unit="s"),
    ],
)
def test_date_and_duration_columns_are_rejected_with_their_name(values: object) -> None:
    # they were categories keyed as Timestamp text in training but as numpy datetime64 text by
    # the rule list, so the served list disagreed with the network on training rows
    df = _frame().assign(when=values)
    with pytest.raises(ValueError, match="feature 'when' holds dates or durations"):
        TabularEncoder().fit(df)


def test_numeric_object_column_and_arrays() -> None:
    df = pd.DataFrame({"a": np.array([1, 2.5, None, 4], dtype=object), "b": ["x", "y", "x", "y"]})
    enc = TabularEncoder().fit(df)
    assert [c.kind for c in enc.columns] == ["numeric", "categorical"]
    frame = to_frame(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert list(frame.columns) == ["x0", "x1"]
    with pytest.raises(ValueError, match="2D"):
        to_frame(np.array([1.0, 2.0]))


def test_missing_value_semantics_end_to_end() -> None:
    pytest.importorskip("torch")
    from models import NeuRulesClassifier

    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    colour = rng.choice(["red", "blue", "green"], size=n)
    y = ((x > 0.3) | (colour == "red")).astype(int)
    df = pd.DataFrame({"x": x, "colour": colour})
    df.loc[:20, "x"] = np.nan
    df.loc[30:40, "colour"] = None
    clf = NeuRulesClassifier(n_rules=4, random_state=0).fit(df, y)
    rl = clf.rule_list_
    fill = {f.name: f for f in rl.features}["x"].fill_value
    assert fill == pytest.approx(float(np.nanmedian(df["x"])))
    # a missing numeric value behaves exactly as the training median
    probe = pd.DataFrame({"x": [np.nan, fill], "colour": ["blue", "blue"]})
    assert clf.predict(probe)[0] == clf.predict(probe)[1]
    # unseen category: prediction is defined (falls through `in` rules, matches `not_in` rules)
    assert clf.predict(pd.DataFrame({"x": [0.0], "colour": ["purple"]})).shape == (1,)
    assert clf.score(df, y) > 0.8


def test_values_near_the_float_limits_are_standardised() -> None:
    y = np.arange(40) % 2
    # the median's mean of 1.7e308 and 1.6e308 overflowed: fill_value -inf, a document from_dict refused
    huge = TabularEncoder().fit(pd.DataFrame({"h": np.where(y == 1, 1.7e308, 1.6e308)}))
    assert huge.columns[0].fill_value == pytest.approx(1.65e308) and not huge.columns[0].constant
    # the std overflowed (one 1e300) or underflowed (values near 1e-300) to a column deemed constant
    rows = np.random.default_rng(0).normal(size=40)
    for values in (np.r_[rows[:-1], 1e300], rows * 1e-300, np.where(y == 1, 1.7e308, -1.7e308)):
        enc = TabularEncoder().fit(pd.DataFrame({"x": values}))
        spec = enc.columns[0]
        assert not spec.constant and enc.n_units == 1
        assert np.isfinite([spec.fill_value, spec.mean, spec.scale]).all() and spec.scale > 0
    ordinary = TabularEncoder().fit(pd.DataFrame({"s": [0.0] * 8 + [5.0, 9.0]})).columns[0]
    assert (ordinary.mean, ordinary.scale) == (1.4, float(np.std([0.0] * 8 + [5.0, 9.0])))  # unchanged


def test_unhashable_values_are_categories_keyed_by_their_text() -> None:
    df = pd.DataFrame({"tags": [[1], [2], [1], None], "meta": [{"k": 1}, {"k": 2}, {"k": 1}, {"k": 1}]})
    enc = TabularEncoder().fit(df)  # was a TypeError from pandas' factorize
    assert [c.levels for c in enc.columns] == [["[1]", "[2]", None], ["{'k': 1}", "{'k': 2}"]]
    assert enc.transform(df).sum(axis=1).tolist() == [2.0, 2.0, 2.0, 2.0]


def test_numbers_beyond_the_float_range_name_their_column() -> None:
    df = pd.DataFrame({"n": np.array([1, 2, 10**400], dtype=object)})
    with pytest.raises(ValueError, match="column 'n' holds a number too large"):
        TabularEncoder().fit(df)
    with pytest.raises(ValueError, match=r"Complex data not supported \(feature 'c'\)"):
        TabularEncoder().fit(pd.DataFrame({"c": np.array([1.0, 2j], dtype=object)}))


def test_booleans_and_numbers_in_a_categorical_column_keep_the_rule_lists_keys() -> None:
    """pandas' factorize merged True with 1 (False with 0) before the mixed-type check could see them: the
    encoder keyed by batch composition, the served list by value, and they disagreed on training rows."""
    from models.encoding import category_keys
    from models.rulelist import category_key

    values = [True, 1, "x", False, 0, 1.0, np.True_, np.float32(0.1), 0.10000000149011612, None, pd.NA, ""]
    keys = category_keys(pd.Series(values, dtype=object)).tolist()
    assert keys == [category_key(v) for v in values]
    assert keys[:7] == ["true", "1", "x", "false", "0", "1", "true"]
    for v in values:  # a value's key does not depend on the other values of the batch
        assert category_keys(pd.Series([v, True, 1], dtype=object)).tolist()[0] == category_key(v)
    enc = TabularEncoder().fit(pd.DataFrame({"m": pd.Series([True, 1, "x", 1, True], dtype=object)}))
    assert enc.columns[0].levels == ["1", "true", "x"]


def test_a_column_of_true_and_1_trains_the_network_the_served_list_reads() -> None:
    pytest.importorskip("torch")
    from models import NeuRulesClassifier

    rng = np.random.default_rng(10)
    y = rng.integers(0, 2, 300)
    m = [(True if i % 2 else 1) if y[i] else "xzw"[i % 3] for i in range(300)]
    X = pd.DataFrame({"m": pd.Series(m, dtype=object)})
    clf = NeuRulesClassifier(n_rules=3, epochs=20, n_restarts=2, random_state=0).fit(X, y)
    assert np.array_equal(clf.predict(X), clf.predict_network(X))  # was 24% apart
    alone = [clf.predict_network(pd.DataFrame({"m": pd.Series([v], dtype=object)}))[0] for v in (True, 1, "x")]
    assert alone == clf.predict_network(pd.DataFrame({"m": pd.Series([True, 1, "x"], dtype=object)})).tolist()


def test_pandas_na_nat_and_float32_nan_are_missing_numbers() -> None:
    """pd.NA / pd.NaT made an object column of numbers categorical at fit, and a TypeError at predict."""
    from models.encoding import is_numeric_column, numeric_values

    col = pd.Series([1.0, pd.NA, 2.5, pd.NaT, np.float32("nan"), None, 4.0, ""], dtype=object, name="a")
    assert is_numeric_column(col)
    assert np.isnan(numeric_values(col)).tolist() == [False, True, False, True, True, True, False, True]
    enc = TabularEncoder().fit(pd.DataFrame({"a": col}))
    assert enc.columns[0].kind == "numeric" and enc.columns[0].fill_value == 2.5
    raw = enc.raw_columns(pd.DataFrame({"a": pd.Series([pd.NA, pd.NaT, np.float32("nan"), 3.0], dtype=object)}))
    assert raw[0].tolist() == [2.5, 2.5, 2.5, 3.0]


def test_pandas_na_at_predict_time_is_the_fill_value() -> None:
    pytest.importorskip("torch")
    from models import NeuRulesClassifier

    rng = np.random.default_rng(10)
    a = rng.normal(size=100)
    clf = NeuRulesClassifier(n_rules=3, epochs=20, n_restarts=2, random_state=0).fit(pd.DataFrame({"a": a}), a > 0)
    fill = clf.rule_list_.features[0].fill_value
    odd = [{"a": v} for v in (pd.NA, pd.NaT, np.float32("nan"), None, fill)]
    assert clf.predict(odd).tolist() == [clf.predict([{"a": fill}])[0]] * 5  # pd.NA was a TypeError


def test_values_a_column_cannot_scale_into_floats_still_train() -> None:
    """A probe's column cycling through 1e300, -1e300, 1e-300, -0.0, 0.0, -1e-300 (no signal) beside age: its IQR
    is near 1e-300, so +-1e300 standardised to +-inf, and every restart's parameters went NaN ("training diverged:
    try a smaller learning rate"). Standardised values are clipped to +-Z_LIMIT; the list is learned from age and
    decides as the network does."""
    from models import NeuRulesClassifier
    from models.encoding import Z_LIMIT

    cycle = [1e300, -1e300, 1e-300, -0.0, 0.0, -1e-300]
    age = np.random.default_rng(0).integers(20, 80, 150)
    X = pd.DataFrame({"age": age, "x": [cycle[i % 6] for i in range(150)]})
    y = (age > 55).astype(int)
    enc = TabularEncoder().fit(X)
    Z = enc.transform(X)
    assert np.isfinite(Z).all() and np.abs(Z).max() == Z_LIMIT
    clf = NeuRulesClassifier(n_rules=4, epochs=40, random_state=0).fit(X, y)
    assert np.mean(clf.predict(X) == y) > 0.95
    assert np.array_equal(clf.predict_network(X, stage="final"), clf.predict(X))


def test_an_infinity_is_named_by_its_row() -> None:
    """A user with one `inf` among 10,000 rows was told the column holds one, not where."""
    bad = _frame()
    bad["age"] = bad["age"].astype(float)
    bad.loc[[2, 4], "age"] = [np.inf, -np.inf]
    with pytest.raises(ValueError, match=r"'age' contains infinity .*\(row 2, counting from 0, and 1 more\)"):
        TabularEncoder().fit(bad)
    bad.loc[4, "age"] = 1.0
    with pytest.raises(ValueError, match=r"\(row 2, counting from 0\)\.$"):
        TabularEncoder().fit(bad)
