"""Prediction logic (pure, numpy via `models.rulelist` only): validate records, evaluate, explain.

Nothing here touches HTTP or the database; routers call these functions.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from app.services.csvdata import Table, to_float
from app.services.errors import Invalid
from app.services.name_hints import with_hint
from models.rulelist import (
    CSV_MISSING_TOKENS,
    CategoryKey,
    RuleList,
    category_key,
    csv_cell_value,
    decision_table,
    label_key,
)

MAX_ERROR_DETAILS = 50
FLOAT_MAX = 1.7976931348623157e308  # an int beyond this cannot be evaluated as a number
SCALAR_PATH_MAX = 8  # up to this many records, evaluate record by record (no numpy column set-up)


class RecordError(Invalid, ValueError):
    """Invalid records (code `invalid_record`); `details` lists `{field, message}` with `records[i].name` paths."""

    def __init__(self, details: list[dict[str, Any]], *, total: int | None = None, more: bool = False) -> None:
        n = total if total is not None else len(details)
        first = details[0]
        msg = f"{first['field']}: {first['message']}"
        if more:  # the check stopped counting: say so rather than give a count that is not the total
            msg += f" (and more problems: the first {MAX_ERROR_DETAILS} are listed)"
        elif n > 1:
            msg += f" (and {n - 1} more problem(s))"
        super().__init__(msg, code="invalid_record", details=details[:MAX_ERROR_DETAILS])


@dataclass(frozen=True)
class ServedModel:
    """A parsed, immutable model version ready to serve."""

    version_id: str
    tenant_id: str
    name: str
    version: int
    rule_list: RuleList
    numeric: frozenset[str]
    categorical: frozenset[str]
    names: frozenset[str]
    class_keys: tuple[str, ...]
    levels_of: dict[str, frozenset[CategoryKey]]  # each categorical feature's training levels, by name

    @classmethod
    def build(cls, version_id: str, tenant_id: str, name: str, version: int, doc: dict[str, Any]) -> ServedModel:
        """Parse the stored document once."""
        rl = RuleList.from_dict(doc)
        numeric = frozenset(f.name for f in rl.features if f.type == "numeric")
        categorical = frozenset(f.name for f in rl.features if f.type == "categorical")
        return cls(
            version_id,
            tenant_id,
            name,
            version,
            rl,
            numeric,
            categorical,
            numeric | categorical,
            tuple(class_key(c) for c in rl.classes),
            {f.name: frozenset(f.categories) for f in rl.features if f.type == "categorical"},
        )

    def ref(self) -> dict[str, Any]:
        """The `model_version` block of a prediction answer."""
        return {"id": self.version_id, "name": self.name, "version": self.version}


def unseen_categories(model: ServedModel, record: dict[str, Any]) -> dict[str, Any]:
    """The record's categorical values that training never saw (missing aside): feature -> value as read.

    They are decided as any value outside a condition's set, so a typo ("United States" for
    "United-States") decides without an error; the answer says so.
    """
    out = {}
    for name, seen in model.levels_of.items():
        value = record.get(name)
        key = category_key(value)
        if key is not None and key not in seen and model.rule_list.feature(name).level_key(key) not in seen:
            out[name] = value
    return out


def class_key(c: Any) -> str:
    """String key of a class label in `probabilities` objects (JSON object keys are strings)."""
    return label_key(c)


def _type_name(v: Any) -> str:
    """A value's JSON type name."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if isinstance(v, int | float):
        return "number"
    return type(v).__name__


def validate_records(model: ServedModel, records: list[Any]) -> None:
    """Check every record against the model's features; raise RecordError naming index and field.

    A NaN value (not JSON, but what Python clients send for a missing value) is replaced by null in the
    record, and a categorical string by what predict.csv reads from the same cell (`as_csv_cell`), so that
    the record is decided, echoed and digested as the same row of a CSV file."""
    details: list[dict[str, Any]] = []
    names, numeric = model.names, model.numeric
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            details.append({"field": f"records[{i}]", "message": f"must be an object, got {_type_name(rec)}"})
            continue
        keys = rec.keys()
        if keys != names:
            details += _field_set_errors(model, i, keys)
        for n, v in rec.items():
            t = v.__class__
            if t is float:
                if math.isnan(v):
                    rec[n] = None
                    continue
                if v - v == 0.0:  # finite: right for every field
                    continue
            elif t is str and n not in numeric and "\x00" not in v:  # a NUL: `_value_problem` names it
                if v != v.strip() or v in CSV_MISSING_TOKENS:
                    rec[n] = as_csv_cell(model, n, v)
                continue
            elif v is None or (t is int and -FLOAT_MAX <= v <= FLOAT_MAX):
                continue
            problem = _value_problem(model, n, v)
            if problem is not None:
                details.append({"field": f"records[{i}].{n}", "message": problem})
        if len(details) > MAX_ERROR_DETAILS:
            raise RecordError(details, more=True)
    if details:
        raise RecordError(details)


def as_csv_cell(model: ServedModel, name: str, value: str) -> str | None:
    """A categorical string read as predict.csv reads the same cell: surrounding blanks dropped, a missing-value
    token (`NA`, `?`, `null`...) missing; a value the model knows as it is (an imported list's level) stays."""
    return value if value in model.levels_of.get(name, ()) else csv_cell_value(value)


def _field_set_errors(model: ServedModel, i: int, keys: Any) -> list[dict[str, Any]]:
    """The missing and unknown fields of record i."""
    names = model.names
    out = [
        {"field": f"records[{i}].{n}", "message": "missing field (send null for a missing value)"}
        for n in sorted(names - keys)
    ]
    expected = ", ".join(f.name for f in model.rule_list.features)
    missing, unknown = names - keys, sorted(keys - names)
    out += [
        {
            "field": f"records[{i}].{n}",
            "message": with_hint("unknown field", n, missing, unknown=len(unknown))
            + "; the model's fields are "
            + expected,
        }
        for n in unknown
    ]
    return out


def _value_problem(model: ServedModel, name: str, v: Any) -> str | None:
    """What is wrong with a record's non-null value of a known field (None when nothing; unknown fields aside)."""
    t = type(v)
    if name in model.numeric:
        if t is float:
            return "must be a finite number or null" if math.isinf(v) else None
        if t is not int:
            return f"expected a number or null, got {_type_name(v)} {v!r}"[:200]
        return None if -FLOAT_MAX <= v <= FLOAT_MAX else "must be a finite number or null"
    if name not in model.names:
        return None
    if t not in (str, int, float, bool):
        return f"expected a string, number, boolean or null, got {_type_name(v)}"
    if t is float and math.isinf(v):  # Infinity would be echoed back as invalid JSON
        return "must be a finite number, a string, a boolean or null"
    if t is str and "\x00" in v:  # as predict.csv refuses the cell: both paths decide and audit a record alike
        return "holds a NUL character (\\u0000): not text"
    return None


EXACT_INT = 2**53  # beyond this an integer is read as the nearest double, as the decision reads it


def _canonical(value: Any, categorical: bool) -> Any:
    """A record's non-text value as its digest writes it: the value the decision reads, one form whatever its type.

    A categorical value sent as a number or boolean is its category key (`1`, `1.0` and `"1"` are decided alike,
    so they digest alike); a whole-number float is an int (`70` in JSON, `70.0` from a CSV cell); an integer beyond
    2**53 is the double it is read as (a CSV cell of the same digits gives that double).
    """
    if categorical:
        return category_key(value)
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is int and not -EXACT_INT <= value <= EXACT_INT:
        return int(float(value))
    return value


def digest(record: Any, categorical: Container[str] = ()) -> str:
    """SHA-256 of the record's canonical JSON (sorted keys, compact, ASCII, each value by `_canonical`; docs/audit.md).

    `categorical`: the model's categorical fields (`ServedModel.categorical`); text and null are written as they are
    (a typed CSV chunk's values are already in their read form)."""
    if isinstance(record, dict):
        record = {k: v if v is None or type(v) is str else _canonical(v, k in categorical) for k, v in record.items()}
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _label(c: Any) -> Any:
    return c.item() if hasattr(c, "item") else c


def json_key(name: str) -> str:
    """A field name as `digest` writes it in the canonical JSON (quoted, ASCII-escaped)."""
    return json.dumps(name)


def predict_records(model: ServedModel, records: list[dict[str, Any]], *, explain: bool) -> list[dict[str, Any]]:
    """Decide validated records; each answer has class, probabilities and (optionally) the explanation."""
    rl = model.rule_list
    keys = model.class_keys
    out: list[dict[str, Any]] = []
    if explain or len(records) <= SCALAR_PATH_MAX:  # per-record evaluation beats numpy set-up for a few records
        for i, rec in enumerate(records):
            ex = rl.explain(rec)
            probs = ex.pop("probabilities")
            pred = ex.pop("prediction")
            item = {
                "index": i,
                "prediction": _label(pred),
                "probability": max(probs),
                "probabilities": dict(zip(keys, probs, strict=True)),
                "rule_id": ex["rule_id"],
            }
            _flag_unseen(model, rec, item)
            if explain:
                item["explanation"] = ex
            out.append(item)
        return out
    ids = rl.apply(records)
    for i, (rec, rid) in enumerate(zip(records, ids.tolist(), strict=True)):
        probs = rl.rule(rid).probabilities
        item = {
            "index": i,
            "prediction": _label(rl.prediction_of(rid)),
            "probability": max(probs),
            "probabilities": dict(zip(keys, probs, strict=True)),
            "rule_id": rid,
        }
        _flag_unseen(model, rec, item)
        out.append(item)
    return out


def _flag_unseen(model: ServedModel, record: dict[str, Any], item: dict[str, Any]) -> None:
    if model.levels_of:
        unseen = unseen_categories(model, record)
        if unseen:
            item["unseen_categories"] = unseen


def table_records(model: ServedModel, table: Table, *, ignore_extra: bool = False) -> list[dict[str, Any]]:
    """Turn a parsed CSV into typed records for the model; CSV errors name line and column."""
    cols = table_columns(model, table, ignore_extra=ignore_extra)
    names = list(cols)
    return [dict(zip(names, row, strict=True)) for row in zip(*cols.values(), strict=True)]


UNKNOWN_COLUMN_ADVICE = " (add ?ignore_extra=true to the URL to ignore it)"


def check_header(model: ServedModel, header: list[str], *, ignore_extra: bool) -> None:
    """RecordError naming each missing column (and each unknown one unless ignored)."""
    present = set(header)
    details = [
        {"field": f"header.{f.name}", "message": "missing column"}
        for f in model.rule_list.features
        if f.name not in present
    ]
    total = len(details)
    if not ignore_extra:
        missing, unknown = model.names - present, [n for n in header if n not in model.names]
        total += len(unknown)
        details += [  # only those the answer lists: a header of 1,000,000 stray names took 20 s and 450 MB
            {
                "field": f"header.{n}",
                "message": with_hint("unknown column", n, missing, unknown=len(unknown)) + UNKNOWN_COLUMN_ADVICE,
            }
            for n in unknown[: max(0, MAX_ERROR_DETAILS - len(details))]
        ]
    if details:
        raise RecordError(details, total=total)


def table_columns(model: ServedModel, table: Table, *, ignore_extra: bool = False) -> dict[str, list[Any]]:
    """The model's columns of a parsed CSV, typed (floats, None for missing); errors name line and column
    (`line N.feature`, N the line the record starts on) and the row (from 0, as the answer's `index`)."""
    check_header(model, table.header, ignore_extra=ignore_extra)
    details: list[dict[str, Any]] = []
    cols: dict[str, list[Any]] = {}
    for f in model.rule_list.features:
        cells = table.columns[f.name]
        if f.type != "numeric":
            cols[f.name] = list(cells)
            continue
        vals: list[Any] = []
        for r, c in enumerate(cells):
            if c is None:
                vals.append(None)
                continue
            v = to_float(c)
            if v is None or math.isinf(v):
                kind = "a number" if v is None else "a finite number"
                row, line = table.lines.first_row + r, table.lines.line(r)
                got = repr(c) if len(c) <= 150 else f"{c[:150]!r}..."
                message = f"expected {kind}, got {got} (row {row})"
                details.append({"field": f"line {line}.{f.name}", "message": message, "row": row, "line": line})
                if len(details) > MAX_ERROR_DETAILS:
                    raise RecordError(details)
            vals.append(v)
        cols[f.name] = vals
    if details:
        raise RecordError(details)
    return cols


def batch_csv_rows(model: ServedModel, records: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]], list[int]]:
    """Vectorised evaluation for the CSV batch: header and rows as `models.rulelist.decision_table`, rule ids."""
    header, rows = decision_table(model.rule_list, records)
    return header, rows, [r[3] for r in rows]


class TTLCache:
    """A small thread-safe map with per-entry expiry and LRU eviction."""

    def __init__(self, maxsize: int, ttl: float | None) -> None:
        self.maxsize, self.ttl = maxsize, ttl
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        """The value, or None when absent or expired."""
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            exp, val = item
            if self.ttl is not None and exp < time.monotonic():
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return val

    def put(self, key: Any, value: Any) -> None:
        """Store a value."""
        with self._lock:
            self._data[key] = (time.monotonic() + (self.ttl or 0.0), value)
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def discard(self, key: Any) -> None:
        """Drop one entry."""
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._data.clear()


__all__ = [
    "RecordError",
    "ServedModel",
    "TTLCache",
    "batch_csv_rows",
    "digest",
    "predict_records",
    "table_records",
    "validate_records",
]
