"""CSV batch scoring in chunks: memory bounded whatever the file size, typed and evaluated column-wise.

Two passes over the upload (which the multipart parser has spooled to disk):
1. `check_file`: the file is cut into chunks of whole records (`_Splitter`: csv.reader's line ends and
   quoting, followed in one forward pass), each parsed and typed; the answer is what parsing the whole
   file with `csvdata.parse_csv` gives, errors included and in its order (`_Check` keeps the first of
   each kind and reads on while a later kind could outrank it), before anything is decided or audited.
   The typed columns are spilled to a temporary file. A file separated by `;`, tab or `|` that holds a
   comma is read twice: its columns' decimal commas are decided over the whole file first.
2. `Scorer`, chunk after chunk: rule ids column-wise (`RuleList.apply` on columns), the chunk's
   audit rows committed, then its CSV rows returned for the streamed response.

A chunk of plain numeric cells (no quotes, no missing or non-finite values) is typed by pandas' C
parser (the one place pandas enters the request path; `neurules-admin serve` imports it at start-up,
the JSON predict path never uses it) and its input digests are built column-wise; any other chunk goes
through `csvdata.parse_rows` and `serving.table_columns` record by record, exactly as before. Both
give the same values, the same digests and the same errors (tests/app/test_batch.py checks them against each other
and against the one-shot path on random files).
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import pickle
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from app.services import csvdata, decimal_comma, serving
from app.services.csvdata import CSVError, CSVTooManyRows
from app.services.errors import Unavailable
from app.services.monitoring import records_missing_filled
from app.services.serving import MAX_ERROR_DETAILS, RecordError, ServedModel
from app.tables import utcnow
from models import csvtext
from models.rulelist import csv_label, decision_header, json_label

log = logging.getLogger("neurules.batch")


def storage_failed(e: OSError, what: str) -> Unavailable:
    """503 naming the server's temporary storage, where `what` could not be held (full, or failing): uploads and
    checked CSV columns are spooled there."""
    log.error("temporary storage failed", extra={"what": what, "error": str(e)})
    return Unavailable(
        f"{what} could not be held in the server's temporary storage ({e.strerror or type(e).__name__}); "
        "nothing was done: retry later",
        dependency="temporary_storage",
    )


# the answer's last column: each row's place in its tenant's audit chain (`GET /v1/audit?seq=`), as a JSON
# decision's `audit_seq`; `neurules predict` (no audit) writes the decision table without it
AUDIT_SEQ_COLUMN = "audit_seq"

CHUNK_BYTES = 4 * 1024 * 1024  # ~90,000 heart-sized rows; a chunk's typed columns take a few MiB
CHUNK_ROWS = 100_000  # and at most about this many lines (narrow rows)
READ_BYTES = 1024 * 1024
BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"[\r\n]")


@dataclass
class Chunk:
    """Typed columns of consecutive data rows; `exact` when typed record by record (lists, None = missing)."""

    first_index: int  # index (from 0, as in the answer) of the chunk's first row
    n_rows: int
    columns: dict[str, Any]
    exact: bool


@dataclass
class CheckedFile:
    """A file that passed the checks: its chunks spilled to a temporary file, and the row count."""

    spill: IO[bytes]
    n_chunks: int
    n_rows: int

    def chunks(self) -> Iterator[Chunk]:
        """The typed chunks, in order."""
        self.spill.seek(0)
        for _ in range(self.n_chunks):
            yield pickle.load(self.spill)

    def close(self) -> None:
        """Remove the spill file."""
        self.spill.close()


class _Splitter:
    """Cuts an upload into pieces of whole records as csv.reader reads them (line ends \\r\\n, \\n or a lone \\r,
    quoted fields kept whole), in one forward pass whose quoting state is carried across reads."""

    def __init__(self, fh: IO[bytes], delimiter: str, chunk_bytes: int, chunk_rows: int) -> None:
        self.fh, self.chunk_bytes, self.chunk_rows = fh, chunk_bytes, chunk_rows
        self.delim = ord(delimiter)
        self.buf = bytearray()
        self.eof = False
        self.pos = 0  # bytes of buf scanned; `quoted`: the state there
        self.quoted = False
        self.end = 0  # just after the last record end found in buf (0: none)
        self.start = -1  # where the first field starts (after a BOM): a quote there opens it
        self.opened = 0  # where the quoted field being read opened
        self.counted = (0, 0)  # (limit, b"\\n" before it) of the piece being cut
        self.newlines = 0  # b"\\n" in the last piece

    def _read(self) -> None:
        block = self.fh.read(READ_BYTES)
        self.eof = not block
        if self.start < 0:
            self.start = 3 if block.startswith(BOM) else 0
        self.buf += block

    def first(self) -> bytes:
        """The first record (the header), with its line end: scanned up to one line end after another."""
        self.counted = (0, 0)
        while self.end == 0:
            if self.quoted and self.pos - self.opened > _field_cap():
                self.end = _char_start(self.buf, self.pos)  # csv.reader refuses the field within these bytes
                break
            m = _LINE_END.search(self.buf, self.pos)
            if m is not None and (m.end() < len(self.buf) or self.eof):  # the byte after it is known
                self._scan(m.end())
            elif self.eof:
                self.end = len(self.buf)
            else:
                self._read()
        return self._cut()

    def pieces(self) -> Iterator[bytes]:
        """The remaining records, in pieces of about `chunk_bytes` and at most about `chunk_rows` lines."""
        while piece := self._next():
            yield piece

    def _next(self) -> bytes:
        while not self.eof and len(self.buf) < self.chunk_bytes:
            self._read()
        limit = self._limit()
        while True:
            self._scan(limit)
            if self.end > 0:
                break
            if self.quoted and self.pos - self.opened > _field_cap():
                self.end = _char_start(self.buf, self.pos)  # csv.reader refuses the field within these bytes
                break
            if limit < len(self.buf):
                limit = len(self.buf)
                continue
            if self.eof:
                self.end = len(self.buf)
                break
            self._read()
            limit = len(self.buf)
        return self._cut()

    def _cut(self) -> bytes:
        """The bytes up to the record end found, taken off the buffer (`newlines`: the b"\\n" among them)."""
        cut = self.end
        limit, n = self.counted
        self.newlines = n - self.buf.count(b"\n", cut, limit) if cut <= limit else n + self.buf.count(b"\n", limit, cut)
        piece = bytes(self.buf[:cut])
        del self.buf[:cut]
        self.pos, self.end, self.start, self.opened = max(self.pos - cut, 0), 0, 0, max(self.opened - cut, 0)
        return piece

    def _limit(self) -> int:
        """How far to look for the piece's last record end: `chunk_bytes`, or the line that makes `chunk_rows`."""
        buf, limit = self.buf, min(len(self.buf), self.chunk_bytes)
        n = buf.count(b"\n", 0, limit)
        end = b"\n" if n else b"\r"  # a file of lone \\r line ends is capped on those
        if (n or buf.count(end, 0, limit)) > self.chunk_rows:
            ends = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=limit) == end[0])
            limit = int(ends[self.chunk_rows - 1]) + 1
            n = min(n, self.chunk_rows)
        self.counted = (limit, n)
        return limit

    def _scan(self, stop: int) -> None:
        """Follow the quoting state from `pos` to `stop`, noting the last record end outside quotes."""
        buf, i, tried = self.buf, self.pos, False
        while i < stop:
            q = buf.find(b'"', i, stop)
            if q >= 0 and not self.quoted and not tried:
                tried, i = True, max(i, self._scan_quotes(i, stop))
                continue
            if self.quoted:
                if q < 0:
                    i = stop
                elif q + 1 < len(buf) or self.eof:
                    escaped = q + 1 < len(buf) and buf[q + 1] == 0x22
                    self.quoted = escaped
                    i = q + 2 if escaped else q + 1
                    continue
                else:
                    i = q  # is it a doubled quote? wait for the next byte
                break
            end = self._last_end(i, stop if q < 0 else q)
            if end > 0:
                self.end = end
            if q < 0:
                i = stop
                break
            self.quoted = q == self.start or buf[q - 1] in (self.delim, 10, 13)
            self.opened = q
            i = q + 1
        self.pos = max(i, self.end)

    def _scan_quotes(self, lo: int, hi: int) -> int:
        """`_scan` of buf[lo:hi] (outside quotes at `lo`) by quote parity, column-wise: how far it went (-1: not).

        Parity is csv.reader's state when every quote opening a field (an even one) starts a field or follows
        a closing quote (a doubled quote), and line ends are \\n or \\r\\n; otherwise the quote-by-quote scan decides.
        """
        buf = self.buf
        if buf.find(b"\r", lo, hi) >= 0 and buf.count(b"\r", lo, hi) != buf.count(b"\r\n", lo, hi):
            return -1
        while hi > lo and buf[hi - 1] == 0x22:  # a closing quote, or the first of a doubled one? left to `_scan`
            hi -= 1
        data = np.frombuffer(buf, dtype=np.uint8, count=hi)
        quotes = np.flatnonzero(data[lo:] == 0x22) + lo
        if not len(quotes):
            return -1
        opening = quotes[0::2]
        before = data[np.maximum(opening - 1, 0)]
        doubled = np.zeros(len(opening), dtype=bool)
        doubled[1:] = opening[1:] - 1 == quotes[1::2][: len(opening) - 1]
        starts = (opening == self.start) | (before == self.delim) | (before == 10) | (before == 13) | doubled
        if not starts.all():
            return -1
        ends = np.flatnonzero(data[lo:] == 10) + lo
        outside = ends[np.searchsorted(quotes, ends) % 2 == 0]
        if len(outside):
            self.end = int(outside[-1]) + 1
        self.quoted = len(quotes) % 2 == 1
        self.opened = int(quotes[-1])
        return hi

    def _last_end(self, lo: int, hi: int) -> int:
        """Just after the last line end in buf[lo:hi] (a \\r before an unread byte is not one yet); -1 when none."""
        buf = self.buf
        while True:
            n, r = buf.rfind(b"\n", lo, hi), buf.rfind(b"\r", lo, hi)
            if n > r:
                return n + 1
            if r < 0:
                return -1
            if r + 1 < len(buf):
                return r + 2 if buf[r + 1] == 10 else r + 1
            if self.eof:
                return r + 1
            hi = r


def _field_cap() -> int:
    """Bytes of a quoted field past which csv.reader has surely refused it (a character takes at most 4)."""
    return 4 * (csv.field_size_limit() + 1)


def _char_start(buf: bytearray, i: int) -> int:
    """`i`, moved back to the start of the UTF-8 character it falls in (of the last one read, at the end)."""
    i = min(i, len(buf) - 1)
    while i > 0 and 0x80 <= buf[i] < 0xC0:
        i -= 1
    return i


def line_chunks(fh: IO[bytes], chunk_bytes: int | None = None, delimiter: str = ",") -> Iterator[bytes]:
    """The file in pieces of whole records of about `chunk_bytes` (CHUNK_BYTES), never cut inside a quoted field."""
    splitter = _Splitter(fh, delimiter, chunk_bytes or CHUNK_BYTES, CHUNK_ROWS)
    yield from splitter.pieces()


def _lines(data: bytes, newlines: int) -> int:
    """Physical lines as csv.reader counts them (a last line without its end counts); `newlines`: its b"\\n"."""
    n = newlines if b"\r" not in data else newlines + data.count(b"\r") - data.count(b"\r\n")
    return n + (1 if data and not data.endswith((b"\n", b"\r")) else 0)


def _blank(fh: IO[bytes]) -> bool:
    """Whether the file holds only whitespace (`bytes.strip`'s) or nothing."""
    fh.seek(0)
    while block := fh.read(READ_BYTES):
        if block.strip():
            fh.seek(0)
            return False
    fh.seek(0)
    return True


def _sniff(fh: IO[bytes]) -> tuple[str, bool]:
    """`csvtext.sniff_delimiter` of the file (its text up to the first \\n), and whether the file holds a comma."""
    count = csvtext.SeparatorCount()
    seen_newline, comma = False, False
    fh.seek(0)
    while block := fh.read(READ_BYTES):
        if not seen_newline:
            first = block.split(b"\n", 1)[0]
            seen_newline = len(first) < len(block)
            count.feed(first.decode("latin-1"))  # quotes and separators are ASCII: no UTF-8 sequence holds one
        comma = comma or b"," in block
        if seen_newline and comma:
            break
    fh.seek(0)
    return count.separator(), comma


@dataclass
class _Utf8:
    """Decodes a file piece by piece, naming its first bad byte as `csvdata.decode` names it for the whole file."""

    offset: int = 0  # bytes before the current piece
    newlines: int = 0  # b"\n" before the current piece (as `csvdata.decode` counts lines)
    bom: int = 0  # bytes of a byte order mark (the first piece's decoder counts a bad byte's place after it)
    tail: bytes = b""  # the last bytes before the current piece

    def decode(self, piece: bytes, newlines: int) -> str:
        """The piece's text; csv_not_utf8 naming the byte and line of the first bad byte as `csvdata.decode` does."""
        if self.offset == 0:
            self.bom = 3 if piece.startswith(BOM) else 0
        try:
            text = piece.decode("utf-8-sig" if self.offset == 0 else "utf-8")
        except UnicodeDecodeError as e:
            # the bad byte's place in the file, as `csvdata.decode` names it (utf-8-sig counts from after a BOM)
            at = e.start + self.bom if self.offset == 0 else self.offset + e.start
            context = self.tail + piece
            local = at - (self.offset - len(self.tail))
            line = self.newlines - self.tail.count(b"\n") + context[:local].count(b"\n") + 1
            raise CSVError("csv_not_utf8", str(csvtext.not_utf8(at, line, context[local : local + 1]))) from None
        self.offset += len(piece)
        self.newlines += newlines
        self.tail = (self.tail + piece[-3:])[-3:]
        return text


@dataclass
class _Check:
    """The state of checking one file: rows counted, the first error of each kind (raised in the reference's order)."""

    model: ServedModel
    header: list[str]
    delimiter: str
    max_rows: int
    ignore_extra: bool
    header_lines: int
    n_rows: int = 0
    lines: int = 0  # physical lines before the current piece (after the header)
    utf8: _Utf8 = field(default_factory=_Utf8)
    parse_error: CSVError | None = None
    details: dict[str, list[dict[str, Any]]] | None = None  # typing problems per feature, in row order
    separators: dict[str, decimal_comma.ColumnSeparators] | None = None
    rewrite: frozenset[str] = frozenset()
    header_ok: bool = True  # the model's columns are there (else its error is raised in its turn)

    def piece(self, piece: bytes, newlines: int, spill: IO[bytes] | None) -> int:
        """Check one piece of records with `newlines` b"\\n" (typed and spilled when `spill`); the chunks it spilled."""
        text = self.utf8.decode(piece, newlines)
        lines = self.lines
        self.lines += _lines(piece, newlines)
        if self.parse_error is not None:
            return 0
        try:
            chunk = self._chunk(piece, text, lines, newlines, typed=spill is not None)
        except CSVError as e:
            self.parse_error = e
            return 0
        if chunk is None:
            return 0
        self.n_rows += chunk.n_rows
        if self.n_rows > self.max_rows:
            self.parse_error = CSVTooManyRows("csv_too_many_rows", f"the file has more than {self.max_rows} data rows")
            return 0
        if spill is None or self.details is not None or not self.header_ok:
            return 0
        pickle.dump(chunk, spill, protocol=pickle.HIGHEST_PROTOCOL)
        return 1

    def _chunk(self, piece: bytes, text: str, lines: int, newlines: int, *, typed: bool) -> Chunk | None:
        """The piece's chunk (typed, or with no columns), or None when it has no rows; a CSVError for a bad record."""
        first = self.n_rows
        if typed and self.header_ok and self.separators is None:
            fast = _numeric_chunk(self.model, self.header, piece, self.delimiter, first, newlines)
            if fast is not None:
                return fast
        table = csvdata.parse_rows(
            text,
            self.header,
            self.delimiter,
            max_rows=self.max_rows,
            line_offset=self.header_lines + lines,
            rows_before=first,
        )
        if table.n_rows == 0:
            return None
        if self.separators is not None:
            for name, seps in self.separators.items():
                seps.add(table.columns[name], first, table.lines.line)
        if not typed or not self.header_ok or self._settled():
            return Chunk(first, table.n_rows, {}, exact=True)
        columns = {n: decimal_comma.rewritten(c) if n in self.rewrite else c for n, c in table.columns.items()}
        table = csvdata.Table(table.header, columns, table.n_rows, table.lines)
        try:
            cols = serving.table_columns(self.model, table, ignore_extra=self.ignore_extra)
        except RecordError as e:
            self._note(e.details)
            return Chunk(first, table.n_rows, {}, exact=True)
        return Chunk(first, table.n_rows, cols, exact=True)

    def _note(self, details: list[dict[str, Any]]) -> None:
        """Keep a chunk's typing problems (the reference lists them feature by feature, then row by row)."""
        if self.details is None:
            self.details = {f.name: [] for f in self.model.rule_list.features}
        for d in details:
            name = d["field"].split(".", 1)[1]
            if len(self.details[name]) <= MAX_ERROR_DETAILS:
                self.details[name].append(d)

    def _settled(self) -> bool:
        """Whether later rows can no longer change the problems listed (the first feature has enough already)."""
        return self.details is not None and len(next(iter(self.details.values()), [])) > MAX_ERROR_DETAILS

    def finish(self) -> None:
        """Raise what the one-shot parser raises after reading every record, in its order."""
        if self.parse_error is not None:
            raise self.parse_error
        if self.n_rows == 0:
            raise CSVError("csv_no_rows", "the file has a header but no data rows")
        if self.separators is not None:
            self.rewrite = frozenset(n for n, s in self.separators.items() if decimal_comma.rewrites(s))
        serving.check_header(self.model, self.header, ignore_extra=self.ignore_extra)
        if self.details is not None:
            found = [d for ds in self.details.values() for d in ds]
            raise RecordError(found[: MAX_ERROR_DETAILS + 1])


def check_file(model: ServedModel, fh: IO[bytes], *, max_rows: int, ignore_extra: bool) -> CheckedFile:
    """Check, parse and type the whole file chunk by chunk; the error the one-shot parser gives, if any.

    One pass, or two in a file not separated by commas that holds a comma (decimal commas are decided per
    column over the whole file first). Memory stays bounded by the chunk size.
    """
    if _blank(fh):
        raise CSVError("csv_empty", "the file is empty")
    delimiter, comma = _sniff(fh)
    splitter = _Splitter(fh, delimiter, CHUNK_BYTES, CHUNK_ROWS)
    head = splitter.first()
    state = _header_state(model, head, delimiter, max_rows, ignore_extra)
    if isinstance(state, CSVError):  # the header is bad: still the first bad byte of the file wins
        _decode_rest(head, splitter)
        raise state
    if delimiter != "," and comma:
        # a model's categorical feature keeps its commas: `1,5` there is a level, not a number
        state.separators = {h: decimal_comma.ColumnSeparators(h) for h in state.header if h in model.numeric}
    spill = tempfile.TemporaryFile(prefix="neurules-batch-")  # noqa: SIM115 -- closed by CheckedFile.close
    checked = CheckedFile(spill, 0, 0)
    try:
        for piece in splitter.pieces():
            checked.n_chunks += state.piece(piece, splitter.newlines, None if state.separators is not None else spill)
        state.finish()
        if state.separators is not None:
            checked.n_chunks = _typed_pass(state, fh, spill)
        checked.n_rows = state.n_rows
    except BaseException:
        spill.close()
        raise
    return checked


def _header_state(
    model: ServedModel, head: bytes, delimiter: str, max_rows: int, ignore_extra: bool
) -> _Check | CSVError:
    """The checking state after the header record, or the header's error."""
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        return CSVError("csv_not_utf8", "")  # _decode_rest raises the message
    try:
        header = csvdata.read_header(text, delimiter, unnamed_ok=ignore_extra)  # unnamed columns are extra ones
    except CSVError as e:
        if e.code == "csv_empty_column_name":  # R's row names, a trailing comma: say how to decide the file anyway
            hint = f"{e.message}; ?ignore_extra=true ignores it (a column this model does not read)"
            return CSVError(e.code, hint, field="header")
        return e
    state = _Check(model, header, delimiter, max_rows, ignore_extra, _lines(head, head.count(b"\n")))
    state.utf8.decode(head, head.count(b"\n"))
    try:
        serving.check_header(model, header, ignore_extra=ignore_extra)
    except RecordError:
        state.header_ok = False
    return state


def _decode_rest(head: bytes, splitter: _Splitter) -> None:
    """csv_not_utf8 for the first bad byte of the file, if there is one."""
    utf8 = _Utf8()
    utf8.decode(head, head.count(b"\n"))
    for piece in splitter.pieces():
        utf8.decode(piece, splitter.newlines)


def _typed_pass(state: _Check, fh: IO[bytes], spill: IO[bytes]) -> int:
    """Second pass, once decimal commas are decided: type and spill each piece; the chunks spilled."""
    fh.seek(0)
    splitter = _Splitter(fh, state.delimiter, CHUNK_BYTES, CHUNK_ROWS)
    splitter.first()
    state.separators, state.n_rows, state.lines = None, 0, 0
    n = 0
    for piece in splitter.pieces():
        n += state.piece(piece, splitter.newlines, spill)
    state.finish()
    return n


def type_chunk(
    model: ServedModel, header_line: bytes, data: bytes, line: int, first_index: int, delimiter: str, ignore_extra: bool
) -> Chunk:
    """Typed columns of one chunk (its first line is file line `line`): pandas' parser when it can, else exact."""
    header = csvdata.read_header(header_line.decode("utf-8-sig"), delimiter, unnamed_ok=ignore_extra)
    text = csvdata.decode(data)
    fast = _numeric_chunk(model, header, data, delimiter, first_index)
    if fast is not None:
        return fast
    table = csvdata.parse_rows(text, header, delimiter, max_rows=10**9, line_offset=line - 1, rows_before=first_index)
    cols = serving.table_columns(model, table, ignore_extra=ignore_extra)
    return Chunk(first_index, table.n_rows, cols, exact=True)


def _numeric_chunk(
    model: ServedModel, header: list[str], data: bytes, delimiter: str, first_index: int, newlines: int | None = None
) -> Chunk | None:
    """All features numeric, every cell a plain finite number, no quotes, no blank line: pandas' C parser types it.

    It accepts a subset of what `float` accepts and gives the same doubles (pandas 3's parser rounds
    correctly; older pandas is asked for its round-trip parser); anything it refuses (an empty cell,
    `nan`, a ragged row, text) goes to the exact path, which finds and names what is wrong. Line ends
    must be \\n or \\r\\n (a lone \\r is left to the exact path).
    """
    if (
        model.categorical
        or not data
        or b'"' in data
        or b"\n\n" in data
        or b"\n\r\n" in data
        or data.startswith((b"\n", b"\r"))
    ):
        return None
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None
    import pandas as pd

    try:
        frame = pd.read_csv(
            io.BytesIO(data), sep=delimiter, header=None, na_filter=False, dtype=np.float64, engine="c", **_EXACT
        )
    except ValueError:
        return None
    table = frame.to_numpy(dtype=np.float64)
    n_lines = (data.count(b"\n") if newlines is None else newlines) + (0 if data.endswith(b"\n") else 1)
    if table.shape != (n_lines, len(header)) or not np.isfinite(table).all():
        return None
    index = {h: j for j, h in enumerate(header)}
    cols = {f.name: np.ascontiguousarray(table[:, index[f.name]]) for f in model.rule_list.features}
    return Chunk(first_index, n_lines, cols, exact=False)


def _exact_parser_options() -> dict[str, Any]:
    """pandas' option for correctly rounded floats: its default from pandas 3, `round_trip` before."""
    from importlib.metadata import version

    return {} if int(version("pandas").split(".")[0]) >= 3 else {"float_precision": "round_trip"}


_EXACT = _exact_parser_options()


def _rule_suffixes(model: ServedModel) -> list[str]:
    """Per rule id, the answer's CSV cells between the index and `audit_seq` (as `decision_table` and csv.writer
    render them), without the line's end."""
    rl = model.rule_list
    out = []
    for j in range(len(rl.rules) + 1):
        p = rl.rule(j).probabilities
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(
            [csv_label(json_label(rl.prediction_of(j))), round(max(p), 6), j, *(round(x, 6) for x in p)]
        )
        out.append(buf.getvalue()[:-1])
    return out


def _outputs(model: ServedModel) -> list[dict[str, Any]]:
    """Per rule id, the `output` of its audit rows."""
    rl = model.rule_list
    return [
        {
            "prediction": json_label(rl.prediction_of(j)),
            "probabilities": dict(zip(model.class_keys, (round(x, 6) for x in rl.rule(j).probabilities), strict=True)),
        }
        for j in range(len(rl.rules) + 1)
    ]


def digests(chunk: Chunk) -> list[str]:
    """The input digest of each row, as `serving.digest` gives it for the row's record."""
    names = sorted(chunk.columns)
    if chunk.exact:
        cols = [chunk.columns[n] for n in names]
        return [serving.digest(dict(zip(names, row, strict=True))) for row in zip(*cols, strict=True)]
    keys = [serving.json_key(n).replace("%", "%%") + ":%s" for n in names]  # ASCII: json_key escapes the rest
    template = ("{" + ",".join(keys) + "}").encode()
    texts = [_number_texts(chunk.columns[n]) for n in names]
    sha = hashlib.sha256
    return [sha(b).hexdigest() for b in map(template.__mod__, zip(*texts, strict=True))]


def _number_texts(col: np.ndarray) -> list[bytes]:
    """JSON of finite floats as `digest` writes them (whole numbers as ints, others as Python's repr), as bytes."""
    whole = col == np.floor(col)
    if whole.all() and np.abs(col).max(initial=0) < 2**53:
        codes = col.astype(np.int64)
        low = int(codes.min(initial=0))
        span = int(codes.max(initial=0)) - low + 1
        if span <= len(codes):  # few distinct integers (codes, counts, ages): one text per value, no sort
            offsets = codes - low
            present = np.flatnonzero(np.bincount(offsets, minlength=span))
            table = np.empty(span, dtype=object)
            table[present] = [str(low + i).encode() for i in present.tolist()]
            return list(table[offsets].tolist())
        return list(map(str.encode, map(str, codes.tolist())))
    distinct, inverse = np.unique(col, return_inverse=True)
    if len(distinct) * 2 <= len(col):  # values repeat (rounded measurements): render each once
        rendered = np.array([_number_text(v).encode() for v in distinct.tolist()], dtype=object)
        return list(rendered[inverse].tolist())
    values = col.tolist()
    texts = list(map(repr, values))
    for i in np.flatnonzero(whole).tolist():
        texts[i] = str(int(values[i]))
    return list(map(str.encode, texts))


def _number_text(v: float) -> str:
    return str(int(v)) if v.is_integer() else repr(v)


@dataclass
class Scorer:
    """Scores checked chunks for one request: rule ids, audit rows, CSV text."""

    model: ServedModel
    tenant_id: str
    key_id: str

    def __post_init__(self) -> None:
        self.suffixes = _rule_suffixes(self.model)
        self.outputs = _outputs(self.model)

    def header(self) -> str:
        """The answer's first line: the decision table's columns, then `audit_seq`, quoted as csv.writer quotes
        the rows (a class label may hold , " or a newline)."""
        return csvdata.write_csv([*decision_header(self.model.rule_list), AUDIT_SEQ_COLUMN], [])

    def decide(self, chunk: Chunk) -> tuple[np.ndarray, dict[str, list[Any]]]:
        """Rule ids and the audit rows (column-wise) of a chunk."""
        ids = self.model.rule_list.apply(chunk.columns)
        rule_ids = ids.tolist()
        n = len(rule_ids)
        outputs = self.outputs
        columns = {
            "created_at": [utcnow()] * n,
            "tenant_id": [self.tenant_id] * n,
            "api_key_id": [self.key_id] * n,
            "model_version_id": [self.model.version_id] * n,
            "input_digest": digests(chunk),
            "output": list(map(outputs.__getitem__, rule_ids)),
            "rule_id": rule_ids,
            "missing_filled": self._missing_filled(chunk),
        }
        return ids, columns

    def _missing_filled(self, chunk: Chunk) -> list[bool]:
        """Per row, whether a numeric feature was missing (a numpy-typed chunk has no missing value)."""
        if not chunk.exact:
            return [False] * chunk.n_rows
        names = list(chunk.columns)
        records = (dict(zip(names, row, strict=True)) for row in zip(*chunk.columns.values(), strict=True))
        return records_missing_filled(self.model.rule_list.features, records)

    def text(self, chunk: Chunk, ids: np.ndarray, seqs: Sequence[int]) -> str:
        """The chunk's answer rows, each ending with its audit row's place in the chain (`seqs`, in row order)."""
        suffix = self.suffixes
        rows = zip(range(chunk.first_index, chunk.first_index + len(seqs)), ids.tolist(), seqs, strict=True)
        return "".join(f"{i},{suffix[r]},{seq}\n" for i, r, seq in rows)


__all__ = ["CSVError", "CheckedFile", "Chunk", "Scorer", "check_file", "digests", "line_chunks", "type_chunk"]
