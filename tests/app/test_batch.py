"""predict.csv in chunks: the same answers, digests and errors as the one-shot record path; audit rows = rows answered;
memory that does not grow with the file."""

from __future__ import annotations

import csv
import io
import random
import tracemalloc
from typing import Any

import numpy as np
import pytest

from app.services import batch, csvdata, serving
from app.services.csvdata import CSVError, parse_csv
from app.services.errors import Invalid
from app.services.serving import ServedModel
from models import csvtext

HEADER = ["age", "income", "smoker"]
REC_ROW = {"age": 70, "income": 5, "smoker": "yes"}


def numeric_doc() -> dict[str, Any]:
    """A rule list over two numeric features only (the numpy-typed path)."""
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "y",
        "classes": [0, 1, 2],
        "features": [
            {"name": "a", "type": "numeric", "fill_value": 0.5},
            {"name": "b", "type": "numeric", "fill_value": -1.0},
        ],
        "rules": [
            {
                "conditions": [{"feature": "a", "op": "between", "low": 0.2, "high": 0.6}],
                "class_counts": [1, 5, 0],
                "probabilities": [0.2, 0.7, 0.1],
            },
            {
                "conditions": [{"feature": "b", "op": "between", "low": None, "high": 3.0}],
                "class_counts": [5, 1, 0],
                "probabilities": [0.6, 0.3, 0.1],
            },
        ],
        "default": {"class_counts": [0, 0, 4], "probabilities": [0.1, 0.1, 0.8]},
        "smoothing": 1.0,
        "metadata": {},
    }


def numeric_csv(n: int, seed: int = 0, *, whole: bool = False) -> bytes:
    rng = random.Random(seed)
    lines = ["a,b"]
    for _ in range(n):
        a = rng.choice([0.1, 0.25, 0.5, 0.75, 1, 3.0, -0.0, 1e20, 2.5e-7, 123456789.125])
        b = rng.randint(-5, 9) if whole else round(rng.uniform(-5, 9), rng.choice([0, 1, 3, 6]))
        lines.append(f"{a},{b}")
    return ("\n".join(lines) + "\n").encode()


def numbered(lines: list[str]) -> list[str]:
    """Answer lines as a fresh audit chain numbers them: `audit_seq` 1, 2, ... appended."""
    return [f"{line},{k}" for k, line in enumerate(lines, start=1)]


def seqs_of(chunk: batch.Chunk) -> range:
    """The `audit_seq`s a fresh chain gives a chunk's rows."""
    return range(chunk.first_index + 1, chunk.first_index + 1 + chunk.n_rows)


def one_shot(model: ServedModel, data: bytes) -> tuple[list[str], list[list[Any]], list[str]]:
    """The record path as predict.csv had it: parse all, type records, evaluate, digest each record
    (answer lines numbered as a fresh audit chain numbers them)."""
    records = serving.table_records(model, parse_csv(data))
    header, rows, _ = serving.batch_csv_rows(model, records)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return [*header, "audit_seq"], numbered(buf.getvalue().splitlines()), [serving.digest(r) for r in records]


def chunked(model: ServedModel, data: bytes) -> tuple[str, list[str], list[str]]:
    """Check then score chunk by chunk (no database): header, answer lines, digests."""
    checked = batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False)
    scorer = batch.Scorer(model, "t", "k")
    lines: list[str] = []
    digests: list[str] = []
    try:
        for chunk in checked.chunks():
            ids, cols = scorer.decide(chunk)
            lines += scorer.text(chunk, ids, seqs_of(chunk)).splitlines()
            digests += cols["input_digest"]
    finally:
        checked.close()
    return scorer.header(), lines, digests


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(batch, "READ_BYTES", 512)


def served(doc: dict[str, Any]) -> ServedModel:
    return ServedModel.build("mv_t", "t", "m", 1, doc)


@pytest.mark.parametrize("whole", [False, True])
def test_numeric_file_in_chunks_equals_the_one_shot_answer(small_chunks: None, whole: bool) -> None:
    model = served(numeric_doc())
    data = numeric_csv(3000, whole=whole)  # ~30 chunks
    header, rows, digests = one_shot(model, data)
    got_header, got_rows, got_digests = chunked(model, data)
    assert got_header == ",".join(header) + "\n"
    assert got_rows == rows
    assert got_digests == digests


def test_fast_and_exact_chunks_agree(small_chunks: None, doc: dict[str, Any]) -> None:
    """Chunks with missing values, quotes (a quoted newline), categories: the exact path, same answers."""
    rng = random.Random(1)
    lines = ["age,income,smoker"]
    for i in range(2000):
        age = rng.choice(["30", "61.5", "", "NA", "70", '"65"'])
        income = rng.choice(["5", "40.25", "?", "1e3"])
        smoker = rng.choice(["yes", "no", "", '"ye\ns"', '"a,b"'])
        lines.append(f"{age},{income},{smoker}" if i % 7 else f"70,{income},yes")
    data = ("\n".join(lines) + "\n").encode()
    model = served(doc)
    _header, rows, digests = one_shot(model, data)
    _, got_rows, got_digests = chunked(model, data)
    assert got_rows == rows and got_digests == digests


def test_numeric_model_with_missing_and_odd_values_takes_the_exact_path(small_chunks: None) -> None:
    model = served(numeric_doc())
    data = numeric_csv(1500) + b"NaN,1\n,2\n+1e3,3\n  7 , 8 \nNAN,1\n" + numeric_csv(1500, seed=2)[4:]
    _header, rows, digests = one_shot(model, data)
    _, got_rows, got_digests = chunked(model, data)
    assert got_rows == rows and got_digests == digests


def test_plain_numeric_chunk_takes_the_fast_path_with_the_exact_values() -> None:
    model = served(numeric_doc())
    data = numeric_csv(500)
    header, _, rest = data.partition(b"\n")
    chunk = batch.type_chunk(model, header + b"\n", rest, 2, 0, ",", False)
    assert not chunk.exact and chunk.n_rows == 500
    exact = serving.table_columns(model, parse_csv(data), ignore_extra=False)
    assert {k: v.tolist() for k, v in chunk.columns.items()} == {k: list(exact[k]) for k in chunk.columns}


ODD_CELLS = [
    "+3",
    ".5",
    "5.",
    "00012",
    "1e+05",
    "1E5",
    " 7",
    "7 ",
    "-0",
    "infinity",
    "nan",
    "",
    "\u0661",
    "0x10",
    "1_000",
    "True",
    "9007199254740993",
    "18446744073709551617",
    "4.9e-324",
    "2.675",
    "0.1e-310",
]


@pytest.mark.parametrize("cell", ODD_CELLS)
def test_odd_numeric_cells_answer_as_the_one_shot_path(cell: str) -> None:
    """Whatever pandas' parser takes or refuses, the answer (or the error) is the one-shot path's."""
    model = served(numeric_doc())
    data = f"a,b\n0.5,1\n{cell},2\n3,-0.0\n".encode()
    try:
        expected: Any = one_shot(model, data)
    except Invalid as e:
        with pytest.raises(Invalid) as got:
            chunked(model, data)
        assert (got.value.code, str(got.value)) == (e.code, str(e))
        return
    header, rows, digests = expected
    assert chunked(model, data) == (",".join(header) + "\n", rows, digests)


def test_ragged_rows_are_refused_as_before() -> None:
    model = served(numeric_doc())
    for data in (b"a,b\n1,2\n3\n4,5\n", b"a,b\n1,2\n3,4,5\n"):
        with pytest.raises(Invalid) as e:
            one_shot(model, data)
        with pytest.raises(Invalid) as got:
            chunked(model, data)
        assert (got.value.code, str(got.value)) == (e.value.code, str(e.value))


@pytest.mark.parametrize(
    ("bad_line", "text", "code", "field"),
    [
        ("oops,1", "expected a number", "invalid_record", "line {n}.a"),
        ("inf,1", "finite", "invalid_record", "line {n}.a"),
        ("1,2,3", "fields", "csv_ragged_rows", None),
        ('"1,2', "", "csv_malformed", None),
    ],
)
def test_a_bad_row_late_in_the_file_fails_before_anything_is_scored(
    small_chunks: None, bad_line: str, text: str, code: str, field: str | None
) -> None:
    model = served(numeric_doc())
    good = numeric_csv(2500).decode().splitlines()
    n = 2400  # file line of the bad row (well past the first chunks)
    lines = [*good[: n - 1], bad_line, *good[n - 1 :]]
    data = ("\n".join(lines) + "\n").encode()
    with pytest.raises(Invalid) as exact:
        one_shot(model, data)
    with pytest.raises(Invalid) as got:
        batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False)
    assert got.value.code == exact.value.code == code
    assert str(got.value) == str(exact.value)  # same message, same line number
    if field is not None:
        assert got.value.details[0]["field"] == field.format(n=n)


def test_line_chunks_never_cut_a_quoted_field() -> None:
    rng = random.Random(3)
    rows = [[f'"x\n{i}"' if rng.random() < 0.3 else str(i), str(rng.random())] for i in range(3000)]
    data = ("h1,h2\n" + "\n".join(",".join(r) for r in rows) + "\n").encode()
    pieces = list(batch.line_chunks(io.BytesIO(data), chunk_bytes=700))
    assert len(pieces) > 20 and b"".join(pieces) == data
    assert all(p.count(b'"') % 2 == 0 and p.endswith(b"\n") for p in pieces)


def test_too_many_rows_counts_across_chunks(small_chunks: None) -> None:
    model = served(numeric_doc())
    with pytest.raises(Invalid) as e:
        batch.check_file(model, io.BytesIO(numeric_csv(1000)), max_rows=999, ignore_extra=False)
    assert e.value.code == "csv_too_many_rows"


def _peak_bytes(model: ServedModel, data: bytes) -> int:
    tracemalloc.start()
    try:
        checked = batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False)
        scorer = batch.Scorer(model, "t", "k")
        for chunk in checked.chunks():
            ids, _ = scorer.decide(chunk)
            scorer.text(chunk, ids, seqs_of(chunk))
        checked.close()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setattr(batch, "READ_BYTES", 4 * 1024)
    model = served(numeric_doc())
    small = numeric_csv(8_000)  # ~6 chunks
    large = numeric_csv(128_000, seed=5)  # ~90 chunks: 16x the rows
    assert len(large) > 80 * batch.CHUNK_BYTES
    peak_small, peak_large = _peak_bytes(model, small), _peak_bytes(model, large)
    assert peak_large < 1.25 * peak_small, (peak_small, peak_large)
    assert peak_large < len(large) / 2  # below the file itself, let alone its rows as objects


def test_streamed_answer_and_audit_rows_through_http(api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 4096)
    v = api.import_model(doc)
    rng = random.Random(7)
    rows = [(rng.choice([30, 61, 70, 45.5]), rng.choice([5, 40.25, 8]), rng.choice(["yes", "no"])) for _ in range(3000)]
    data = ("age,income,smoker\n" + "\n".join(f"{a},{b},{c}" for a, b, c in rows) + "\n").encode()
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv", files={"file": ("b.csv", data, "text/csv")}, headers=api.h()
    )
    assert r.status_code == 200, r.text
    answer = r.text.splitlines()
    assert len(answer) == len(rows) + 1 and [int(x.split(",")[0]) for x in answer[1:]] == list(range(3000))
    assert api.count("audit_log") == len(rows)
    expected = one_shot(served(doc), data)[1]
    assert answer[1:] == expected
    # the audit row of a CSV row is found by the digest of the same record sent as JSON
    a, b, c = rows[123]
    j = api.client.post(
        f"/v1/models/{v['id']}/predict", json={"records": [{"age": a, "income": b, "smoker": c}]}, headers=api.h()
    )
    assert j.status_code == 200
    digest = serving.digest({"age": a, "income": b, "smoker": c})
    found = api.client.get("/v1/audit", params={"input_digest": digest, "limit": 1000}, headers=api.h()).json()
    assert len(found["items"]) == 1 + sum(1 for r in rows if r == rows[123])


def test_a_bad_row_late_in_an_upload_is_a_422_with_nothing_audited(api, doc: dict[str, Any], monkeypatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 4096)
    v = api.import_model(doc)
    lines = ["age,income,smoker"] + ["70,5,yes"] * 2000 + ["70,lots,yes"] + ["30,5,no"] * 100
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("b.csv", ("\n".join(lines) + "\n").encode(), "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "line 2002.income"
    assert api.count("audit_log") == 0


def test_fast_digests_match_the_record_digest() -> None:
    values = np.array([0.0, -0.0, 1.0, -3.0, 0.1, 1e20, 2.5e-7, 123456789.125, 2.0**53, -(2.0**60), 1e300])
    chunk = batch.Chunk(1, len(values), {"x": values, "y": values[::-1].copy()}, exact=False)
    expected = [serving.digest({"x": x, "y": y}) for x, y in zip(values.tolist(), values[::-1].tolist(), strict=True)]
    assert batch.digests(chunk) == expected


def test_audit_rows_written_in_bulk_read_back_as_sqlalchemy_writes_them(api, monkeypatch) -> None:
    """insert_rows (executemany on SQLite, COPY on PostgreSQL) stores what SQLAlchemy's insert stores."""
    from sqlalchemy import insert, select

    from app.services import audit
    from app.services.audit_chain import START, link_rows
    from app.tables import AuditRecord, utcnow

    monkeypatch.setattr(audit, "COPY_MIN_ROWS", 100)
    engine = api.app.state.service.db.engine
    now = utcnow()
    outputs = [{"prediction": p, "probabilities": {"a": 0.25, "b": 0.75}} for p in ("x", 1, True)]
    rows = [
        {
            "created_at": now,
            "tenant_id": api.tenant_a,
            "api_key_id": "key_1",
            "model_version_id": "mv_1",
            "input_digest": f"{i % 300:064x}",
            "output": outputs[i % 3],
            "rule_id": i % 3,
            "missing_filled": i % 2 == 0,
        }
        for i in range(600)
    ]
    link_rows(rows, START)  # seq, prev_hash, row_hash as the writer gives them
    with engine.begin() as c:
        c.execute(insert(AuditRecord), rows[:300])  # SQLAlchemy's own way
        audit.insert_rows(c, audit.ColumnRows({k: [r[k] for r in rows[300:]] for k in rows[0]}))  # the bulk way
    fields = [*rows[0]]
    with engine.connect() as c:
        got = [
            r._asdict() for r in c.execute(select(*(getattr(AuditRecord, f) for f in fields)).order_by(AuditRecord.id))
        ]
    assert got == rows  # every value as written, in both halves
    same = ("created_at", "tenant_id", "api_key_id", "model_version_id", "input_digest", "output", "rule_id")
    assert [[g[f] for f in same] for g in got[:300]] == [[g[f] for f in same] for g in got[300:]]


def test_canonical_bodies_equal_canonical_body_row_by_row() -> None:
    from datetime import UTC, datetime, timedelta

    from app.services.audit_chain import BODY_COLUMNS, canonical_bodies, canonical_body

    rng = random.Random(11)
    t0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    outputs = [{"prediction": v, "probabilities": {"ä": 0.5, 'b"q': 0.5}} for v in ("ja", 0, False, None, "é")]
    rows = [
        {
            "api_key_id": rng.choice(["key_1", "kéy"]),
            "created_at": rng.choice([t0, t0 + timedelta(microseconds=1), datetime(2026, 5, 6)]),
            "input_digest": f"{rng.getrandbits(256):064x}",
            "missing_filled": rng.random() < 0.5,
            "model_version_id": "mv_1",
            "output": rng.choice(outputs),
            "rule_id": rng.randint(0, 12),
            "tenant_id": rng.choice(["tn_a", "tn_\u2603"]),
        }
        for _ in range(500)
    ]
    columns = {name: [r[name] for r in rows] for name in BODY_COLUMNS}
    assert canonical_bodies(columns, len(rows)) == [canonical_body(r) for r in rows]


def test_a_streamed_batch_leaves_an_intact_chain(api, doc: dict[str, Any], monkeypatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 4096)
    v = api.import_model(doc)
    api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC_ROW]}, headers=api.h())
    lines = ["age,income,smoker"] + [f"{20 + i % 60},{i % 50},{'yes' if i % 3 else ''}" for i in range(2500)]
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("b.csv", ("\n".join(lines) + "\n").encode(), "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 200
    api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC_ROW]}, headers=api.h())
    check = api.client.get("/v1/audit/verify", headers=api.h()).json()
    assert check["intact"] and check["rows_checked"] == 2502, check


@pytest.mark.parametrize(
    "values",
    [
        [-3.0, 5, 5, -3, 0, -0.0],  # few integers: one text per value
        list(np.random.default_rng(0).integers(-(10**6), 10**6, 1000).astype(float)),  # wide span
        [2.0**53 - 1, 1, 1, 1],
        [1e20, 1e20, 3.5],  # whole but beyond 2**53, repeated
        list(np.random.default_rng(1).normal(size=50)),  # distinct fractions
    ],
)
def test_number_texts_are_what_digest_writes(values: list[float]) -> None:
    expected = [(str(int(v)) if float(v).is_integer() else repr(float(v))).encode() for v in values]
    assert batch._number_texts(np.asarray(values, dtype=np.float64)) == expected


# --- the streaming path answers what parsing the whole file answers, for every file ---------------------------------


def reference(model: ServedModel, data: bytes, max_rows: int = 10**9) -> tuple[Any, ...]:
    """The one-shot path's outcome: its error (code, message, details), or its answer rows and digests."""
    try:
        # as predict.csv reads a `;` file: decimal commas in the model's numeric features only
        table = parse_csv(data, max_rows=max_rows, keep_text=lambda name: name not in model.numeric)
        records = serving.table_records(model, table)
    except Invalid as e:
        return ("error", e.code, str(e), e.details)
    _, rows, _ = serving.batch_csv_rows(model, records)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return ("ok", numbered(buf.getvalue().splitlines()), [serving.digest(r) for r in records])


def streamed(model: ServedModel, data: bytes, max_rows: int = 10**9) -> tuple[Any, ...]:
    """The chunked path's outcome, in the same form."""
    try:
        checked = batch.check_file(model, io.BytesIO(data), max_rows=max_rows, ignore_extra=False)
    except Invalid as e:
        return ("error", e.code, str(e), e.details)
    checked.close()
    _, rows, digests = chunked(model, data)
    return ("ok", rows, digests)


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 16)
    monkeypatch.setattr(batch, "READ_BYTES", 7)
    monkeypatch.setattr(batch, "CHUNK_ROWS", 3, raising=False)


@pytest.mark.parametrize(
    "data",
    [
        b"a,b\r0.5,1\r3,2\r",  # classic Mac line ends: two rows, not none
        b"a,b\r0.5,1\r3,2",
        b"a,b\r0.5,1\n3,2\n",  # header ended by \r, rows by \n (was a 500 on the numeric path)
        b"a,b\r\n0.5,1\r3,2\r\n",
        b"a,b\n\n0.5,1\n3,2\n",  # a blank line after the header (was csv_no_rows)
        b"a,b\r\n\r\n0.5,1\r\n3,2\r\n",
        b"a,b\r\r0.5,1\r",
        b"a,b\r",  # no rows: csv_no_rows, never a 200 with nothing
        b"a,b\r\r\r",
        b"\xef\xbb\xbfa,b\r0.5,1\r",
        b'"a\nx",b\n1,2\n',  # a header record over two lines
        b'a,b\n"1\r\n",2\r\n3,4\r\n',
    ],
)
def test_line_ends_and_blank_lines_answer_as_the_one_shot_path(tiny_chunks: None, data: bytes) -> None:
    model = served(numeric_doc())
    assert streamed(model, data) == reference(model, data)


def test_cr_only_file_through_http_answers_its_rows_and_audits_them(api, doc: dict[str, Any]) -> None:
    v = api.import_model(doc)
    for data, n in ((b"age,income,smoker\r67,5,yes\r30,50,no\r", 2), (b"age,income,smoker\r", 0)):
        before = api.count("audit_log")
        r = api.client.post(
            f"/v1/models/{v['id']}/predict.csv", files={"file": ("a.csv", data, "text/csv")}, headers=api.h()
        )
        if n:
            assert r.status_code == 200 and len(r.text.splitlines()) == n + 1, r.text
        else:
            assert r.status_code == 422 and r.json()["error"]["code"] == "csv_no_rows"
        assert api.count("audit_log") - before == n


def test_an_unbalanced_quote_in_a_large_file_is_refused_quickly(doc: dict[str, Any]) -> None:
    """The cut is found in one forward pass (it was quadratic: 56 s for 1.4 MB): csv_malformed as one-shot."""
    import time

    model = served(doc)
    data = b'age,income,smoker\n"67,5,yes\n' + b"30,50,no\n" * 240_000  # ~2.2 MB
    t = time.perf_counter()
    got = streamed(model, data)
    assert time.perf_counter() - t < 5
    assert got == reference(model, data) and got[1] == "csv_malformed"


@pytest.mark.parametrize("head", [b'age,income,smoker\n30,50,"no\n', b'"age,income,smo\n'])
def test_a_quoted_field_that_never_ends_is_not_held_whole(
    monkeypatch: pytest.MonkeyPatch, doc: dict[str, Any], head: bytes
) -> None:
    """csv.reader refuses a field over its limit, so the look-ahead stops there (the same error, memory bounded)."""
    monkeypatch.setattr(batch, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(batch, "READ_BYTES", 1024)
    model = served(doc)
    data = head + "70,5,y\u00e9s\n".encode() * 3000
    pieces: list[int] = []
    real = batch._Splitter._next

    def spy(self: Any) -> bytes:
        piece = real(self)
        pieces.append(len(piece))
        return piece

    monkeypatch.setattr(batch._Splitter, "_next", spy)
    limit = csv.field_size_limit(500)  # the look-ahead follows csv's limit, whatever it is
    try:
        got, expected = streamed(model, data), reference(model, data)
    finally:
        csv.field_size_limit(limit)
    assert got == expected and "field larger" in got[2]
    assert max(pieces, default=0) < 4 * 4096


def test_error_order_is_the_one_shot_order(small_chunks: None) -> None:
    """A parse error or the row limit anywhere beats a bad value earlier; a bad byte anywhere beats both."""
    model = served(numeric_doc())
    good = numeric_csv(3000).decode().splitlines()
    bad_value = [*good[:10], "oops,1", *good[10:]]
    cases = [
        (bad_value, 3000),  # more rows than the limit, a bad value early: 413 csv_too_many_rows
        ([*bad_value[:2900], "1,2,3", *bad_value[2900:]], 10**9),  # a ragged row late: csv_ragged_rows
        ([*bad_value[:2900], "1,2\xff", *bad_value[2900:]], 10**9),  # csv_not_utf8
        ([*good[:2900], "1,2,3", *good[2900:], "x,y"], 100),  # the row limit before the ragged row
    ]
    codes = []
    for lines, max_rows in cases:
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")
        got = streamed(model, data, max_rows)
        assert got == reference(model, data, max_rows)
        codes.append(got[1])
    assert codes == ["csv_too_many_rows", "csv_ragged_rows", "csv_not_utf8", "csv_too_many_rows"]


def test_bad_values_are_listed_as_the_one_shot_path_lists_them(small_chunks: None) -> None:
    """Feature by feature, then row by row, over the whole file (at most MAX_ERROR_DETAILS + 1)."""
    model = served(numeric_doc())
    lines = numeric_csv(3000).decode().splitlines()
    lines[2500] = "1,bad"
    lines[10] = "bad,1"
    lines[2990] = "bad,1"
    data = ("\n".join(lines) + "\n").encode()
    assert streamed(model, data) == reference(model, data)
    many = "\n".join(["a,b", *(["x,y"] * 80), *lines[1:]]) + "\n"
    assert streamed(model, many.encode()) == reference(model, many.encode())


@pytest.mark.parametrize("sep", ["\t", ";", "|"])
def test_other_separators_stream_in_chunks(small_chunks: None, sep: str) -> None:
    model = served(numeric_doc())
    data = numeric_csv(3000).replace(b",", sep.encode())
    checked = batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False)
    checked.close()
    assert checked.n_chunks > 10
    assert streamed(model, data) == reference(model, data)


def test_narrow_rows_are_cut_by_rows_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_ROWS", 1000)
    model = served(numeric_doc())
    data = b"a,b\n" + b"1,2\n" * 10_500
    checked = batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False)
    sizes = [c.n_rows for c in checked.chunks()]
    checked.close()
    assert max(sizes) <= 1000 and sum(sizes) == 10_500


@pytest.mark.parametrize(
    "late",
    [
        "3,5",  # decimal commas from the last chunk on: the whole column is read with them
        "0.5",  # a decimal point late in a column of decimal commas: refused as one-shot
        "1.234,5",  # a thousands separator: refused as one-shot
        "yes",  # text: the column is kept as written (a bad value for a numeric feature)
    ],
)
def test_decimal_commas_are_decided_over_the_whole_file(small_chunks: None, late: str) -> None:
    model = served(numeric_doc())
    rng = random.Random(4)
    rows = [f"{rng.randint(0, 9)};{rng.randint(0, 9)},{rng.randint(0, 9)}" for _ in range(2000)]
    rows[1990] = f"{late};1"
    data = ("a;b\n" + "\n".join(rows) + "\n").encode()
    assert streamed(model, data) == reference(model, data)


def test_a_categorical_level_with_a_comma_is_kept_in_a_semicolon_file() -> None:
    """`1,5` in a categorical column is a level, not a decimal comma: a `;` file decides it as a `,` file and
    the JSON record do (it was read as `1.5`, which no rule names), and the numeric column beside it still
    reads its decimal commas."""
    doc = numeric_doc()
    doc["features"][1] = {"name": "b", "type": "categorical", "categories": ["1,5", "2,5", None]}
    doc["rules"][0]["conditions"] = [{"feature": "b", "op": "in", "values": ["1,5"]}]
    doc["rules"][1]["conditions"] = [{"feature": "a", "op": "between", "low": 0.2, "high": 0.6}]
    model = served(doc)
    expected = serving.predict_records(model, [{"a": 0.5, "b": "1,5"}, {"a": 2.5, "b": "2,5"}], explain=False)
    semicolons = b"a;b\n0,5;1,5\n2,5;2,5\n"
    commas = b'a,b\n0.5,"1,5"\n2.5,"2,5"\n'
    for data in (semicolons, commas):
        rule_ids = [line.split(",")[3] for line in chunked(model, data)[1]]
        assert rule_ids == [str(e["rule_id"]) for e in expected] == ["1", "0"]
        assert reference(model, data)[1] == chunked(model, data)[1]


TRICKY = ["1", "2.5", "3,5", "x", " ", "NA", "", '"', '""', "1.234,5", "inf", "\x00", "\udcff", "é", '"1"', '"a\nb"']


def _cell(rng: random.Random, noise: float) -> str:
    return rng.choice(["1", "2", "0.5", "-3", "4,25"]) if rng.random() > noise else rng.choice(TRICKY)


def _random_file(rng: random.Random) -> bytes:
    sep, end = rng.choice([",", ";", "\t", "|"]), rng.choice(["\n", "\r\n", "\r"])
    header = rng.choice(
        [["a", "b"], ["a", "b"], ["b", "a"], ["a"], ["a", "a"], ["1", "2"], ['"a"', "b"], ["a", "b", "c"]]
    )
    noise = rng.choice([0, 0, 0.01, 0.05, 0.2])
    lines = [sep.join(header)]
    for _ in range(rng.randint(0, 40)):
        width = len(header) if rng.random() > noise else rng.randint(0, 3)
        lines.append(sep.join(_cell(rng, noise) for _ in range(width)))
    text = "".join(line + (rng.choice(["\n", "\r\n", "\r"]) if rng.random() < 0.05 else end) for line in lines)
    data = text[: -rng.randint(0, 1) or None].encode("utf-8", "surrogateescape")
    return (b"\xef\xbb\xbf" if rng.random() < 0.1 else b"") + data


def test_random_files_answer_as_the_one_shot_path(tiny_chunks: None, doc: dict[str, Any]) -> None:
    """Odd line ends, quotes, blank lines, bad bytes, separators, row limits: the same answer or error, always."""
    rng = random.Random(12)
    models = [served(numeric_doc()), served(doc)]
    outcomes = set()
    for _ in range(400):
        data, max_rows = _random_file(rng), rng.choice([10**9, 5, 20])
        for model in models:
            expected = reference(model, data, max_rows)
            assert streamed(model, data, max_rows) == expected, data
            outcomes.add(expected[1] if expected[0] == "error" else "ok")
    assert {"ok", "csv_malformed", "csv_too_many_rows", "csv_not_utf8", "invalid_record"} <= outcomes


def test_quote_parity_cuts_where_the_quote_by_quote_scan_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The column-wise parity scan and the quote-by-quote scan cut quote-heavy files at the same records."""
    rng = random.Random(5)
    cells = ['"1"', '"a,b"', '"x\ny"', '""', '"a""b"', "2", '"3"x', 'x"y', '"\r\n"', "é"]
    for _ in range(60):
        rows = [",".join(rng.choice(cells) for _ in range(3)) for _ in range(rng.randint(1, 300))]
        data = ("h1,h2,h3\n" + rng.choice(["\n", "\r\n"]).join(rows)).encode()
        size = rng.choice([16, 64, 500])
        with_parity = list(batch.line_chunks(io.BytesIO(data), chunk_bytes=size))
        monkeypatch.setattr(batch._Splitter, "_scan_quotes", lambda self, lo, hi: -1)
        quote_by_quote = list(batch.line_chunks(io.BytesIO(data), chunk_bytes=size))
        monkeypatch.undo()
        assert with_parity == quote_by_quote and b"".join(with_parity) == data


def test_decimal_comma_decisions_do_not_depend_on_the_chunks() -> None:
    from app.services.decimal_comma import ColumnSeparators, rewrites

    def decide(parts: list[list[str | None]]) -> Any:
        seps, row = ColumnSeparators("c"), 0
        for part in parts:
            seps.add(part, row, lambda r, first=row: first + r + 2)
            row += len(part)
        try:
            return rewrites(seps)
        except Invalid as e:
            return (e.code, str(e))

    rng = random.Random(2)
    tokens = ["1", "2.5", "3,5", ",5", "1.234,5", "x", None, "1e3", "1,5e3", "-2,25", "1,2,3", "1.234"]
    for _ in range(2000):
        cells = [rng.choice(tokens) for _ in range(rng.randint(0, 12))]
        cut = sorted(rng.sample(range(len(cells) + 1), k=min(3, len(cells) + 1)))
        parts = [cells[a:b] for a, b in zip([0, *cut], [*cut, len(cells)], strict=True)]
        assert decide(parts) == decide([cells])


def _answer(model: ServedModel, data: bytes, *, ignore_extra: bool) -> list[str]:
    checked = batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=ignore_extra)
    scorer = batch.Scorer(model, "t", "k")
    try:
        lines = (scorer.text(chunk, scorer.decide(chunk)[0], seqs_of(chunk)) for chunk in checked.chunks())
        return [line for text in lines for line in text.splitlines()]
    finally:
        checked.close()


@pytest.mark.parametrize("quoted", [False, True])  # numpy-typed chunks, and the exact path
def test_unnamed_columns_are_extra_columns_with_ignore_extra(small_chunks: None, quoted: bool) -> None:
    """A trailing comma on every line (spreadsheet exports) was csv_empty_column_name even with ignore_extra."""
    model = served(numeric_doc())
    plain = numeric_csv(300, seed=4)
    lines = plain.decode().splitlines()
    if quoted:
        lines = [lines[0]] + [",".join(f'"{c}"' for c in line.split(",")) for line in lines[1:]]
    trailing = ("\n".join(f"{line},,x" if i else f"{line},," for i, line in enumerate(lines)) + "\n").encode()
    with pytest.raises(CSVError) as e:
        batch.check_file(model, io.BytesIO(trailing), max_rows=10**9, ignore_extra=False)
    assert e.value.code == "csv_empty_column_name"
    assert _answer(model, trailing, ignore_extra=True) == _answer(model, plain, ignore_extra=False)


@pytest.mark.parametrize(
    ("header", "separator"),
    [
        ("Gewicht, kg;Klasse", ";"),  # a spreadsheet's `;` file leaves a comma in a name unquoted: a tie
        ('"Gewicht, kg";Klasse', ";"),  # quoted: its comma is no separator
        ("id;Gewicht, kg;Größe, cm", ";"),
        ("a\tb, c", "\t"),
        ("a,b,c", ","),
        ("a;b,c,d", ","),
        ('"a;b",c', ","),
        ("a|b", "|"),
        ("x", ","),
    ],
)
def test_the_separator_is_counted_outside_quotes_and_a_tie_is_not_the_comma(header: str, separator: str) -> None:
    assert csvtext.sniff_delimiter(header + "\n1\n") == separator


def test_a_semicolon_file_with_commas_in_its_names_keeps_its_numbers() -> None:
    """`Gewicht, kg;Klasse` was split on commas: the decimals cut off and glued to the labels (`8;heavy`)."""
    table = parse_csv(b"Gewicht, kg;Klasse\n47,5;light\n82,3;heavy\n")
    assert table.header == ["Gewicht, kg", "Klasse"]
    assert table.columns["Gewicht, kg"] == ["47.5", "82.3"] and table.columns["Klasse"] == ["light", "heavy"]


@pytest.mark.parametrize("cell", ["3_2", "1_000", "\u0663", "\uff13"])
def test_underscores_and_other_scripts_digits_are_not_numbers(cell: str) -> None:
    """`float` reads `3_2` as 32 and `٣` as 3; no spreadsheet or CSV reader does: the column is text."""
    assert csvdata.to_float(cell) is None
    table = parse_csv(f"zone,x\n{cell},1\n7,2\n".encode())
    assert {p.name: p.type for p in csvdata.profile(table)}["zone"] == "categorical"
    model = served(numeric_doc())
    with pytest.raises(Invalid, match="row 0"):
        batch.check_file(model, io.BytesIO(f"a,b\n{cell},1\n".encode()), max_rows=10, ignore_extra=False)
