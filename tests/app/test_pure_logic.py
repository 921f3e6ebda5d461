"""Pure functions behind the HTTP layer: CSV parsing/profiling, record validation, keys, refs, caches."""

from __future__ import annotations

import time

import pytest

from app.services import csvdata, keys, serving
from app.services.errors import NotFound, TooLarge
from app.services.registry import parse_ref


def test_parse_and_profile() -> None:
    t = csvdata.parse_csv(b"a, b ,c\n1,x,\n2.5,NA,3\n\n")
    assert t.header == ["a", "b", "c"] and t.n_rows == 2
    assert t.columns["b"] == ["x", None] and t.columns["c"] == [None, "3"]
    prof = {p.name: p for p in csvdata.profile(t)}
    assert prof["a"].type == "numeric" and (prof["a"].min, prof["a"].max) == (1.0, 2.5)
    assert prof["b"].type == "categorical" and prof["b"].top_values == ["x"]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "csv_empty"),
        (b"a\n", "csv_no_rows"),
        (b"1,2\n3,4\n", "csv_no_header"),
        (b"a,b\n1,2,3\n", "csv_ragged_rows"),
        (b"a,a\n1,2\n", "csv_duplicate_columns"),
        (b"a,b\n\xff,1\n", "csv_not_utf8"),
        (b'a,b\n"1,2\n', "csv_malformed"),
    ],
)
def test_parse_errors(data: bytes, code: str) -> None:
    with pytest.raises(csvdata.CSVError) as e:
        csvdata.profile(csvdata.parse_csv(data))
    assert e.value.code == code


def test_limits() -> None:
    with pytest.raises(csvdata.CSVError) as e:
        csvdata.parse_csv(b"a\n1\n2\n3\n", max_rows=2)
    assert isinstance(e.value, TooLarge) and e.value.code == "csv_too_many_rows"
    with pytest.raises(csvdata.CSVError, match="columns"):
        csvdata.parse_csv(b"a,b,c\n1,2,3\n", max_columns=2)


def test_non_utf8_names_line() -> None:
    with pytest.raises(csvdata.CSVError, match="line 3"):
        csvdata.parse_csv(b"a,b\n1,2\n\xe9,3\n")


def test_validate_records_collects_details(doc) -> None:
    m = serving.ServedModel.build("mv", "t", "risk", 1, doc)
    serving.validate_records(
        m, [{"age": 1.5, "income": None, "smoker": True}, {"age": float("nan"), "income": 3, "smoker": 4}]
    )
    with pytest.raises(serving.RecordError) as e:
        serving.validate_records(m, [{"age": "x", "income": 1}, {"age": 1, "income": 1, "smoker": "no", "z": 1}])
    fields = [d["field"] for d in e.value.details]
    assert fields == ["records[0].smoker", "records[0].age", "records[1].z"]
    assert "and 2 more" in e.value.message


def test_predict_records_matches_rule_list(doc) -> None:
    m = serving.ServedModel.build("mv", "t", "risk", 1, doc)
    recs = [
        {"age": 70, "income": 50, "smoker": "yes"},
        {"age": 20, "income": 5, "smoker": None},
        {"age": None, "income": None, "smoker": None},
    ]
    with_ex = serving.predict_records(m, recs, explain=True)
    without = serving.predict_records(m, recs, explain=False)
    assert [r["rule_id"] for r in with_ex] == [r["rule_id"] for r in without] == list(m.rule_list.apply(recs))
    assert [r["probabilities"] for r in with_ex] == [r["probabilities"] for r in without]


def test_digest_is_canonical() -> None:
    assert serving.digest({"a": 1, "b": 2}) == serving.digest({"b": 2, "a": 1})
    assert serving.digest({"a": 1}) != serving.digest({"a": 2})
    assert serving.digest({"a": 70, "b": "x"}) == serving.digest({"a": 70.0, "b": "x"})  # JSON int vs CSV float
    assert serving.digest({"a": 70.5}) != serving.digest({"a": 70})


def test_keys() -> None:
    key, prefix = keys.generate_key()
    assert keys.split_prefix(key) == prefix and keys.matches(key, keys.hash_key(key))
    assert not keys.matches(key + "x", keys.hash_key(key))
    assert keys.split_prefix("nrk_short_x") is None and keys.split_prefix("garbage") is None


def test_parse_ref() -> None:
    assert parse_ref("mv_1").version_id == "mv_1"
    r = parse_ref("credit-risk@production")
    assert (r.name, r.alias) == ("credit-risk", "production")
    assert parse_ref("m@3").number == 3
    with pytest.raises(NotFound):
        parse_ref("@x")


def test_ttl_cache() -> None:
    c = serving.TTLCache(2, 0.05)
    c.put("a", 1)
    c.put("b", 2)
    c.put("c", 3)
    assert c.get("a") is None and c.get("c") == 3
    time.sleep(0.06)
    assert c.get("c") is None


def test_vectorised_and_per_record_paths_agree(doc) -> None:
    import random

    m = serving.ServedModel.build("mv", "t", "risk", 1, doc)
    rng = random.Random(1)
    recs = [
        {
            "age": rng.choice([None, 20, 59.9, 60, 75]),
            "income": rng.choice([None, 0, 10, 10.01, 99]),
            "smoker": rng.choice([None, "yes", "no", "other"]),
        }
        for _ in range(40)
    ]
    assert len(recs) > serving.SCALAR_PATH_MAX
    vec = serving.predict_records(m, recs, explain=False)
    one = [serving.predict_records(m, [r], explain=False)[0] for r in recs]
    assert [(a["rule_id"], a["prediction"], a["probabilities"]) for a in vec] == [
        (b["rule_id"], b["prediction"], b["probabilities"]) for b in one
    ]


def test_the_auto_epoch_plan_counts_the_refit_only_with_held_out_rows() -> None:
    """The refit runs only with `validation_fraction` > 0: counted then (also when it is the only option
    sent, which once skipped the check), not otherwise; defaults alone leave the plan unchecked."""
    from app.services.training_params import most_auto_epochs

    assert most_auto_epochs({}) is None
    assert most_auto_epochs({"target_steps": 4000, "max_epochs": 4000}) == 4000 + 800
    assert most_auto_epochs({"validation_fraction": 0.2}) == 300 + 60 + 30


def test_a_bad_byte_after_a_byte_order_mark_is_named_where_it_is() -> None:
    """A parity probe: with a BOM the message named the byte three places before the bad one (utf-8-sig counts
    from after the mark), e.g. "byte 5 (line 1) is b'e'"; the one-shot and the streaming check name the same."""
    from app.services import batch

    data = b"\xef\xbb\xbfa,b\n1,\xff\n"
    with pytest.raises(csvdata.CSVError, match=r"byte 9 \(line 2\) is b'\\xff'"):
        csvdata.decode(data)
    utf8 = batch._Utf8()
    with pytest.raises(csvdata.CSVError, match=r"byte 9 \(line 2\) is b'\\xff'"):
        utf8.decode(data[:5], 0)
        utf8.decode(data[5:], 2)


def test_a_header_of_many_stray_names_builds_only_the_details_it_lists(doc, monkeypatch: pytest.MonkeyPatch) -> None:
    """A soak probe's predict.csv header of 1,000,000 unknown names cost 20 s and 450 MB for a 422 listing 50."""
    m = serving.ServedModel.build("mv", "t", "risk", 1, doc)
    hinted: list[str] = []
    real = serving.with_hint
    monkeypatch.setattr(
        serving, "with_hint", lambda msg, name, *a, **k: hinted.append(name) or real(msg, name, *a, **k)
    )
    header = ["age", "income", *(f"c{i}" for i in range(10_000))]  # smoker missing, 10,000 unknown
    with pytest.raises(serving.RecordError) as refused:
        serving.check_header(m, header, ignore_extra=False)
    e = refused.value
    assert e.details[0] == {"field": "header.smoker", "message": "missing column"}
    assert len(e.details) == serving.MAX_ERROR_DETAILS and len(hinted) == serving.MAX_ERROR_DETAILS - 1
    assert "(and 10000 more problem(s))" in e.message


def test_a_readiness_error_is_one_line_without_sqlalchemys_link_and_cut_at_a_word() -> None:
    """An operator probe's /readyz read '... (Background on this error at: ht': the link's start, cut mid-word."""
    from sqlalchemy.exc import OperationalError

    from app.services import readiness

    e = OperationalError("SELECT 1", {}, Exception("connection failed: port 5432 failed\n\tIs the server running?"))
    text = readiness.run_check(lambda: (_ for _ in ()).throw(e))
    assert text.startswith("error: OperationalError: (builtins.Exception) connection failed"), text
    assert "Background" not in text and "\n" not in text and "Is the server running?" in text
    long = readiness.short_error(Exception("word " * 100))
    assert long.endswith("word ...") and len(long) <= readiness.MAX_ERROR_CHARS + 4
