"""The audit hash chain (pure): canonical row content, row hashes, linking rows and checking a chain.

Each tenant's audit rows form one chain: row `seq` (1, 2, 3, ...) carries `prev_hash`, the `row_hash`
of the tenant's row `seq - 1` (`GENESIS` for row 1), and its own `row_hash`, the SHA-256 of

    neurules.audit.v1 \\n <seq> \\n <prev_hash> \\n <canonical JSON of the other columns>

so changing any column of a row, deleting a row or re-linking one breaks the chain at that row.
The layout is specified in docs/audit.md; the writer (`app.services.audit`) and the verifier
(`app.services.audit_verify`) both use these functions and nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, AnyStr, NamedTuple, get_args

from app.schemas.audit import BreakKind

GENESIS = "0" * 64  # the prev_hash of a tenant's first row
HASH_PREFIX = "neurules.audit.v1"
BODY_COLUMNS = (
    "api_key_id",
    "created_at",
    "input_digest",
    "missing_filled",
    "model_version_id",
    "output",
    "rule_id",
    "tenant_id",
)


BREAK_KINDS: tuple[str, ...] = get_args(BreakKind)  # what `ChainBreak.kind` can be (the API documents each)


class Link(NamedTuple):
    """One link of a chain: a row's (or the head's) sequence number and hash; `Link(0, GENESIS)` is the start."""

    seq: int
    row_hash: str


START = Link(0, GENESIS)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # = json.dumps(..., sort_keys, separators)


def timestamp(value: datetime) -> str:
    """A time as the chain hashes it: UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (a naive time is taken as UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def canonical_body(row: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys, compact, ASCII) of a row's columns besides id, seq and the hashes."""
    body = {name: row[name] for name in BODY_COLUMNS}
    body["created_at"] = timestamp(row["created_at"])
    return _ENCODER.encode(body)


def row_hash(seq: int, prev_hash: str, body: str, prefix: str = HASH_PREFIX) -> str:
    """The SHA-256 (hex) of a row's canonical content (`prefix`: which chain's format, the audit's by default)."""
    return hashlib.sha256(f"{prefix}\n{seq}\n{prev_hash}\n{body}".encode()).hexdigest()


def audit_row_hash(row: Mapping[str, Any]) -> str:
    """The hash an audit row's content and links give (what its `row_hash` must be)."""
    return row_hash(row["seq"], row["prev_hash"], canonical_body(row))


def link_rows(rows: Sequence[dict[str, Any]], head: Link) -> Link:
    """Give `rows` (one tenant's, in order) their seq, prev_hash and row_hash after `head`; the new head."""
    columns = {name: [row[name] for row in rows] for name in BODY_COLUMNS}
    links = link_columns(columns, len(rows), head)
    for row, seq, prev, own in zip(rows, links.seq, links.prev_hash, links.row_hash, strict=True):
        row["seq"], row["prev_hash"], row["row_hash"] = seq, prev, own
    return links.head


@dataclass(frozen=True)
class Links:
    """The chain columns of linked rows, and the new head."""

    seq: list[int]
    prev_hash: list[str]
    row_hash: list[str]
    head: Link


def link_columns(columns: Mapping[str, Sequence[Any]], n: int, head: Link) -> Links:
    """Link `n` rows of one tenant given column-wise (at least BODY_COLUMNS), in order, after `head`."""
    bodies = canonical_bodies(columns, n)
    seqs = list(range(head.seq + 1, head.seq + n + 1))
    hashes: list[str] = []
    add = hashes.append
    prev = head.row_hash
    sha = hashlib.sha256
    for seq, body in zip(seqs, bodies, strict=True):
        prev = sha(f"{HASH_PREFIX}\n{seq}\n{prev}\n{body}".encode()).hexdigest()  # = row_hash(seq, prev, body)
        add(prev)
    return Links(seqs, [head.row_hash, *hashes[:-1]] if n else [], hashes, Link(head.seq + n, prev))


def canonical_bodies(columns: Mapping[str, Sequence[Any]], n: int) -> list[str]:
    """`canonical_body` of each of `n` rows given column-wise, each distinct value encoded once.

    The encoder writes a sorted dict as `{` + `"key":value` pairs joined by `,` + `}`, each value as
    it would encode it alone; so each column's values are encoded per distinct object, a column with
    one object goes into a template as text and the others are filled in per row
    (tests/app/test_audit_chain.py and tests/app/test_batch.py check the result against `canonical_body`).
    """
    if n <= 1:  # one row (a single-record request): encoded as it is, without the template
        return [canonical_body({k: columns[k][0] for k in BODY_COLUMNS})] if n else []
    pieces: list[str] = []  # the template's fixed text between varying columns
    varying: list[Sequence[str]] = []
    text = "{"
    for i, name in enumerate(sorted(BODY_COLUMNS)):
        text += ("," if i else "") + _ENCODER.encode(name) + ":"
        rendered = _rendered(columns[name], times=name == "created_at")
        if isinstance(rendered, str):
            text += rendered
        elif isinstance(rendered, _Bare):  # plain ASCII letters and digits: the quotes go into the template
            pieces.append(text + '"')
            varying.append(rendered.values)
            text = '"'
        else:
            pieces.append(text)
            varying.append(rendered)
            text = ""
    pieces.append(text + "}")
    return interleaved(pieces, varying, n, "\x00")  # canonical JSON escapes control characters: never in a body


def interleaved(pieces: Sequence[AnyStr], columns: Sequence[Sequence[AnyStr]], n: int, sep: AnyStr) -> list[AnyStr]:
    """Per row i, `pieces[0] + columns[0][i] + pieces[1] + ... + pieces[-1]` (`sep` must occur in none of them).

    Built as one join over all rows and split at `sep`: a few C loops instead of a format per row.
    """
    if not columns:
        return [pieces[0]] * n
    width = 2 * len(columns) + 1
    flat: list[Any] = [None] * (n * width)
    for j, column in enumerate(columns):
        flat[2 * j :: width] = [pieces[j]] * n
        flat[2 * j + 1 :: width] = column
    flat[width - 1 :: width] = [pieces[-1] + sep] * n
    out = sep[:0].join(flat).split(sep)
    out.pop()  # after the last separator
    return out


def _encode_time(value: datetime) -> str:
    return _ENCODER.encode(timestamp(value))


class _Bare(NamedTuple):
    """Strings of ASCII letters and digits only (digests, ids): their JSON is each one in quotes."""

    values: Sequence[str]


def _rendered(values: Sequence[Any], *, times: bool) -> str | list[str] | _Bare:
    """Each value's JSON (one text when every row holds the same value), each distinct object encoded once."""
    first = values[0]
    encode: Callable[[Any], str] = _encode_time if times else _ENCODER.encode
    if type(first) is str and not times:
        if values.count(first) == len(values):  # equal strings encode alike
            return str(encode(first))
        with contextlib.suppress(TypeError):  # not all strings
            joined = "".join(values)
            if joined.isascii() and joined.encode().isalnum():  # bytes: a table lookup per character
                return _Bare(values)
    ids = list(map(id, values))
    distinct = dict(zip(ids, values, strict=True))
    if len(distinct) == 1:
        return str(encode(first))
    texts = {key: encode(v) for key, v in distinct.items()}
    return list(map(texts.__getitem__, ids))


@dataclass(frozen=True)
class ChainBreak:
    """The first broken link of a chain: what differs, at which row (id and seq) where there is one."""

    kind: BreakKind
    message: str
    row_id: int | None = None
    seq: int | None = None


class ChainChecker:
    """Checks one chain's rows fed in `seq` order, then the tail against the chain head; stops at the first break.
    `hash_row` is what a row's `row_hash` must be (the audit's rows by default; `registry_chain` for events)."""

    def __init__(self, hash_row: Callable[[Mapping[str, Any]], str] = audit_row_hash) -> None:
        self.hash_row = hash_row
        self.last = START
        self.rows_checked = 0
        self.first_break: ChainBreak | None = None

    def feed(self, row: Mapping[str, Any]) -> bool:
        """Check the next row; False once the chain is broken (at this row or before)."""
        if self.first_break is None:
            self.first_break = self._check(row)
            if self.first_break is None:
                self.last = Link(row["seq"], row["row_hash"])
                self.rows_checked += 1
        return self.first_break is None

    def _check(self, row: Mapping[str, Any]) -> ChainBreak | None:
        # messages place a row by its seq only: its storage id numbers every tenant's rows together, and the
        # tenant's own verification must not show how many rows other tenants added (the id stays in `row_id`)
        rid, seq, expected = row["id"], row["seq"], self.last.seq + 1
        if row.get("unreadable"):  # a value changed outside the service, into one its column cannot hold
            where = f"at seq {seq}" if seq is not None else f"after seq {self.last.seq}"
            msg = f"the row {where} cannot be read: {row['unreadable']} (changed)"
            return ChainBreak("unreadable_row", msg, rid, seq if seq is not None else expected)
        if seq < 1:  # the writer numbers from 1: such a row was put in around it
            msg = f"a row has seq {seq}, before the chain's first row (seq 1): a row inserted outside the writer"
            return ChainBreak("sequence_before_start", msg, rid, seq)
        if seq != expected:
            if seq > expected:
                gone = _span(expected, seq - 1)
                msg = f"the next row has seq {seq} where seq {expected} was expected: {gone} missing (deleted)"
                return ChainBreak("sequence_gap", msg, rid, seq)
            msg = f"a row has seq {seq} again after seq {self.last.seq} (a duplicated or inserted row)"
            return ChainBreak("sequence_repeated", msg, rid, seq)
        if row["prev_hash"] != self.last.row_hash:
            msg = (
                f"the row at seq {seq} links to previous hash {row['prev_hash']} but the row before it "
                f"(seq {self.last.seq}) has hash {self.last.row_hash} (a row was replaced or forged)"
            )
            return ChainBreak("previous_hash_mismatch", msg, rid, seq)
        actual = self.hash_row(row)
        if actual != row["row_hash"]:
            msg = f"the row at seq {seq} content hashes to {actual} but its row_hash is {row['row_hash']} (changed)"
            return ChainBreak("content_hash_mismatch", msg, rid, seq)
        return None

    def finish(self, head_before: Link | None, head_after: Link | None) -> ChainBreak | None:
        """Check the tail against the head read before the rows (truncation) and after them (rows beyond it)."""
        if self.first_break is None:
            self.first_break = tail_break(self.last, head_before, head_after)
        return self.first_break


def tail_break(last: Link, head_before: Link | None, head_after: Link | None) -> ChainBreak | None:
    """What is wrong with a chain ending at `last` whose rows all linked, given its head before and after."""
    for head in (head_before, head_after):
        if head is not None and not readable_link(head):
            msg = f"the chain head holds seq {head.seq!r} and hash {head.row_hash!r}, which no head can hold (edited)"
            return ChainBreak("unreadable_head", msg, None, last.seq)
    if head_before is None and head_after is None:
        if last.seq == 0:
            return None
        msg = f"rows up to seq {last.seq} exist but the tenant has no chain head (the head row was deleted)"
        return ChainBreak("missing_head", msg, None, last.seq)
    if head_before is not None and last.seq < head_before.seq:
        gone = _span(last.seq + 1, head_before.seq)
        msg = (
            f"the chain head is at seq {head_before.seq} but the last row has seq {last.seq}: {gone} missing (deleted)"
        )
        return ChainBreak("truncated_tail", msg, None, last.seq + 1)
    for head in (head_before, head_after):
        if head is not None and head.seq == last.seq and head.row_hash != last.row_hash:
            msg = f"the chain head at seq {head.seq} has hash {head.row_hash} but the last row has {last.row_hash}"
            return ChainBreak("head_mismatch", msg, None, last.seq)
    if head_after is None:
        msg = "the chain head disappeared while the chain was checked (the head row was deleted)"
        return ChainBreak("missing_head", msg, None, last.seq)
    if last.seq > head_after.seq:
        beyond = _span(head_after.seq + 1, last.seq)
        msg = f"{beyond} exist beyond the chain head at seq {head_after.seq} (appended outside the writer)"
        return ChainBreak("beyond_head", msg, None, head_after.seq + 1)
    return None


def readable_link(link: Link) -> bool:
    """A seq a chain can hold (a whole number, not a bool) and a hash in SHA-256's hex form (SQLite keeps any value)."""
    h = link.row_hash
    return type(link.seq) is int and isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def _span(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seqs {first}..{last}"
