"""The audit hash chain: linking and checking (pure), writer and verify on SQLite and PostgreSQL, tampering found."""

from __future__ import annotations

import itertools
import json
import threading
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.schemas.audit import BreakKind
from app.services import audit, audit_chain, serving
from app.services.audit_chain import (
    BODY_COLUMNS,
    GENESIS,
    START,
    ChainChecker,
    Link,
    canonical_bodies,
    canonical_body,
    link_columns,
    link_rows,
    row_hash,
    tail_break,
)
from models.rulelist import RuleList

REC_HIGH = {"age": 67, "income": 50, "smoker": "yes"}
REC_FILLED = {"age": None, "income": 40.5, "smoker": "no"}  # age missing: evaluated at its fill value
REC_CAT_MISSING = {"age": 30, "income": 5, "smoker": None}  # a missing category is not a filled number


def plain_rows(n: int, tenant: str = "tn_a", tag: int = 0) -> list[dict[str, Any]]:
    """n audit rows of one tenant as the service builds them (not chained yet)."""
    t0 = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    return [
        {
            "created_at": t0 + timedelta(microseconds=7 * i),
            "tenant_id": tenant,
            "api_key_id": "key_1",
            "model_version_id": "mv_1",
            "input_digest": f"{tag:032x}{i:032x}",
            "output": {"prediction": "high", "probabilities": {"low": 0.1 * (i % 3), "high": 1 - 0.1 * (i % 3)}},
            "rule_id": i % 3,
            "missing_filled": i % 2 == 0,
        }
        for i in range(n)
    ]


def rows(n: int, tenant: str = "tn_a", start: Link = START) -> list[dict[str, Any]]:
    """n chained rows of one tenant (ids 1..n after `start`)."""
    out = [{"id": start.seq + i + 1, **r} for i, r in enumerate(plain_rows(n, tenant))]
    link_rows(out, start)
    return out


def check(chain: list[dict[str, Any]], head: Link | None) -> ChainChecker:
    c = ChainChecker()
    for r in chain:
        if not c.feed(r):
            break
    c.finish(head, head)
    return c


def head_of(chain: list[dict[str, Any]]) -> Link:
    return Link(chain[-1]["seq"], chain[-1]["row_hash"])


# --- pure: linking and checking -------------------------------------------------------------------


def test_link_rows_numbers_and_links() -> None:
    chain = rows(4)
    assert [r["seq"] for r in chain] == [1, 2, 3, 4]
    assert chain[0]["prev_hash"] == GENESIS
    assert all(b["prev_hash"] == a["row_hash"] for a, b in itertools.pairwise(chain))
    assert len({r["row_hash"] for r in chain}) == 4
    more = rows(2, start=head_of(chain))
    assert more[0]["seq"] == 5 and more[0]["prev_hash"] == chain[-1]["row_hash"]


def test_intact_chain() -> None:
    c = check(rows(5), head_of(rows(5)))
    assert c.first_break is None and c.rows_checked == 5
    assert check([], None).first_break is None


@pytest.mark.parametrize(
    "column",
    [
        "created_at",
        "tenant_id",
        "api_key_id",
        "model_version_id",
        "input_digest",
        "output",
        "rule_id",
        "missing_filled",
    ],
)
def test_every_column_is_hashed(column: str) -> None:
    chain = rows(4)
    r = chain[2]
    r[column] = {
        "created_at": r["created_at"] + timedelta(microseconds=1),
        "output": {**r["output"], "prediction": "low"},
        "rule_id": r["rule_id"] + 1,
        "missing_filled": not r["missing_filled"],
    }.get(column, "x" + str(r[column]))
    c = check(chain, head_of(chain))
    assert c.first_break is not None and c.first_break.kind == "content_hash_mismatch"
    assert (c.first_break.row_id, c.first_break.seq, c.rows_checked) == (3, 3, 2)
    assert "the row at seq 3 " in c.first_break.message


def test_deleted_row_is_a_gap() -> None:
    chain = rows(6)
    del chain[2:4]
    brk = check(chain, head_of(chain)).first_break
    assert brk is not None and brk.kind == "sequence_gap" and (brk.row_id, brk.seq) == (5, 5)
    assert "seqs 3..4 missing" in brk.message


def test_rehashed_replacement_breaks_the_next_link() -> None:
    chain = rows(5)
    chain[1]["rule_id"] = 9  # changed and re-hashed in place: the row itself checks out, its successor does not
    chain[1]["row_hash"] = audit_chain.row_hash(2, chain[1]["prev_hash"], audit_chain.canonical_body(chain[1]))
    brk = check(chain, head_of(chain)).first_break
    assert brk is not None and brk.kind == "previous_hash_mismatch" and brk.row_id == 3


def test_repeated_sequence() -> None:
    chain = rows(3)
    brk = check([*chain, dict(chain[2], id=99)], head_of(chain)).first_break
    assert brk is not None and brk.kind == "sequence_repeated" and brk.row_id == 99


def test_a_row_before_the_first_is_named() -> None:
    """A probe inserted a copy of a row with seq 0 (and -5): the verifier read from seq 1 on and said intact."""
    chain = rows(3)
    for seq in (0, -5):
        brk = check([dict(chain[0], id=77, seq=seq), *chain], head_of(chain)).first_break
        assert brk is not None and brk.kind == "sequence_before_start" and (brk.row_id, brk.seq) == (77, seq)


def test_tail_against_the_head() -> None:
    chain = rows(5)
    head = head_of(chain)
    brk = check(chain[:3], head).first_break
    assert brk is not None and brk.kind == "truncated_tail" and brk.seq == 4 and "seqs 4..5 missing" in brk.message
    brk = check(chain, Link(5, "f" * 64)).first_break
    assert brk is not None and brk.kind == "head_mismatch"
    brk = check(chain, Link(3, chain[2]["row_hash"])).first_break
    assert brk is not None and brk.kind == "beyond_head" and brk.seq == 4
    brk = check(chain, None).first_break
    assert brk is not None and brk.kind == "missing_head"
    assert check(chain[:0], head).first_break is not None  # every row gone, the head remains
    # rows appended while the check ran: the head read afterwards is further on, and that is fine
    assert tail_break(Link(3, chain[2]["row_hash"]), Link(2, chain[1]["row_hash"]), head) is None


def test_a_head_no_chain_can_hold_is_a_break() -> None:
    """A chain head edited into text (`seq = 'x'`, SQLite keeps it) made verification a 500: comparing it raised."""
    chain = rows(3)
    for head in (Link("x", chain[2]["row_hash"]), Link(2.5, chain[2]["row_hash"]), Link(3, "z" * 64), Link(3, None)):
        brk = check(chain, head).first_break  # type: ignore[arg-type]
        assert brk is not None and brk.kind == "unreadable_head" and brk.seq == 3, (head, brk)


def test_an_unreadable_head_is_reported_by_the_api_and_the_cli(sqlite_api, doc) -> None:
    from app.admin import verify_audit

    v = sqlite_api.import_model(doc)
    predict(sqlite_api, v["id"], [REC_HIGH])
    tamper(sqlite_api, f"UPDATE audit_chain_heads SET seq = 'x' WHERE tenant_id = '{sqlite_api.tenant_a}'")
    brk = verify(sqlite_api)["first_break"]
    assert brk["kind"] == "unreadable_head" and "'x'" in brk["message"], brk
    (report,) = [r for r in verify_audit(sqlite_api.url, None) if r.tenant_id == sqlite_api.tenant_a]
    assert report.first_break is not None and report.first_break.kind == "unreadable_head"


def test_break_kinds_are_the_documented_ones() -> None:
    assert set(typing.get_args(BreakKind)) == set(audit_chain.BREAK_KINDS)


def test_hash_survives_a_json_round_trip_and_naive_utc() -> None:
    r = rows(1)[0]
    stored = json.loads(json.dumps({**r, "created_at": None}))
    stored["created_at"] = r["created_at"].replace(tzinfo=None)  # SQLite hands timestamps back naive (UTC)
    assert audit_chain.canonical_body(stored) == audit_chain.canonical_body(r)


def test_audit_rows_record_missing_filled(doc) -> None:
    rl = RuleList.from_dict(doc)
    recs = [REC_HIGH, REC_FILLED, REC_CAT_MISSING, {**REC_HIGH, "income": float("nan")}]
    results = [{"prediction": "low", "probabilities": {"low": 1.0, "high": 0.0}, "rule_id": 0}] * 4
    got = audit.audit_rows("tn_a", "key_1", "mv_1", rl.features, recs, results, {"smoker"})
    assert [r["missing_filled"] for r in got] == [False, True, False, True]


# --- the service: writer, endpoint, tampering ------------------------------------------------------


def predict(api, version_id: str, records: list[Any], key: str | None = None) -> None:
    r = api.client.post(f"/v1/models/{version_id}/predict", json={"records": records}, headers=api.h(key))
    assert r.status_code == 200, r.text


def verify(api, key: str | None = None) -> dict[str, Any]:
    r = api.client.get("/v1/audit/verify", headers=api.h(key))
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def audit_rows(api) -> list[dict[str, Any]]:
    with api.app.state.service.db.engine.connect() as c:
        return [dict(m) for m in c.execute(text("SELECT * FROM audit_log ORDER BY id")).mappings()]


def tamper(api, *statements: str) -> None:
    """Run statements as the owner with the append-only triggers lifted (SQLite: dropped and re-created)."""
    eng = api.app.state.service.db.engine
    sqlite = eng.dialect.name == "sqlite"
    with eng.begin() as c:
        if sqlite:
            c.execute(text("DROP TRIGGER audit_log_no_update"))
            c.execute(text("DROP TRIGGER audit_log_no_delete"))
        else:
            c.execute(text("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_change"))
        for stmt in statements:
            c.execute(text(stmt))
        if sqlite:
            for op in ("UPDATE", "DELETE"):
                c.execute(
                    text(
                        f"CREATE TRIGGER audit_log_no_{op.lower()} BEFORE {op} ON audit_log "
                        "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
                    )
                )
        else:
            c.execute(text("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_change"))


def test_decisions_are_chained_per_tenant(api, doc) -> None:
    v = api.import_model(doc)
    vb = api.import_model(doc, key=api.key_b)
    predict(api, v["id"], [REC_HIGH, REC_FILLED])
    predict(api, vb["id"], [REC_HIGH], key=api.key_b)
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("x.csv", b"age,income,smoker\n67,50,yes\n,3,no\n", "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 200, r.text
    mine = [r for r in audit_rows(api) if r["tenant_id"] == api.tenant_a]
    assert [r["seq"] for r in mine] == [1, 2, 3, 4]
    assert [r["missing_filled"] for r in mine] == [False, True, False, True]  # JSON and CSV alike
    assert mine[0]["prev_hash"] == GENESIS and mine[3]["prev_hash"] == mine[2]["row_hash"]
    assert verify(api) == {
        "tenant_id": api.tenant_a,
        "intact": True,
        "rows_checked": 4,
        "head": {"seq": 4, "row_hash": mine[3]["row_hash"]},
        "first_break": None,
        "registry_events": {"intact": True, "models_checked": 1, "events_checked": 1, "first_break": None},
    }
    other = verify(api, api.key_b)
    assert other["intact"] and other["rows_checked"] == 1 and other["tenant_id"] == api.tenant_b
    listed = api.client.get("/v1/audit", headers=api.h()).json()["items"]
    assert [i["seq"] for i in listed] == [4, 3, 2, 1] and listed[0]["row_hash"] == mine[3]["row_hash"]


def test_changed_row_is_named(api, doc) -> None:
    v = api.import_model(doc)
    for _ in range(3):
        predict(api, v["id"], [REC_HIGH, REC_FILLED])
    victim = audit_rows(api)[3]
    tamper(api, f"UPDATE audit_log SET rule_id = rule_id + 1 WHERE id = {victim['id']}")
    brk = verify(api)["first_break"]
    assert brk["kind"] == "content_hash_mismatch" and brk["seq"] == 4 and "row_id" not in brk
    assert verify(api, api.key_b)["intact"]  # another tenant's chain is its own


def test_deleted_rows_are_found(api, doc) -> None:
    from app.admin import verify_audit

    v = api.import_model(doc)
    for _ in range(4):
        predict(api, v["id"], [REC_HIGH, REC_FILLED])
    ids = [r["id"] for r in audit_rows(api)]
    tamper(api, f"DELETE FROM audit_log WHERE id = {ids[2]}")
    (report,) = verify_audit(api.url, "tenant-a")
    assert report.first_break is not None and report.first_break.kind == "sequence_gap"
    assert report.first_break.row_id == ids[3] and report.rows_checked == 2
    tamper(api, f"DELETE FROM audit_log WHERE id >= {ids[2]}")  # now only the tail is missing
    (report,) = verify_audit(api.url, api.tenant_a)
    assert report.first_break is not None and report.first_break.kind == "truncated_tail"
    assert report.first_break.seq == 3 and "seqs 3..8 missing" in report.first_break.message


def test_a_forged_row_numbered_before_the_chain_is_found(api, doc) -> None:
    """A copy of a decision inserted with seq 0 passed verification (rows were read from seq 1 on) and was listed
    as a decision; the verifier names it, through the API and the admin command."""
    from app.admin import verify_audit

    v = api.import_model(doc)
    predict(api, v["id"], [REC_HIGH, REC_FILLED])
    cols = "created_at, tenant_id, api_key_id, model_version_id, input_digest, output, rule_id, prev_hash, row_hash"
    tamper(api, f"INSERT INTO audit_log ({cols}, seq) SELECT {cols}, 0 FROM audit_log WHERE seq = 2")
    forged = max(r["id"] for r in audit_rows(api))
    brk = verify(api)["first_break"]
    assert brk["kind"] == "sequence_before_start" and brk["seq"] == 0 and "row_id" not in brk, brk
    (report,) = verify_audit(api.url, "tenant-a")
    assert not report.intact and report.rows_checked == 0 and report.first_break.row_id == forged


def test_every_tenant_is_in_the_report_even_with_its_whole_chain_deleted(api, doc) -> None:
    """Deleting a tenant's rows and its head made it vanish from `verify-audit`'s report (only tenants with a chain
    were listed), so "intact" covered the others only; every tenant is listed, this one with 0 rows."""
    from app.admin import verify_audit

    v = api.import_model(doc)
    predict(api, v["id"], [REC_HIGH])
    tamper(
        api,
        f"DELETE FROM audit_log WHERE tenant_id = '{api.tenant_a}'",
        f"DELETE FROM audit_chain_heads WHERE tenant_id = '{api.tenant_a}'",
    )
    reports = {r.tenant_id: r for r in verify_audit(api.url, None)}
    assert {api.tenant_a, api.tenant_b} <= set(reports)
    assert reports[api.tenant_a].rows_checked == 0 and reports[api.tenant_a].head is None


def test_verify_streams_in_pages(api, doc) -> None:
    from app.services import audit_verify

    v = api.import_model(doc)
    for _ in range(5):
        predict(api, v["id"], [REC_HIGH, REC_FILLED, REC_CAT_MISSING])
    db = api.app.state.service.db
    with db.sessionmaker() as s:
        assert [len(p) for p in audit_verify.chain_pages(s, api.tenant_a, page_rows=4)] == [4, 4, 4, 3]
        assert audit_verify.verify_tenant(s, api.tenant_a, page_rows=4).rows_checked == 15
    victim = audit_rows(api)[13]
    tamper(api, f"UPDATE audit_log SET input_digest = '{'0' * 64}' WHERE id = {victim['id']}")
    with db.sessionmaker() as s:
        report = audit_verify.verify_tenant(s, api.tenant_a, page_rows=4)
    assert report.first_break is not None and report.first_break.row_id == victim["id"] and report.rows_checked == 13


def test_concurrent_writers_keep_one_chain(api, doc) -> None:
    """Threads each committing their own batches (the CSV path) while the group-commit writer runs."""
    v = api.import_model(doc)
    engine = api.app.state.service.db.engine
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(10):
                audit.write_rows(engine, plain_rows(3, api.tenant_a, tag=worker * 100 + i))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for _ in range(5):
        predict(api, v["id"], [REC_HIGH])
    for t in threads:
        t.join()
    assert errors == []
    report = verify(api)
    assert report["intact"] and report["rows_checked"] == 4 * 10 * 3 + 5, report


def test_verify_audit_command(api, doc, capsys, monkeypatch) -> None:
    from worker.cli import main

    monkeypatch.setenv("NEURULES_DATABASE_URL", api.url)
    v = api.import_model(doc)
    predict(api, v["id"], [REC_HIGH, REC_FILLED])
    predict(api, v["id"], [REC_HIGH], key=api.key_a)
    with pytest.raises(SystemExit) as ok:
        main(["verify-audit"])
    assert ok.value.code == 0
    out = capsys.readouterr()
    assert "audit chains of 2 tenant(s): intact; 3 row(s) and 1 registry event(s) checked" in out.err  # tenant-b: none
    lines = {json.loads(line)["tenant_id"]: json.loads(line) for line in out.out.splitlines()}
    assert lines[api.tenant_a] == {**verify(api), "tenant_id": api.tenant_a}
    assert lines[api.tenant_b]["rows_checked"] == 0 and lines[api.tenant_b]["intact"]
    victim = audit_rows(api)[1]
    tamper(api, f"DELETE FROM audit_log WHERE id = {victim['id']}")
    with pytest.raises(SystemExit) as broken:
        main(["verify-audit", "--tenant", "tenant-a"])
    assert broken.value.code == 1
    out = capsys.readouterr()
    (line,) = out.out.splitlines()
    brk = json.loads(line)["first_break"]
    assert brk["kind"] == "sequence_gap" and brk["seq"] == 3 and "BROKEN in 1 tenant(s)" in out.err
    with pytest.raises(SystemExit) as unknown:  # not 1: a typo is no broken chain
        main(["verify-audit", "--tenant", "nobody"])
    assert unknown.value.code == 2 and "no tenant 'nobody'" in capsys.readouterr().err


def test_verify_while_writers_append(api) -> None:
    """Decisions committed during a check (between its pages and its head reads) are no false alarm."""
    from app.services import audit_verify

    engine = api.app.state.service.db.engine
    audit.write_rows(engine, plain_rows(50, api.tenant_a))
    stop = threading.Event()

    def append() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            audit.write_rows(engine, plain_rows(3, api.tenant_a, tag=i))

    writer = threading.Thread(target=append)
    writer.start()
    try:
        reports = []
        for _ in range(200):  # at least 5 checks, and on until the writer has appended during them
            with api.app.state.service.db.sessionmaker() as s:
                reports.append(audit_verify.verify_tenant(s, api.tenant_a, page_rows=7))
            if len(reports) >= 5 and reports[-1].rows_checked > reports[0].rows_checked:
                break
    finally:
        stop.set()
        writer.join()
    assert all(r.intact for r in reports), [r.first_break for r in reports]
    assert reports[-1].rows_checked > reports[0].rows_checked >= 50  # the chain grew while it was checked


def test_one_row_link_is_the_canonical_one() -> None:
    row = rows(1)[0]
    del row["seq"], row["prev_hash"], row["row_hash"]
    links = link_columns({k: [row[k]] for k in BODY_COLUMNS}, 1, START)
    assert canonical_bodies({k: [row[k]] for k in BODY_COLUMNS}, 1) == [canonical_body(row)]
    assert links.row_hash == [row_hash(1, GENESIS, canonical_body(row))]
    assert links.head == Link(1, links.row_hash[0])


def test_rows_appended_in_a_transaction_already_open_on_sqlite(sqlite_api, doc) -> None:
    """A caller whose transaction wrote first (the write lock not taken by polling): the chain stays intact.

    (It passes with either order of creating and reading heads: in WAL mode a stale snapshot is an error,
    never a fork; the fallback keeps the order that takes the write lock before reading.)"""
    engine = sqlite_api.app.state.service.db.engine
    tenant = sqlite_api.tenant_a
    for i in range(2):  # the tenant's head missing, then present
        with engine.begin() as conn:
            conn.execute(text("UPDATE api_keys SET tenant_id = tenant_id WHERE 1 = 0"))  # opens the transaction
            assert conn.connection.dbapi_connection.in_transaction
            audit.append_rows(conn, plain_rows(3, tenant, tag=i))
    report = verify(sqlite_api)
    assert report["intact"] and report["rows_checked"] == 6, report


def test_each_decision_names_its_audit_record(api, doc) -> None:
    """`audit_seq` in the answer is the place of that decision's committed row; `?seq=` returns that row."""
    v = api.import_model(doc)
    predict(api, v["id"], [REC_HIGH])
    r = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC_FILLED, REC_HIGH]}, headers=api.h())
    assert r.status_code == 200, r.text
    answers = r.json()["predictions"]
    assert [a["audit_seq"] for a in answers] == [2, 3]
    for a, record in zip(answers, [REC_FILLED, REC_HIGH], strict=True):
        items = api.client.get(f"/v1/audit?seq={a['audit_seq']}", headers=api.h()).json()["items"]
        assert len(items) == 1
        row = items[0]
        assert row["seq"] == a["audit_seq"] and row["rule_id"] == a["rule_id"]
        assert row["output"]["prediction"] == a["prediction"] and row["model_version_id"] == v["id"]
        assert row["input_digest"] == serving.digest(record)
    assert api.client.get("/v1/audit?seq=3", headers=api.h(api.key_b)).json()["items"] == []  # another tenant's


def test_concurrent_requests_each_get_their_own_rows(sqlite_api) -> None:
    """Requests committed in one group commit: each gets the `seq`s of its own rows, in its order."""
    import asyncio

    writer = audit.AuditWriter(sqlite_api.app.state.service.db.engine)
    sizes = [1, 3, 2, 1, 4]

    async def all_at_once() -> list[list[int]]:
        batches = [plain_rows(n, sqlite_api.tenant_a, tag=i) for i, n in enumerate(sizes)]
        return await asyncio.gather(*(writer.write(b) for b in batches))

    try:
        got = asyncio.run(all_at_once())
    finally:
        writer.close()
    assert sorted(s for seqs in got for s in seqs) == list(range(1, sum(sizes) + 1))
    by_seq = {r["seq"]: r["input_digest"] for r in audit_rows(sqlite_api)}
    for i, seqs in enumerate(got):
        assert len(seqs) == sizes[i]
        assert [by_seq[s] for s in seqs] == [r["input_digest"] for r in plain_rows(sizes[i], tag=i)]


def _digest_by_tenant_seq(api) -> dict[tuple[str, int], str]:
    return {(r["tenant_id"], r["seq"]): r["input_digest"] for r in audit_rows(api)}


def test_a_group_commit_across_tenants_returns_seqs_in_each_requests_order(api) -> None:
    """Two tenants interleaved in the requests of one group commit: each request gets its rows' seqs, in order."""
    import asyncio

    a, b = api.tenant_a, api.tenant_b
    writer = audit.AuditWriter(api.app.state.service.db.engine)

    def request(tenants: list[str], tag: int) -> list[dict[str, Any]]:
        return [plain_rows(1, t, tag=tag * 100 + i)[0] for i, t in enumerate(tenants)]

    requests = [request([a, b, a], 1), request([b], 2), request([a, b, b, a], 3), request([b, a], 4)]

    async def all_at_once() -> list[list[int]]:
        return await asyncio.gather(*(writer.write(r) for r in requests))

    try:
        got = asyncio.run(all_at_once())
    finally:
        writer.close()
    table = _digest_by_tenant_seq(api)
    for rows, seqs in zip(requests, got, strict=True):
        assert [table[(r["tenant_id"], s)] for r, s in zip(rows, seqs, strict=True)] == [
            r["input_digest"] for r in rows
        ]
    assert verify(api)["intact"] and verify(api, api.key_b)["intact"]


def test_column_rows_of_several_tenants_return_seqs_in_input_order(api) -> None:
    a, b = api.tenant_a, api.tenant_b
    rows = [plain_rows(1, t, tag=i)[0] for i, t in enumerate([b, a, b, b, a])]
    engine = api.app.state.service.db.engine
    seqs = audit.write_rows(engine, audit.ColumnRows({k: [r[k] for r in rows] for k in rows[0]}))
    table = _digest_by_tenant_seq(api)
    assert [table[(r["tenant_id"], s)] for r, s in zip(rows, seqs, strict=True)] == [r["input_digest"] for r in rows]


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("output", "'not json'", "output is not JSON"),
        ("created_at", "'garbage'", "created_at is not a time"),
        ("rule_id", "'abc'", "rule_id is not a whole number"),
        # read as the last value by Python, as the first by SQL's json_extract: it passed as intact
        ("output", """'{"prediction":"0","prediction":"1"}'""", "output names the key 'prediction' twice"),
        # the Boolean's reading took any truthy value for true: these passed as intact
        ("missing_filled", "'no'", "missing_filled is not a boolean ('no')"),
        ("missing_filled", "2", "missing_filled is not a boolean (2)"),
    ],
)
def test_a_row_changed_into_values_its_columns_cannot_hold_is_named_not_a_500(
    sqlite_api, doc, column: str, value: str, words: str
) -> None:
    """On SQLite (which keeps whatever a column is given) a row edited to hold text that is not JSON as its
    output, or no time as its created_at, made the verification and every audit page holding it a 500 (the
    typed reading raised before the checker saw the row). Now the verification names that row, and the
    audit trail lists it with `unreadable` saying what cannot be read."""
    v = sqlite_api.import_model(doc)
    for _ in range(3):
        predict(sqlite_api, v["id"], [REC_HIGH, REC_FILLED])
    victim = audit_rows(sqlite_api)[3]
    tamper(sqlite_api, f"UPDATE audit_log SET {column} = {value} WHERE id = {victim['id']}")
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    r = client.get("/v1/audit/verify", headers=sqlite_api.h())
    assert r.status_code == 200, r.text
    broken = r.json()["first_break"]
    assert r.json()["intact"] is False and broken["kind"] == "unreadable_row", r.json()
    assert broken["seq"] == victim["seq"] and words in broken["message"] and "row_id" not in broken
    r = client.get("/v1/audit", params={"seq": victim["seq"]}, headers=sqlite_api.h())
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    assert words in item["unreadable"] and item[column] is None
    assert item["input_digest"] == victim["input_digest"]  # the rest as stored
    r = client.get("/v1/audit", params={"limit": 6}, headers=sqlite_api.h())
    assert r.status_code == 200 and len(r.json()["items"]) == 6, r.text
    assert [i["unreadable"] is None for i in r.json()["items"]] == [
        i["seq"] != victim["seq"] for i in r.json()["items"]
    ]
    r = client.get("/v1/models/risk@latest/monitoring", headers=sqlite_api.h())  # the other reader of these rows
    assert r.status_code == 200, r.text
