"""CSV batch scoring in chunks: memory bounded whatever the file size, typed and evaluated column-wise.

Two passes over the upload (which the multipart parser has spooled to disk):
1. `check_file`: every chunk of whole lines is parsed and typed; any bad row fails the request with
   the 4xx it always had (the same parser and messages, naming line and column) before anything is
   decided or audited. The typed columns are spilled to a temporary file.
2. `score_chunk`, chunk after chunk: rule ids column-wise (`RuleList.apply` on columns), the chunk's
   audit rows committed, then its CSV rows returned for the streamed response.

A chunk of plain numeric cells (no quotes, no missing or non-finite values) is typed by pandas' C
parser (the one place pandas enters the request path; `neurules-admin serve` imports it at start-up,
the JSON predict path never uses it) and its input digests are built column-wise; any other chunk goes
through `csvdata.parse_csv` and `serving.table_columns` record by record, exactly as before. Both
give the same values, the same digests and the same errors (tests/app/test_batch.py checks them against each other).
"""

from __future__ import annotations

import csv
import hashlib
import io
import pickle
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from app.services import csvdata, serving
from app.services.csvdata import CSVError, CSVTooManyRows
from app.services.monitoring import records_missing_filled
from app.services.serving import ServedModel
from app.tables import utcnow
from models.rulelist import DECISION_COLUMNS, json_label, label_key

CHUNK_BYTES = 4 * 1024 * 1024  # ~90,000 heart-sized rows; a chunk's typed columns take a few MiB
READ_BYTES = 1024 * 1024


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


def line_chunks(fh: IO[bytes], chunk_bytes: int | None = None) -> Iterator[bytes]:
    """Whole lines in pieces of about `chunk_bytes` (CHUNK_BYTES), never cut inside a quoted field."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    buf = b""
    eof = False
    while True:
        while not eof and len(buf) < chunk_bytes:
            block = fh.read(READ_BYTES)
            eof = not block
            buf += block
        if not buf:
            return
        cut = _cut(buf, min(len(buf), chunk_bytes))
        if cut < 0:
            cut = _cut(buf, len(buf))
        if cut < 0 and not eof:  # a long line, or a quoted field that runs on: read more
            block = fh.read(READ_BYTES)
            eof = not block
            buf += block
            continue
        if cut < 0:
            cut = len(buf)
        yield buf[:cut]
        buf = buf[cut:]


def _cut(buf: bytes, limit: int) -> int:
    """Just after the last newline before `limit` with an even number of quotes before it; -1 when none."""
    cut = buf.rfind(b"\n", 0, limit)
    while cut >= 0 and buf.count(b'"', 0, cut) % 2:
        cut = buf.rfind(b"\n", 0, cut)
    return cut + 1 if cut >= 0 else -1


def check_file(model: ServedModel, fh: IO[bytes], *, max_rows: int, ignore_extra: bool) -> CheckedFile:
    """Parse and type the whole file chunk by chunk; the first bad chunk raises its 4xx error."""
    pieces = line_chunks(fh)
    head = next(pieces, b"")
    header_line, _, rest = head.partition(b"\n")
    header_line += b"\n"
    first_line = rest.partition(b"\n")[0] if b'"' not in rest[:4096] else rest
    sample = csvdata.parse_csv(header_line + first_line, max_rows=max_rows)  # the header's checks, as ever
    serving.check_header(model, sample.header, ignore_extra=ignore_extra)
    delimiter = csvdata.sniff_delimiter(header_line.decode("utf-8-sig", errors="replace"))
    if delimiter != ",":  # decimal commas are decided per column over the whole file: read it in one piece
        rest += b"".join(pieces)
    spill = tempfile.TemporaryFile(prefix="neurules-batch-")  # noqa: SIM115 -- closed by CheckedFile.close
    checked = CheckedFile(spill, 0, 0)
    line = 2
    try:
        for data in _chain([rest], pieces):
            if data.strip():
                chunk = type_chunk(model, header_line, data, line, checked.n_rows, delimiter, ignore_extra)
                checked.n_rows += chunk.n_rows
                if checked.n_rows > max_rows:
                    raise CSVTooManyRows("csv_too_many_rows", f"the file has more than {max_rows} data rows")
                pickle.dump(chunk, spill, protocol=pickle.HIGHEST_PROTOCOL)
                checked.n_chunks += 1
            line += data.count(b"\n")
    except BaseException:
        spill.close()
        raise
    return checked


def _chain(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    yield from first
    yield from rest


def type_chunk(
    model: ServedModel, header_line: bytes, data: bytes, line: int, first_index: int, delimiter: str, ignore_extra: bool
) -> Chunk:
    """Typed columns of one chunk (its first line is file line `line`): pandas' parser when it can, else exact."""
    fast = _numeric_chunk(model, header_line, data, delimiter, first_index)
    if fast is not None:
        return fast
    table = csvdata.parse_csv(header_line + data, line_offset=line - 2)
    cols = serving.table_columns(model, table, ignore_extra=ignore_extra, line_offset=line - 2)
    return Chunk(first_index, table.n_rows, cols, exact=True)


def _numeric_chunk(
    model: ServedModel, header_line: bytes, data: bytes, delimiter: str, first_index: int
) -> Chunk | None:
    """All features numeric, every cell a plain finite number, no quotes, no blank line: pandas' C parser types it.

    It accepts a subset of what `float` accepts and gives the same doubles (pandas 3's parser rounds
    correctly; older pandas is asked for its round-trip parser); anything it refuses (an empty cell,
    `nan`, a ragged row, text) goes to the exact path, which finds and names what is wrong.
    """
    if model.categorical or b'"' in data or b"\n\n" in data or b"\n\r\n" in data or data.startswith((b"\n", b"\r")):
        return None
    import pandas as pd

    try:
        text = data.decode("utf-8")
        header = next(csv.reader([header_line.decode("utf-8-sig").strip("\r\n")], delimiter=delimiter))
        frame = pd.read_csv(
            io.BytesIO(data), sep=delimiter, header=None, na_filter=False, dtype=np.float64, engine="c", **_EXACT
        )
    except (UnicodeDecodeError, ValueError, StopIteration):
        return None
    table = frame.to_numpy(dtype=np.float64)
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if table.shape != (n_lines, len(header)) or not np.isfinite(table).all():
        return None
    index = {h.strip(): j for j, h in enumerate(header)}
    cols = {f.name: np.ascontiguousarray(table[:, index[f.name]]) for f in model.rule_list.features}
    return Chunk(first_index, n_lines, cols, exact=False)


def _exact_parser_options() -> dict[str, Any]:
    """pandas' option for correctly rounded floats: its default from pandas 3, `round_trip` before."""
    from importlib.metadata import version

    return {} if int(version("pandas").split(".")[0]) >= 3 else {"float_precision": "round_trip"}


_EXACT = _exact_parser_options()


def output_header(model: ServedModel) -> list[str]:
    """The columns of the answer (as `models.rulelist.decision_table` names them)."""
    return [*DECISION_COLUMNS, *(f"p_{label_key(c)}" for c in model.rule_list.classes)]


def _rule_suffixes(model: ServedModel) -> list[str]:
    """Per rule id, the answer's CSV cells after the index (as `decision_table` and csv.writer render them)."""
    rl = model.rule_list
    out = []
    for j in range(len(rl.rules) + 1):
        p = rl.rule(j).probabilities
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(
            [json_label(rl.prediction_of(j)), round(max(p), 6), j, *(round(x, 6) for x in p)]
        )
        out.append(buf.getvalue())
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
        """The answer's first line."""
        return ",".join(output_header(self.model)) + "\n"

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

    def text(self, chunk: Chunk, ids: np.ndarray) -> str:
        """The chunk's answer rows."""
        suffix = self.suffixes
        return "".join(f"{i},{suffix[r]}" for i, r in enumerate(ids.tolist(), start=chunk.first_index))


__all__ = ["CSVError", "CheckedFile", "Chunk", "Scorer", "check_file", "digests", "line_chunks", "type_chunk"]
