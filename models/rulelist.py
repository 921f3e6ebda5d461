"""The crisp rule list: a small versioned document, evaluated with numpy only.

This module is the contract between the learner (which writes the document) and the service
(which stores, versions and serves it); `docs/rulelist-format.md` describes the format. It must
never import torch or pandas at module level.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

FORMAT = "neurules.rulelist"
VERSION = 1
MISSING_TEXT = "<missing>"

ClassLabel = int | str | bool
CategoryKey = str | None


_MISSING_TYPES = frozenset({"NAType", "NaTType"})  # pandas.NA / NaT, recognised without importing pandas
_FLOAT_MAX = sys.float_info.max


def is_missing(value: Any) -> bool:
    """None, pandas' NA / NaT (known by type name) or NaN of any float type: a missing value."""
    if type(value) is float:
        return math.isnan(value)
    if value is None or type(value).__name__ in _MISSING_TYPES:
        return True
    # numpy's float types register as numbers.Real; NaN is the one value unequal to itself (any float type)
    real = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
    return real and bool(value != value)  # noqa: PLR0124


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


_PLAIN_KEYS: dict[type, Any] = {  # the usual values (JSON's), keyed without the checks below: per request
    str: lambda v: v or None,
    bool: lambda v: "true" if v else "false",
    int: str,
}


# value types whose equal values always have the same key (the cache of `category_key_column`)
_CACHED_KEY_TYPES = frozenset({int, float, bool, np.int64, np.int32, np.float64, np.float32, np.bool_})


def category_key(value: Any) -> CategoryKey:
    """Normalise a categorical value to the key rules compare against (None means missing)."""
    plain = _PLAIN_KEYS.get(type(value))
    if plain is not None:
        return plain(value)  # type: ignore[no-any-return]
    if is_missing(value):
        return None
    if _is_bool(value):
        return "true" if value else "false"
    if isinstance(value, str):  # a str subclass (numpy's str_) keyed as the plain text: exports write keys as repr()
        return str(value) if value != "" else None
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        f = float(value)
        if f.is_integer():
            return str(int(f))
    return str(value)


def category_key_column(values: Iterable[Any]) -> np.ndarray:
    """`category_key` of each value, as an object array; the one keying of a column the learner and
    the evaluator share."""
    # keyed by type too: True == 1 and False == 0 (1.0, 0.0) hash alike, yet their keys differ; a text
    # (the usual value, CSV cells) is its own key, without building a tuple per value
    # only types whose equal values have one key are cached: Decimal("1") == Decimal("1.0"), keys "1" and "1.0"
    cache: dict[Any, CategoryKey] = {}
    keys = []
    for v in values:
        t = type(v)
        if t is str:
            key: Any = v
        elif t in _CACHED_KEY_TYPES:
            key = (t, v)
        else:
            keys.append(category_key(v))
            continue
        try:
            k = cache[key]
        except KeyError:
            k = cache[key] = category_key(v)
        keys.append(k)
    return _objects(keys)


def format_number(x: float) -> str:
    """Render a threshold compactly for people (SQL/Python exports use the exact value): 6
    significant digits, or as many as a short decimal needs (snapped thresholds are short; a
    threshold between 1700000000 and 1700000001 reads 1700000000.5, not 1.7e+09), or the shortest
    text that reads back as the number when 15 digits are not enough (two bounds never read alike)."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    for digits in range(6, 16):
        text = f"{x:.{digits}g}"
        if float(text) == x:
            return text
    return repr(float(x))


def _render_values(values: Sequence[CategoryKey]) -> str:
    return "{" + ", ".join(MISSING_TEXT if v is None else _quoted_if_needed(v, _PLAIN_VALUE) for v in values) + "}"


# names and categories that read unambiguously in rule text as they are: words of characters that are
# no operator, brace, comma or quote, one space apart, none a word of the rule syntax (nor holding `_UNSAFE`)
_PLAIN_NAME = re.compile(r"[^\s<>=!{},\"']+(?: [^\s<>=!{},\"']+)*\Z")
_PLAIN_VALUE = re.compile(r"[^\s{},\"]+(?: [^\s{},\"]+)*\Z")
_SYNTAX_WORDS = frozenset({"if", "then", "else", "and", "in", "not"})


def _quoted_if_needed(text: str, plain: re.Pattern[str]) -> str:
    """`text` as it is when it reads unambiguously in rule text, else as a JSON string (`"a=b"`, `"x and y"`).

    Syntax words matter for names only: a category sits between braces and commas.
    """
    ambiguous = plain is _PLAIN_NAME and (_SYNTAX_WORDS.intersection(text.lower().split()) or _is_number(text))
    if plain.match(text) and not ambiguous and text != MISSING_TEXT and not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escaped, json.dumps(text, ensure_ascii=False))


# what would act on a terminal, reorder or break a line, or not encode (C0 / C1 controls and DEL, line
# separators, bidirectional overrides, lone surrogates): escaped as `\uXXXX` in a quoted text (JSON leaves
# all but C0 raw), so a rule stays one readable line, a comment in the exports compiles, and the quoted
# text reads back with json.loads
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _is_number(text: str) -> bool:
    """Whether a name reads as a number (`30`, `-1`, `4.5e3`): quoted, or `30 <= 5` would be ambiguous."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _class_text(label: Any) -> str:
    return _quoted_if_needed(label, _PLAIN_VALUE) if isinstance(label, str) else str(label)


def name_text(name: str) -> str:
    """A column or target name as rule text writes it: quoted (JSON) only where it would read ambiguously."""
    return _quoted_if_needed(name, _PLAIN_NAME)


# ---------------------------------------------------------------------------------------------
# validation helpers (error messages name the path inside the document)


class DocumentError(ValueError):
    """An invalid rule-list document: `path` names the offending element (`rules[0].conditions[1].low`)."""

    def __init__(self, path: str, msg: str) -> None:
        super().__init__(path, msg)  # args as given: it pickles (a worker's task error) and copies
        self.path, self.msg = path, msg

    def __str__(self) -> str:
        return f"invalid rule list document: {self.path}: {self.msg}"


class _Doc:
    """Tiny validator that raises DocumentError (a ValueError) with the path of the offending element."""

    @staticmethod
    def fail(path: str, msg: str) -> None:
        raise DocumentError(path, msg)

    @classmethod
    def mapping(cls, obj: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(obj, Mapping):
            cls.fail(path, "must be an object")
        mapping: Mapping[str, Any] = obj
        return mapping

    @classmethod
    def seq(cls, obj: Any, path: str) -> list[Any]:
        if not isinstance(obj, (list, tuple)):
            cls.fail(path, "must be a list")
        return list(obj)

    @classmethod
    def key(cls, obj: Mapping[str, Any], name: str, path: str) -> Any:
        if name not in obj:
            cls.fail(f"{path}.{name}" if path else name, "is required")
        return obj[name]

    @classmethod
    def number(cls, obj: Any, path: str, *, allow_none: bool = False) -> float | None:
        if obj is None and allow_none:
            return None
        try:
            is_number = isinstance(obj, numbers.Real) and not isinstance(obj, bool | np.bool_)
            value = float(obj) if is_number else math.nan
        except OverflowError:  # an int beyond the float range
            value = math.nan
        if not math.isfinite(value):
            cls.fail(path, "must be a finite number" + (" or null" if allow_none else ""))
        return value

    @classmethod
    def counts(cls, obj: Any, path: str, k: int) -> tuple[int, ...]:
        items = cls.seq(obj, path)
        if len(items) != k:
            cls.fail(path, f"must have one entry per class ({k})")
        out = []
        for i, c in enumerate(items):
            if isinstance(c, bool) or not isinstance(c, numbers.Integral) or c < 0:
                cls.fail(f"{path}[{i}]", "must be a non-negative integer")
            out.append(int(c))
        return tuple(out)

    @classmethod
    def probabilities(cls, obj: Any, path: str, k: int) -> tuple[float, ...]:
        items = cls.seq(obj, path)
        if len(items) != k:
            cls.fail(path, f"must have one entry per class ({k})")
        out = tuple(cls.number(p, f"{path}[{i}]") for i, p in enumerate(items))
        if any(p < 0 or p > 1 for p in out):  # type: ignore[operator]
            cls.fail(path, "entries must lie in [0, 1]")
        if abs(sum(out) - 1.0) > 1e-6:  # type: ignore[arg-type]
            cls.fail(path, "must sum to 1")
        return out  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# the document's parts


@dataclass(frozen=True)
class Feature:
    """One input column: numeric (with the fill value for missing) or categorical.

    A numeric feature may list `values`: the two distinct values it took in training (e.g. 0 and
    1). It changes no evaluation; a condition that holds for exactly one of them reads
    `smoker = 1` instead of `smoker >= 0.5`.
    """

    name: str
    type: str  # "numeric" | "categorical"
    fill_value: float | None = None
    min: float | None = None
    max: float | None = None
    categories: tuple[CategoryKey, ...] = ()
    values: tuple[float, ...] = ()
    # values a rule list's conditions name that `categories` does not list (set by `RuleList`, not part of the
    # document entry): levels too, never folded onto another
    named: tuple[CategoryKey, ...] = field(default=(), compare=False, repr=False)

    @property
    def levels(self) -> tuple[CategoryKey, ...]:
        """Every value a condition can name exactly: the categories, then the values conditions name beyond them."""
        return (*self.categories, *self.named)

    @cached_property
    def _level_set(self) -> frozenset[CategoryKey]:
        return frozenset(self.levels)

    @cached_property
    def level_by_nfc(self) -> dict[str, str]:
        """Each level's NFC form -> that level, for the forms exactly one level has."""
        spellings: dict[str, list[str]] = {}
        for level in self.levels:
            if level is not None:
                spellings.setdefault(unicodedata.normalize("NFC", level), []).append(level)
        return {form: levels[0] for form, levels in spellings.items() if len(levels) == 1}

    def level_key(self, key: CategoryKey) -> CategoryKey:
        """The key rules compare for a categorical value's key: a text that is no level but spells exactly one
        level in another Unicode normalisation form (a composed `ü` against `u` + U+0308, as macOS and some
        keyboards send it) is that level; anything else stays as it is (a level is never folded onto another)."""
        if key is None or key in self._level_set:
            return key
        return self.level_by_nfc.get(unicodedata.normalize("NFC", key), key)

    def level_keys(self, keys: np.ndarray) -> np.ndarray:
        """`level_key` of each key of an object array (the array itself when no key changes)."""
        levels = self._level_set
        moved = {k: f for k in set(keys.tolist()) if k not in levels and (f := self.level_key(k)) != k}
        return _objects([moved.get(k, k) for k in keys]) if moved else keys

    def other_spellings(self, level: str) -> tuple[str, ...]:
        """The composed (NFC) and decomposed (NFD) spellings of a level that `level_key` folds onto it."""
        if self.level_by_nfc.get(unicodedata.normalize("NFC", level)) != level:
            return ()
        forms = dict.fromkeys(unicodedata.normalize(form, level) for form in ("NFC", "NFD"))
        return tuple(f for f in forms if f not in self._level_set)

    def to_dict(self) -> dict[str, Any]:
        """Serialise to the document's feature entry."""
        if self.type == "numeric":
            d: dict[str, Any] = {"name": self.name, "type": "numeric", "fill_value": self.fill_value}
            if self.min is not None:
                d["min"] = self.min
            if self.max is not None:
                d["max"] = self.max
            if self.values:
                d["values"] = list(self.values)
            return d
        return {"name": self.name, "type": "categorical", "categories": list(self.categories)}

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> Feature:
        """Parse and validate one feature entry."""
        obj = _Doc.mapping(obj, path)
        name = _Doc.key(obj, "name", path)
        if not isinstance(name, str) or not name.strip():
            _Doc.fail(f"{path}.name", "must be a non-empty string")
        ftype = _Doc.key(obj, "type", path)
        if ftype == "numeric":
            return cls(
                name=name,
                type="numeric",
                fill_value=_Doc.number(_Doc.key(obj, "fill_value", path), f"{path}.fill_value"),
                min=_Doc.number(obj.get("min"), f"{path}.min", allow_none=True),
                max=_Doc.number(obj.get("max"), f"{path}.max", allow_none=True),
                values=cls._two_values(obj.get("values"), f"{path}.values"),
            )
        if ftype == "categorical":
            cats = _Doc.seq(obj.get("categories", []), f"{path}.categories")
            for i, c in enumerate(cats):
                if c is not None and not isinstance(c, str):
                    _Doc.fail(f"{path}.categories[{i}]", "must be a string or null")
            return cls(name=name, type="categorical", categories=tuple(cats))
        _Doc.fail(f"{path}.type", "must be 'numeric' or 'categorical'")
        raise AssertionError  # unreachable

    @staticmethod
    def _two_values(obj: Any, path: str) -> tuple[float, ...]:
        """The optional `values` of a numeric feature: absent, or two increasing finite numbers."""
        if obj is None:
            return ()
        items = tuple(float(_Doc.number(v, f"{path}[{i}]")) for i, v in enumerate(_Doc.seq(obj, path)))  # type: ignore[arg-type]
        if len(items) != 2 or not items[0] < items[1]:
            _Doc.fail(path, "must be two increasing numbers")
        return items


@dataclass(frozen=True)
class Condition:
    """One condition of a rule: an inclusive interval or a category (non-)membership.

    `feature_values`: the feature's two training values when its document entry lists them; a
    `RuleList` sets it on its conditions (it is not part of the condition's document entry and
    takes no part in equality), so that `text()` reads `smoker = 1` wherever it is called.
    """

    feature: str
    op: str  # "between" | "in" | "not_in"
    low: float | None = None
    high: float | None = None
    values: tuple[CategoryKey, ...] = ()
    feature_values: tuple[float, ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Serialise to the document's condition entry."""
        if self.op == "between":
            return {"feature": self.feature, "op": "between", "low": self.low, "high": self.high}
        return {"feature": self.feature, "op": self.op, "values": list(self.values)}

    def text(self, feature: Feature | None = None) -> str:
        """Human-readable form, e.g. `45.5 <= age <= 66.4`, `thal not in {normal}`, or `smoker = 1`
        when the feature lists two training values and exactly one of them satisfies it."""
        two = feature.values if feature is not None else self.feature_values
        name = name_text(self.feature)
        if self.op == "between" and two:
            inside = [v for v in two if self.holds_scalar(v)]
            if len(inside) == 1:
                return f"{name} = {format_number(inside[0])}"
        if self.op == "between":
            if self.low is not None and self.high is not None:
                return f"{format_number(self.low)} <= {name} <= {format_number(self.high)}"
            if self.low is not None:
                return f"{name} >= {format_number(self.low)}"
            return f"{name} <= {format_number(self.high)}"  # type: ignore[arg-type]
        word = "in" if self.op == "in" else "not in"
        return f"{name} {word} {_render_values(self.values)}"

    def holds_scalar(self, value: Any) -> bool:
        """Evaluate on one already-normalised value (float for numeric, key for categorical)."""
        if self.op == "between":
            return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        inside = value in self.values
        return inside if self.op == "in" else not inside

    def holds(self, column: np.ndarray) -> np.ndarray:
        """Evaluate on a normalised column (float array or object array of keys)."""
        if self.op == "between":
            mask = np.ones(column.shape[0], dtype=bool)
            if self.low is not None:
                mask &= column >= self.low
            if self.high is not None:
                mask &= column <= self.high
            return mask
        members = set(self.values)
        inside = np.fromiter((v in members for v in column), dtype=bool, count=column.shape[0])
        return inside if self.op == "in" else ~inside

    @classmethod
    def from_dict(cls, obj: Any, path: str, features: Mapping[str, Feature]) -> Condition:
        """Parse and validate one condition against the feature list."""
        obj = _Doc.mapping(obj, path)
        name = _Doc.key(obj, "feature", path)
        if not isinstance(name, str) or name not in features:
            _Doc.fail(f"{path}.feature", f"unknown feature {name!r}")
        op = _Doc.key(obj, "op", path)
        ftype = features[name].type
        if op == "between":
            if ftype != "numeric":
                _Doc.fail(f"{path}.op", "'between' needs a numeric feature")
            low = _Doc.number(obj.get("low"), f"{path}.low", allow_none=True)
            high = _Doc.number(obj.get("high"), f"{path}.high", allow_none=True)
            if low is None and high is None:
                _Doc.fail(path, "'between' needs low or high")
            if low is not None and high is not None and low > high:
                _Doc.fail(f"{path}.low", "must not exceed high")
            return cls(feature=name, op="between", low=low, high=high)
        if op in ("in", "not_in"):
            if ftype != "categorical":
                _Doc.fail(f"{path}.op", f"'{op}' needs a categorical feature")
            values = _Doc.seq(_Doc.key(obj, "values", path), f"{path}.values")
            if not values:
                _Doc.fail(f"{path}.values", "must not be empty")
            for i, v in enumerate(values):
                if v is not None and not isinstance(v, str):
                    _Doc.fail(f"{path}.values[{i}]", "must be a string or null")
            return cls(feature=name, op=op, values=tuple(values))
        _Doc.fail(f"{path}.op", "must be 'between', 'in' or 'not_in'")
        raise AssertionError  # unreachable


@dataclass(frozen=True)
class Rule:
    """An ordered rule (or the default rule when it has no conditions and sits last)."""

    conditions: tuple[Condition, ...]
    class_counts: tuple[int, ...]
    probabilities: tuple[float, ...]

    @property
    def support(self) -> int:
        """Training rows this rule captured."""
        return sum(self.class_counts)

    def text(self, features: Mapping[str, Feature] | None = None) -> str:
        """The antecedent as text (`true` for a rule without conditions); `features` by name lets
        two-valued numeric features read `x = 1`."""
        if not self.conditions:
            return "true"
        by_name = features or {}
        return " and ".join(c.text(by_name.get(c.feature)) for c in self.conditions)

    def to_dict(self, *, default: bool = False) -> dict[str, Any]:
        """Serialise to the document's rule entry."""
        d: dict[str, Any] = {} if default else {"conditions": [c.to_dict() for c in self.conditions]}
        d["class_counts"] = list(self.class_counts)
        d["probabilities"] = list(self.probabilities)
        return d


def smoothed_probabilities(counts: Sequence[int], smoothing: float) -> tuple[float, ...]:
    """Laplace-smoothed class frequencies: (count + a) / (n + a * k); uniform when empty."""
    k = len(counts)
    n = float(sum(counts))
    total = n + smoothing * k
    if total <= 0:
        return tuple(1.0 / k for _ in counts)
    if math.isinf(total):  # a finite smoothing near the float limit: the same ratio, divided through by it
        return tuple((c / smoothing + 1.0) / (n / smoothing + k) for c in counts)
    return tuple((c + smoothing) / total for c in counts)


def json_label(value: Any) -> ClassLabel:
    """A class label as a JSON scalar for the document: int, str or bool (other values as str)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return str(value)


def _parse_classes(doc: Mapping[str, Any]) -> list[ClassLabel]:
    classes = _Doc.seq(_Doc.key(doc, "classes", ""), "classes")
    if len(classes) < 2:
        _Doc.fail("classes", "needs at least two classes")
    for i, c in enumerate(classes):
        if not isinstance(c, (bool, int, str)):
            _Doc.fail(f"classes[{i}]", "must be an int, string or bool")
    if len({(type(c), c) for c in classes}) != len(classes):
        _Doc.fail("classes", "must be unique")
    return classes


def _parse_features(doc: Mapping[str, Any]) -> dict[str, Feature]:
    """The document's features by name, in document order."""
    by_name: dict[str, Feature] = {}
    for i, entry in enumerate(_Doc.seq(_Doc.key(doc, "features", ""), "features")):
        f = Feature.from_dict(entry, f"features[{i}]")
        if f.name in by_name:
            _Doc.fail(f"features[{i}].name", f"duplicate feature {f.name!r}")
        by_name[f.name] = f
    return by_name


# missing-value tokens of a CSV cell: the service reads such a cell (blanks around it dropped) as missing
CSV_MISSING_TOKENS = frozenset({"", "NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "?"})


def csv_cell_value(cell: str) -> str | None:
    """A CSV cell as the service reads it: surrounding blanks dropped, a missing-value token None."""
    c = cell.strip()
    return None if c in CSV_MISSING_TOKENS else c


# the keys each object of a document may have (`to_dict` writes no others): a misspelt key is refused on import,
# not dropped (a condition's `hgih` silently read as no upper bound)
_DOCUMENT_KEYS = frozenset(
    {"format", "version", "target", "classes", "features", "rules", "default", "smoothing", "metadata"}
)
_FEATURE_KEYS = {
    "numeric": frozenset({"name", "type", "fill_value", "min", "max", "values"}),
    "categorical": frozenset({"name", "type", "categories"}),
}
_CONDITION_KEYS = {
    "between": frozenset({"feature", "op", "low", "high"}),
    "in": frozenset({"feature", "op", "values"}),
    "not_in": frozenset({"feature", "op", "values"}),
}


def check_new_document(rl: RuleList, doc: Mapping[str, Any] | None = None) -> None:
    """What a new document (an import) must also satisfy; DocumentError naming the path. Stored documents are
    read without these checks, so a version stored before them stays readable: no key the format does not
    have (`doc`, the document as sent), feature names without a NUL character or blanks around them (no CSV
    header, SQL name or most clients' record keys hold one), each category listed once and written as a CSV
    cell reads it, each text class written as a CSV cell reads it (an evaluation's label column holds it), a
    numeric feature's min at most its max."""
    if doc is not None:
        _check_keys(doc)
    for i, c in enumerate(rl.classes):  # a label file's cell "None" is missing: its rows would never be scored
        if isinstance(c, str) and csv_cell_value(c) != c:
            _Doc.fail(f"classes[{i}]", f"{c!r} is read from a CSV cell as {_read_as(c)}: {_READ_RULE}")
    for i, f in enumerate(rl.features):
        path = f"features[{i}]"
        if "\x00" in f.name:
            _Doc.fail(f"{path}.name", "must not contain a NUL character")
        if f.name != f.name.strip():
            _Doc.fail(f"{path}.name", "must not begin or end with blanks (a CSV header's names are read without)")
        if f.min is not None and f.max is not None and f.min > f.max:
            _Doc.fail(f"{path}.min", "must not exceed max")
        _check_levels(f.categories, f"{path}.categories")
    for r, rule in enumerate(rl.rules):
        for c, cond in enumerate(rule.conditions):
            _check_levels(cond.values, f"rules[{r}].conditions[{c}].values", unique=False)


def _check_levels(levels: Sequence[CategoryKey], path: str, *, unique: bool = True) -> None:
    """Each level once (`unique`), and each one a CSV cell can hold: a level no record can reach is refused."""
    seen: set[CategoryKey] = set()
    for j, c in enumerate(levels):
        if unique and c in seen:
            _Doc.fail(f"{path}[{j}]", f"{c!r} is listed twice")
        seen.add(c)
        if c is not None and csv_cell_value(c) != c:
            _Doc.fail(
                f"{path}[{j}]",
                f"{c!r} is read from a CSV cell or a record as {_read_as(c)}: {_READ_RULE}; write the level as it "
                "is read, or null for the missing level",
            )


_READ_RULE = (
    f"blanks around a value are dropped, and {', '.join(repr(t) for t in sorted(CSV_MISSING_TOKENS) if t)} "
    "or an empty cell are missing"
)


def _read_as(text: str) -> str:
    """What a CSV cell holding `text` is read as, in words."""
    read = csv_cell_value(text)
    return "a missing value" if read is None else repr(read)


def _check_keys(doc: Mapping[str, Any]) -> None:
    """DocumentError naming the first key the document format does not have."""
    _no_other_keys(doc, _DOCUMENT_KEYS, "")
    for i, f in enumerate(doc.get("features") or ()):
        _no_other_keys(f, _FEATURE_KEYS.get(f.get("type"), frozenset(f)), f"features[{i}]")
    for r, rule in enumerate(doc.get("rules") or ()):
        _no_other_keys(rule, frozenset({"conditions", "class_counts", "probabilities"}), f"rules[{r}]")
        for c, cond in enumerate(rule.get("conditions") or ()):
            allowed = _CONDITION_KEYS.get(cond.get("op"), frozenset(cond))
            _no_other_keys(cond, allowed, f"rules[{r}].conditions[{c}]")
    _no_other_keys(doc.get("default") or {}, frozenset({"class_counts", "probabilities"}), "default")


def _no_other_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            _Doc.fail(where, f"unknown key (this object takes {', '.join(sorted(allowed))})")


def _parse_rule(entry: Any, path: str, by_name: Mapping[str, Feature], k: int) -> Rule:
    r = _Doc.mapping(entry, path)
    conds = _Doc.seq(_Doc.key(r, "conditions", path), f"{path}.conditions")
    return Rule(
        conditions=tuple(Condition.from_dict(c, f"{path}.conditions[{i}]", by_name) for i, c in enumerate(conds)),
        class_counts=_Doc.counts(_Doc.key(r, "class_counts", path), f"{path}.class_counts", k),
        probabilities=_Doc.probabilities(_Doc.key(r, "probabilities", path), f"{path}.probabilities", k),
    )


# ---------------------------------------------------------------------------------------------
# the rule list


@dataclass(frozen=True)
class RuleList:
    """An ordered list of crisp rules with a default rule; first matching rule decides."""

    classes: tuple[ClassLabel, ...]
    features: tuple[Feature, ...]
    rules: tuple[Rule, ...]
    default: Rule
    target: str = "target"
    smoothing: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        """Give each categorical feature the values conditions name beyond its categories, and each condition on
        a two-valued numeric feature that feature's two values."""
        named: dict[str, dict[CategoryKey, None]] = {}
        for rule in self.rules:
            for c in rule.conditions:
                named.setdefault(c.feature, {}).update(dict.fromkeys(c.values))
        features = tuple(  # always recomputed: a list rebuilt with fewer rules must not keep the old rules' values
            replace(f, named=tuple(v for v in named.get(f.name, {}) if v not in f.categories))
            if f.type == "categorical" and (f.named or not set(named.get(f.name, {})) <= set(f.categories))
            else f
            for f in self.features
        )
        object.__setattr__(self, "features", features)
        two = {f.name: f.values for f in self.features if f.values}
        if not two:
            return

        def with_values(rule: Rule) -> Rule:
            conds = tuple(
                replace(c, feature_values=two[c.feature]) if c.feature in two and not c.feature_values else c
                for c in rule.conditions
            )
            return replace(rule, conditions=conds)

        object.__setattr__(self, "rules", tuple(with_values(r) for r in self.rules))

    # ---- construction / serialisation -------------------------------------------------------

    @classmethod
    def from_dict(cls, doc: Any) -> RuleList:
        """Parse and validate a rule-list document; ValueError names the offending path."""
        doc = _Doc.mapping(doc, "document")
        if doc.get("format") != FORMAT:
            _Doc.fail("format", f"must be {FORMAT!r}")
        version = doc.get("version")
        if type(version) is not int or version != VERSION:  # `true == 1` in Python: not a version
            _Doc.fail("version", f"unsupported version {version!r} (this code reads {VERSION})")
        target = doc.get("target", "target")
        if not isinstance(target, str):
            _Doc.fail("target", "must be a string")
        classes = _parse_classes(doc)
        by_name = _parse_features(doc)
        k = len(classes)
        rules = [
            _parse_rule(r, f"rules[{j}]", by_name, k)
            for j, r in enumerate(_Doc.seq(_Doc.key(doc, "rules", ""), "rules"))
        ]
        d = _Doc.mapping(_Doc.key(doc, "default", ""), "default")
        default = Rule(
            conditions=(),
            class_counts=_Doc.counts(_Doc.key(d, "class_counts", "default"), "default.class_counts", k),
            probabilities=_Doc.probabilities(_Doc.key(d, "probabilities", "default"), "default.probabilities", k),
        )
        smoothing = _Doc.number(doc.get("smoothing", 1.0), "smoothing")
        if smoothing < 0:  # type: ignore[operator]
            _Doc.fail("smoothing", "must be >= 0")
        metadata = doc.get("metadata", {})
        if not isinstance(metadata, Mapping):
            _Doc.fail("metadata", "must be an object")
        return cls(
            classes=tuple(classes),
            features=tuple(by_name.values()),
            rules=tuple(rules),
            default=default,
            target=target,
            smoothing=float(smoothing),  # type: ignore[arg-type]
            metadata=dict(metadata),
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialise to the versioned JSON document (round-trips exactly through from_dict)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "target": self.target,
            "classes": list(self.classes),
            "features": [f.to_dict() for f in self.features],
            "rules": [r.to_dict() for r in self.rules],
            "default": self.default.to_dict(default=True),
            "smoothing": self.smoothing,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def build(
        cls,
        *,
        classes: Sequence[Any],
        features: Sequence[Feature],
        rules: Sequence[Sequence[Condition]],
        X: Any,
        y: Sequence[Any] | np.ndarray,
        smoothing: float = 1.0,
        target: str = "target",
        metadata: Mapping[str, Any] | None = None,
        probabilities: Sequence[Sequence[float]] | None = None,
    ) -> RuleList:
        """Make a rule list from antecedents, measuring counts and probabilities on (X, y).

        probabilities: instead of the measured ones, one vector per rule and the default rule
        last (an audit copy of a network's own consequents; a served list uses the measured)."""
        labels = tuple(json_label(c) for c in classes)
        k = len(labels)
        empty = tuple(0 for _ in labels)
        skeleton = cls(
            classes=labels,
            features=tuple(features),
            rules=tuple(Rule(tuple(conds), empty, tuple(1.0 / k for _ in labels)) for conds in rules),
            default=Rule((), empty, tuple(1.0 / k for _ in labels)),
            target=target,
            smoothing=float(smoothing),
            metadata=dict(metadata or {}),
        )
        ids = skeleton.apply(X)
        index = {c: i for i, c in enumerate(labels)}
        y_idx = np.fromiter((index[json_label(v)] for v in y), dtype=np.int64, count=len(ids))
        counts = np.zeros((len(rules) + 1, k), dtype=np.int64)
        np.add.at(counts, (ids, y_idx), 1)

        def measured(row: int, conds: Sequence[Condition]) -> Rule:
            c = tuple(int(v) for v in counts[row])
            if probabilities is not None:  # rows: the rules in order, then the default rule
                given = probabilities[row - 1 if row else len(rules)]
                return Rule(tuple(conds), c, tuple(float(p) for p in given))
            return Rule(tuple(conds), c, smoothed_probabilities(c, smoothing))

        return cls(
            classes=labels,
            features=tuple(features),
            rules=tuple(measured(j + 1, conds) for j, conds in enumerate(rules)),
            default=measured(0, ()),
            target=target,
            smoothing=float(smoothing),
            metadata=dict(metadata or {}),
        )

    # ---- evaluation ------------------------------------------------------------------------

    @property
    def feature_names(self) -> list[str]:
        """Input columns in training order."""
        return [f.name for f in self.features]

    def condition_text(self, condition: Condition) -> str:
        """One condition as people read it, with this list's feature metadata (`smoker = 1` for a
        two-valued numeric feature): the text `to_text` and `explain` use."""
        return condition.text(self._features_by_name.get(condition.feature))

    def rule_text(self, rule_id: int) -> str:
        """A rule's antecedent as `to_text` writes it (`true` for a rule without conditions)."""
        return self.rule(rule_id).text(self._features_by_name)

    def rule(self, rule_id: int) -> Rule:
        """Rule by id (1..k; 0 is the default rule)."""
        return self.default if rule_id == 0 else self.rules[rule_id - 1]

    def prediction_of(self, rule_id: int) -> ClassLabel:
        """The class a rule predicts: arg max of its probabilities (first class on ties)."""
        if 0 <= rule_id <= len(self.rules):
            return self._predictions[rule_id]
        probs = self.rule(rule_id).probabilities
        return self.classes[_argmax(probs)]

    def feature(self, name: str) -> Feature:
        """The feature called `name` (KeyError if the list has none)."""
        return self._features_by_name[name]

    @cached_property
    def _features_by_name(self) -> dict[str, Feature]:
        return {f.name: f for f in self.features}

    @cached_property
    def _condition_parts(self) -> dict[Condition, dict[str, Any]]:
        """Each rule condition's fixed part in an explanation (`to_dict()` and its text), rendered once."""
        parts: dict[Condition, dict[str, Any]] = {}
        for rule in self.rules:
            for cond in rule.conditions:
                d = cond.to_dict()
                d["text"] = self.condition_text(cond)
                parts[cond] = d
        return parts

    @cached_property
    def _rule_texts(self) -> tuple[str, ...]:
        """Each rule's text by rule id (0: the default rule), rendered once."""
        return ("else (default rule)", *(self.rule_text(j) for j in range(1, len(self.rules) + 1)))

    @cached_property
    def _predictions(self) -> tuple[ClassLabel, ...]:
        """The class of each rule id, computed once (pure Python: no numpy call on the per-record path)."""
        return tuple(self.classes[_argmax(self.rule(j).probabilities)] for j in range(len(self.rules) + 1))

    def _probability_table(self) -> np.ndarray:
        rows = [self.default.probabilities] + [r.probabilities for r in self.rules]
        return np.asarray(rows, dtype=np.float64)

    def _columns(self, X: Any) -> tuple[int, dict[str, np.ndarray]]:
        """Normalise input (DataFrame, dict of columns, list of records, 2-D array) to
        (row count, normalised columns of the features that rules use)."""
        used = sorted({c.feature for r in self.rules for c in r.conditions})
        names = self.feature_names
        if isinstance(X, Mapping):
            _require(used, X, "")
            n = _mapping_rows(X, used)
            raw = {name: _column(X[name]) for name in used}
        elif hasattr(X, "columns") and hasattr(X, "iloc"):  # a pandas DataFrame, without importing pandas
            _require(used, X.columns, "")
            n = len(X)
            raw = {name: X[name].to_numpy() for name in used}
        elif isinstance(X, np.ndarray):
            if X.ndim != 2 or X.shape[1] != len(names):
                raise ValueError(f"array input must have shape (n, {len(names)})")
            n = X.shape[0]
            raw = {name: X[:, names.index(name)] for name in used}
        elif isinstance(X, Iterable):
            records = list(X)
            for i, rec in enumerate(records):
                if not isinstance(rec, Mapping):
                    raise ValueError(f"record {i} must be a mapping of feature name to value")
                _require(used, rec, f"record {i}: ")
            n = len(records)
            raw = {name: _objects([rec[name] for rec in records]) for name in used}
        else:
            raise ValueError("X must be a DataFrame, a mapping of columns, a list of records or a 2-D array")
        by_name = {f.name: f for f in self.features}
        return n, {name: self._normalise(by_name[name], col) for name, col in raw.items()}

    @staticmethod
    def _normalise(feature: Feature, col: np.ndarray) -> np.ndarray:
        """Numeric: float array with missing -> fill value. Categorical: object array of keys."""
        if feature.type == "numeric":
            out = _as_floats(col)
            if out is None:
                out = np.empty(col.shape[0], dtype=np.float64)
                for i, v in enumerate(col):
                    out[i] = _to_float(feature.name, i, v)
            out[np.isnan(out)] = feature.fill_value
            return out
        return feature.level_keys(category_key_column(col))

    def apply(self, X: Any) -> np.ndarray:
        """Id of the deciding rule per row: 1..k for rules, 0 for the default rule."""
        n, cols = self._columns(X)
        ids = np.zeros(n, dtype=np.int64)
        open_ = np.ones(n, dtype=bool)
        for j, rule in enumerate(self.rules, start=1):
            if not open_.any():
                break
            mask = open_.copy()
            for cond in rule.conditions:
                mask &= cond.holds(cols[cond.feature])
            ids[mask] = j
            open_ &= ~mask
        return ids

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities per row; columns follow `classes`."""
        return np.asarray(self._probability_table()[self.apply(X)])

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class per row."""
        table = self._probability_table()
        labels = np.asarray(self.classes, dtype=object)
        out = np.asarray(labels[np.argmax(table, axis=1)][self.apply(X)])
        if all(isinstance(c, int) and not isinstance(c, bool) and _INT64_MIN <= c <= _INT64_MAX for c in self.classes):
            return out.astype(np.int64)
        return out  # labels as they are: text, booleans, or whole numbers beyond int64 (Python ints)

    def _scalar(self, feature: Feature, record: Mapping[str, Any]) -> tuple[Any, Any]:
        """(raw value, normalised value) of one feature in one record."""
        if feature.name not in record:
            raise ValueError(f"missing feature {feature.name!r}")
        raw = record[feature.name]
        # pure Python, as `_normalise` does it for one value: a numpy call per value would release the GIL
        # on the event loop's thread several times per request (each a wait of up to the switch interval)
        if feature.type == "numeric":
            norm = _to_float(feature.name, 0, raw)
            return raw, feature.fill_value if math.isnan(norm) else norm
        return raw, feature.level_key(category_key(raw))

    def explain(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Decide one record and say why: the matched rule with each condition's value, and the
        earlier rules that did not fire with the condition that failed first."""
        values: dict[str, tuple[Any, Any]] = {}  # per feature: (raw value, normalised value), read once
        not_fired: list[dict[str, Any]] = []
        for j, conditions in enumerate(self._explain_plan, start=1):
            for cond, declared, parts in conditions:
                # None: a condition on a feature the list does not declare, a KeyError when reached (as always)
                feature = declared or self._features_by_name[cond.feature]
                value = values.get(cond.feature)
                if value is None:
                    value = values[cond.feature] = self._scalar(feature, record)
                if not cond.holds_scalar(value[1]):
                    failed = _described(parts, feature, value, False)
                    not_fired.append({"rule_id": j, "rule_text": self._rule_texts[j], "failed_condition": failed})
                    break
            else:
                described = [
                    _described(p, self._features_by_name[c.feature], values[c.feature], True) for c, _, p in conditions
                ]
                return self._answer(j, described, not_fired)
        return self._answer(0, [], not_fired)

    @cached_property
    def _explain_plan(self) -> tuple[tuple[tuple[Condition, Feature | None, dict[str, Any]], ...], ...]:
        """Per rule, each condition with its feature (None for one the list does not declare: a KeyError when
        a record reaches it, as before) and its fixed part in an explanation, looked up once."""
        by_name, parts = self._features_by_name, self._condition_parts
        return tuple(tuple((c, by_name.get(c.feature), parts[c]) for c in rule.conditions) for rule in self.rules)

    def _answer(
        self, rule_id: int, conditions: list[dict[str, Any]], not_fired: list[dict[str, Any]]
    ) -> dict[str, Any]:
        rule = self.rule(rule_id)
        return {
            "prediction": self.prediction_of(rule_id),
            "probabilities": list(rule.probabilities),
            "rule_id": rule_id,
            "is_default": rule_id == 0,
            "rule_text": self._rule_texts[rule_id],
            "support": rule.support,
            "conditions": conditions,
            "not_fired": not_fired,
        }

    # ---- renderings ------------------------------------------------------------------------

    def _consequent_text(self, rule_id: int) -> str:
        rule = self.rule(rule_id)
        pred = self.prediction_of(rule_id)
        p = max(rule.probabilities)
        return f"{name_text(self.target)} = {_class_text(pred)}  (p={p:.2f}, support {rule.support})"

    def to_text(self) -> str:
        """Render as `if ... then ... / else if ... / else ...` text."""
        lines = []
        for j, rule in enumerate(self.rules, start=1):
            kw = "if" if j == 1 else "else if"
            lines.append(f"{kw} {rule.text(self._features_by_name)} then {self._consequent_text(j)}")
        lines.append(f"else {self._consequent_text(0)}")
        return "\n".join(lines)

    def to_sql(self, table: str, *, output: str = "prediction") -> str:
        """One SQL `CASE WHEN` expression selecting the predicted class (or `rule_id`) per row.

        Standard SQL (PostgreSQL, SQLite, SQL Server, Oracle; MySQL with ANSI_QUOTES and
        NO_BACKSLASH_ESCAPES). `table` may be schema-qualified (`public.heart`: each dotted part is
        quoted). Missing is what the document says: NULL or `''` (numeric columns: also NaN and blanks);
        numeric columns then take the training fill value, categorical ones the missing level.
        Categorical columns are compared as text holding the category keys.
        """
        if output not in ("prediction", "rule_id"):
            raise ValueError("output must be 'prediction' or 'rule_id'")
        by_name = {f.name: f for f in self.features}

        def cond_sql(c: Condition) -> str:
            col = _sql_ident(c.feature)
            if c.op == "between":
                x = f"COALESCE({_sql_number(col)}, {by_name[c.feature].fill_value!r})"
                parts = []
                if c.low is not None:
                    parts.append(f"{x} >= {c.low!r}")
                if c.high is not None:
                    parts.append(f"{x} <= {c.high!r}")
                return " AND ".join(parts)
            feature = by_name[c.feature]  # a level's other Unicode spellings decide as the level does
            present = [s for v in c.values if v is not None for s in (v, *feature.other_spellings(v))]
            null_in = None in c.values
            col = f"NULLIF(CAST({col} AS TEXT), '')"  # '' is the missing level, like NULL
            if _is_boolean_feature(by_name[c.feature]):  # SQLite, MySQL, SQL Server keep booleans as 1 / 0
                col = f"CASE {col} WHEN '1' THEN 'true' WHEN '0' THEN 'false' ELSE {col} END"
            inlist = f"{col} IN ({', '.join(_sql_string(v) for v in present)})" if present else "1 = 0"
            if c.op == "in":
                return f"({inlist} OR {col} IS NULL)" if null_in else f"({col} IS NOT NULL AND {inlist})"
            return f"({col} IS NOT NULL AND NOT {inlist})" if null_in else f"({col} IS NULL OR NOT {inlist})"

        classes = _sql_class_literals(self.classes) if output == "prediction" else []

        def out(rule_id: int) -> str:
            if output == "rule_id":
                return str(rule_id)
            return classes[_argmax(self.rule(rule_id).probabilities)]

        whens = []
        for j, rule in enumerate(self.rules, start=1):
            cond = " AND ".join(cond_sql(c) for c in rule.conditions) or "1 = 1"
            whens.append(f"    -- rule {j}: {_one_line(rule.text(by_name))}\n    WHEN {cond} THEN {out(j)}")
        body = "\n".join(whens) if whens else "    WHEN 1 = 0 THEN NULL"
        alias = _sql_output_name(output, by_name)
        return f"SELECT *,\n  CASE\n{body}\n    ELSE {out(0)}\n  END AS {alias}\nFROM {_sql_table(table)}"

    def to_python(self, function_name: str = "predict") -> str:
        """Source of a dependency-free function `predict(record) -> (class, rule_id, probabilities)`.

        It reads each value as this list does (`_PY_READERS`): missing is None, NaN of any float type,
        pandas' NA / NaT (known by type name) or `""` (numeric features: also blank text), a numeric
        feature refuses booleans and other non-numbers with a ValueError."""
        by_name = {f.name: f for f in self.features}
        used = {c.feature for r in self.rules for c in r.conditions if c.op != "between"}
        levels = {f.name: (dict.fromkeys(f.levels), f.level_by_nfc) for f in self.features if f.name in used}
        lines = [
            "# per categorical feature that rules use: its levels, and each level by its NFC form (built once)",
            f"_{function_name}_levels = {levels!r}",
            "",
            "",
            f"def {function_name}(record):",
            '    """Apply the NeuRules rule list: returns (class, rule_id, probabilities); '
            'rule_id 0 is the default rule."""',
            _PY_READERS,
            f"    LEVELS = _{function_name}_levels",
        ]

        def cond_py(c: Condition) -> str:
            if c.op == "between":
                x = f"num({c.feature!r}, {by_name[c.feature].fill_value!r})"
                if c.low is not None and c.high is not None:
                    return f"{c.low!r} <= {x} <= {c.high!r}"
                return f"{x} >= {c.low!r}" if c.low is not None else f"{x} <= {c.high!r}"
            values = "{" + ", ".join(repr(v) for v in c.values) + "}"
            return f"cat({c.feature!r}) {'in' if c.op == 'in' else 'not in'} {values}"

        def ret(rule_id: int) -> str:
            probs = list(self.rule(rule_id).probabilities)
            return f"return ({self.prediction_of(rule_id)!r}, {rule_id}, {probs!r})"

        for j, rule in enumerate(self.rules, start=1):
            cond = " and ".join(f"({cond_py(c)})" for c in rule.conditions) or "True"
            lines.append(f"    if {cond}:  # rule {j}: {_one_line(rule.text(by_name))}")
            lines.append(f"        {ret(j)}")
        lines.append(f"    {ret(0)}  # default rule")
        return "\n".join(lines) + "\n"


# `category_key` and `_to_float` as the Python export writes them, stdlib only: pandas' NA / NaT are known by
# type name, numpy's scalars by the `numbers` ABCs they register with, numpy's bool by its type name (`bool_`
# before numpy 2); tests/models/test_rulelist.py checks that both decide every value alike
_PY_READERS = """\
    import numbers
    import unicodedata
    def missing(v):
        # None, pandas.NA / NaT, or NaN of any float type (the one value unequal to itself)
        if v is None or type(v).__name__ in ('NAType', 'NaTType'):
            return True
        return isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and bool(v != v)
    def boolean(v):
        return isinstance(v, bool) or type(v).__name__ in ('bool', 'bool_')
    def num(name, fill):
        v = record[name]
        if missing(v) or (isinstance(v, str) and v.strip() == ''):
            return fill
        if boolean(v):
            raise ValueError('feature %r: expected a number, got a boolean' % (name,))
        if isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real):
            raise ValueError('feature %r: expected a real number, got %r' % (name, v))
        try:
            x = float(v)
        except OverflowError:
            raise ValueError('feature %r: the number is too large for a float' % (name,)) from None
        except (TypeError, ValueError):
            raise ValueError('feature %r: expected a number, got %r' % (name, v)) from None
        return fill if x != x else x
    def cat(name):
        v = record[name]
        if missing(v) or (isinstance(v, str) and v == ''):
            return None
        if boolean(v):
            return level(name, 'true' if v else 'false')
        if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and float(v).is_integer():
            return level(name, str(int(float(v))))
        return level(name, str(v))
    def level(name, k):
        # a text that is no level but spells exactly one level in another Unicode normal form is that level
        known, by_nfc = LEVELS.get(name, ((), {}))
        return k if k in known else by_nfc.get(unicodedata.normalize('NFC', k), k)"""


def _one_line(text: str) -> str:
    """Text safe inside a one-line comment."""
    return " ".join(text.splitlines())


# the batch output every front end writes (`neurules predict`, the service's predict.csv); the JSON
# answer uses the same names per record (`probabilities` holding the p_<class> values)
DECISION_COLUMNS = ("index", "prediction", "probability", "rule_id")


def label_key(label: Any) -> str:
    """A class label as text in output names and JSON keys: `true`/`false` for booleans, else str()."""
    if isinstance(label, (bool, np.bool_)):
        return "true" if label else "false"
    return str(label.item() if isinstance(label, np.generic) else label)


def decision_header(rl: RuleList) -> list[str]:
    """The columns of a decision table: `index, prediction, probability, rule_id, p_<class>...`."""
    return [*DECISION_COLUMNS, *(f"p_{label_key(c)}" for c in rl.classes)]


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_label(label: ClassLabel) -> ClassLabel:
    """A class label as a decision table's `prediction` cell: text a spreadsheet would run as a formula (beginning
    with = + - @, a tab or a carriage return, and not a plain number or a lone sign) gets a leading `'`, as OWASP
    advises against CSV injection (a label `=HYPERLINK(...)` ran when the file was opened); others as they are."""
    if label in ("+", "-"):  # a sign alone is no formula (credit data labels classes so)
        return label
    if isinstance(label, str) and label.startswith(_FORMULA_STARTS) and _NUMBER_TEXT.fullmatch(label) is None:
        return "'" + label
    return label


def decision_table(rl: RuleList, X: Any) -> tuple[list[str], list[list[Any]]]:
    """Header `index, prediction, probability, rule_id, p_<class>...` and one row per record.

    `index` counts records from 0 (as `records[i]` does); probabilities are rounded to 6 places; a prediction
    a spreadsheet would run as a formula is written with a leading `'` (`csv_label`).
    """
    ids = rl.apply(X).tolist()
    n = len(rl.rules) + 1
    probs = [rl.rule(j).probabilities for j in range(n)]
    preds = [csv_label(json_label(rl.prediction_of(j))) for j in range(n)]
    header = decision_header(rl)
    rows = [[i, preds[r], round(max(probs[r]), 6), r, *(round(p, 6) for p in probs[r])] for i, r in enumerate(ids)]
    return header, rows


def _sql_text(text: str, what: str) -> str:
    if "\x00" in text:
        raise ValueError(f"{what} {text!r} contains a NUL character, which SQL cannot hold")
    return text


def _sql_output_name(output: str, features: Mapping[str, Any]) -> str:
    """The name of the exported query's added column: `output`, or `neurules_<output>` (then `_2`, `_3`, ...) when
    a feature holds that name (SQL compares unquoted names without case): `SELECT *` would give two columns of it,
    and a reference to it would read the feature (SQLite) or be ambiguous (PostgreSQL)."""
    taken = {name.casefold() for name in features}
    name, n = output, 1
    while name.casefold() in taken:
        n += 1
        name = f"neurules_{output}" if n == 2 else f"neurules_{output}_{n - 1}"
    return name


def _sql_ident(name: str, what: str = "column name") -> str:
    """A quoted identifier: any character but NUL, `"` doubled."""
    return '"' + _sql_text(name, what).replace('"', '""') + '"'


_SQL_BIGINT = 2**63  # integers a BIGINT holds lie in [-2**63, 2**63)


def _sql_class_literals(classes: Sequence[ClassLabel]) -> list[str]:
    """One SQL literal per class, all of one SQL type, so a CASE's branches share it and classes stay apart:
    integers when every class is one a BIGINT holds, 1 / 0 when every class is a boolean, else each class's
    text (`label_key`: `true` and `1` differ; a mix of numbers and text was a type error on PostgreSQL).
    ValueError when two classes would read alike (`"1"` and `1`: one answer for both)."""
    if all(isinstance(c, bool) for c in classes):
        return ["1" if c else "0" for c in classes]
    if all(isinstance(c, int) and not isinstance(c, bool) and -_SQL_BIGINT <= c < _SQL_BIGINT for c in classes):
        return [str(c) for c in classes]
    literals = [_sql_string(label_key(c)) for c in classes]
    if len(set(literals)) < len(literals):
        twins = [c for c, lit in zip(classes, literals, strict=True) if literals.count(lit) > 1]
        raise ValueError(f"classes {twins!r} read alike as SQL text: the export could not tell them apart")
    return literals


def _sql_string(value: str) -> str:
    """A standard SQL string literal: any character but NUL, `'` doubled."""
    return "'" + _sql_text(value, "value").replace("'", "''") + "'"


def _sql_number(col: str) -> str:
    """A numeric column as a number, NULL when missing (NULL, NaN, or text that is empty, spaces or NaN)."""
    # the text only tells a blank or a NaN: a number read through its text would lose digits (SQLite writes REAL as
    # %.15g). PostgreSQL's float NaN is no NULL (COALESCE kept it, and it sorts above every number) and SQLite casts
    # the text 'NaN' to 0.0, while RuleList reads NaN as missing: both are NULL here, so they take the fill value.
    # Only spaces are blanks here (standard TRIM): other blanks would need their characters raw in the SQL's text,
    # which a line-ending conversion of the exported file changes
    text = f"TRIM(CAST({col} AS TEXT))"
    missing = f"{text} = '' OR UPPER({text}) IN ('NAN', '+NAN', '-NAN')"
    return f"CASE WHEN {missing} THEN NULL ELSE CAST({col} AS DOUBLE PRECISION) END"


def _sql_table(table: str) -> str:
    """`table`, `schema.table` or `catalog.schema.table`, each part quoted."""
    parts = table.split(".")
    if not 1 <= len(parts) <= 3 or any(p.strip() == "" for p in parts):
        raise ValueError(f"table {table!r}: give name, schema.name or catalog.schema.name")
    return ".".join(_sql_ident(p, "table name") for p in parts)


def _argmax(values: Sequence[float]) -> int:
    """Index of the largest value, the first on ties (as numpy's argmax)."""
    return max(range(len(values)), key=values.__getitem__)


def _described(parts: dict[str, Any], feature: Feature, value: tuple[Any, Any], holds: bool) -> dict[str, Any]:
    """One condition in an explanation: its fixed parts, the record's value (and the filled one), whether it held."""
    raw, norm = value
    d = dict(parts)
    if "values" in d:
        d["values"] = list(d["values"])  # the caller may change its copy
    d["value"] = _plain(raw)
    if feature.type == "numeric" and is_missing(raw):
        d["filled_value"] = float(norm)
    d["holds"] = holds
    return d


def _plain(value: Any) -> Any:
    """Make a record value JSON-friendly (numpy scalars -> Python, NaN -> None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _objects(values: Iterable[Any]) -> np.ndarray:
    """1-D object array of the given values (never a 2-D array, whatever the values are)."""
    items = list(values)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _column(values: Any) -> np.ndarray:
    """A numeric numpy column as it is (normalised without a detour through objects), anything else as objects."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iuf":
        return values
    return _objects(values)


def _mapping_rows(X: Mapping[str, Any], used: Iterable[str]) -> int:
    """Row count of a mapping of columns (its first column's length); ValueError when a used column is
    no list of values (a single record's scalars) or has another length."""
    if not X:
        return 0

    def length(name: str, values: Any) -> int:
        flat = not isinstance(values, np.ndarray) or values.ndim == 1
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") or not flat:
            raise ValueError(
                f"column {name!r}: a mapping of columns needs a list of values per feature, got "
                f"{type(values).__name__} (pass one record as a list of one mapping)"
            )
        return len(values)

    first = next(iter(X))
    n = length(first, X[first])
    for name in used:
        if length(name, X[name]) != n:
            raise ValueError(f"column {name!r} has {len(X[name])} values, but column {first!r} has {n}")
    return n


def _is_boolean_feature(feature: Feature) -> bool:
    """A categorical feature whose training categories are booleans only (keys "true" / "false")."""
    seen = {c for c in feature.categories if c is not None}
    return feature.type == "categorical" and bool(seen) and seen <= {"true", "false"}


def _require(names: Iterable[str], present: Any, prefix: str) -> None:
    missing = [n for n in names if n not in present]
    if missing:
        raise ValueError(f"{prefix}missing feature(s): {', '.join(missing)}")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_PLAIN_NUMBER_TYPES = frozenset({int, float, type(None), np.float64, np.float32, np.int64, np.int32})


def _as_floats(col: np.ndarray) -> np.ndarray | None:
    """Vectorised float conversion when the column holds only numbers/None; else None."""
    if col.dtype.kind in "iuf":
        return col.astype(np.float64)  # always a copy: callers fill missing values in place
    if col.dtype.kind == "O" and set(map(type, col)) <= _PLAIN_NUMBER_TYPES:
        try:
            return col.astype(np.float64)
        except OverflowError:  # an int beyond the float range: `_to_float` names its row
            return None
    return None


def _to_float(name: str, row: int, v: Any) -> float:
    """One value of a numeric feature as float (NaN when missing); ValueError naming name and row."""
    if type(v) is float:  # the usual values (JSON numbers), decided without the checks below
        return v
    if type(v) is int and -_FLOAT_MAX <= v <= _FLOAT_MAX:
        return float(v)
    if is_missing(v) or (isinstance(v, str) and v.strip() == ""):
        return math.nan
    if _is_bool(v):
        raise ValueError(f"feature {name!r}: row {row}: expected a number, got a boolean")
    if isinstance(v, (complex, np.complexfloating)):  # float() of a numpy complex drops the imaginary part
        raise ValueError(f"feature {name!r}: row {row}: expected a real number, got {v!r}")
    try:
        return float(v)
    except OverflowError:  # a whole number beyond the float range (10**400)
        raise ValueError(f"feature {name!r}: row {row}: the number is too large for a float") from None
    except (TypeError, ValueError):
        raise ValueError(f"feature {name!r}: row {row}: expected a number, got {v!r}") from None
