"""Monitoring from the audit trail (pure): rule shares against training, drift (PSI), time series.

PSI on a small sample is noise (with no drift at all it averages about (k - 1) / n over k rules and n
decisions), so a version is judged only from `DriftRule.required(k)` decisions on: below that its
`drift_state` is `insufficient_data` and it does not alert.

The database side runs one GROUP BY over the audit rows of a model in a time window and hands the
result here as plain tuples: `(version_id, bucket, rule_id, count)` with `bucket` the index of the
time bucket (`bucket_of`), and `(version_id, n_missing_filled)`. Counts per rule are the sums over
buckets, so they equal the number of decisions made.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.services.rule_texts import rule_text
from models.rulelist import Feature, RuleList, category_key

BucketCount = tuple[str, int, int, int]  # (version_id, bucket index, rule_id, decisions)
FilledCount = tuple[str, int]  # (version_id, decisions whose record had a missing numeric value filled)


DriftState = str  # "ok" | "alert" | "insufficient_data" | "no_training_counts"


@dataclass(frozen=True)
class DriftRule:
    """When a version's rule-share PSI raises an alert: at `threshold`, once it has made at least
    `min_decisions` decisions and `per_rule` per rule of its list (the default rule included)."""

    threshold: float
    min_decisions: int = 0
    per_rule: int = 0

    def required(self, n_rules: int) -> int:
        """Decisions a version of `n_rules` rules (default rule included) needs before it is judged."""
        return max(self.min_decisions, self.per_rule * n_rules)

    def state(self, drift: float | None, total: int, n_rules: int) -> DriftState:
        """The verdict on one version: no training counts, too few decisions, ok or alert."""
        if drift is None:
            return "no_training_counts"
        if total < self.required(n_rules):
            return "insufficient_data"
        return "alert" if drift >= self.threshold else "ok"


@dataclass(frozen=True)
class VersionInfo:
    """What monitoring needs to know of one model version."""

    version_id: str
    version: int
    aliases: tuple[str, ...]
    rule_list: RuleList


def bucket_edges(since: datetime, until: datetime, n: int) -> list[tuple[datetime, datetime]]:
    """`n` equal time buckets covering [since, until): each starts at the first microsecond `bucket_of` puts in
    it (a start rounded to the nearest microsecond could lie in the bucket before, where a window of 7 days
    does not divide into 13)."""
    if n < 1 or until <= since:
        raise ValueError("need at least one bucket and until after since")
    width = micros(until) - micros(since)
    starts = [since + timedelta(microseconds=-(-i * width // n)) for i in range(n)] + [until]
    return list(itertools.pairwise(starts))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(at: datetime) -> int:
    """Whole microseconds since 1970 of an aware time."""
    return (at - _EPOCH) // timedelta(microseconds=1)


def bucket_of(at: datetime, since: datetime, until: datetime, n: int) -> int:
    """Index of the bucket holding `at`: floor((at - since) * n / width) in whole microseconds, clamped to
    0..n-1 (SQL computes the same from the stored times)."""
    i = (micros(at) - micros(since)) * n // (micros(until) - micros(since))
    return min(max(i, 0), n - 1)


def psi(actual: Sequence[int], expected: Sequence[int]) -> float | None:
    """Population stability index sum((a - e) * ln(a / e)) of two count vectors over the same cells;
    an empty cell's share is 0.5 / n (n: that side's total); cells empty on both sides are skipped.
    None when a side has no count at all."""
    n_a, n_e = sum(actual), sum(expected)
    if n_a == 0 or n_e == 0:
        return None
    total = 0.0
    for a_count, e_count in zip(actual, expected, strict=True):
        if a_count == 0 and e_count == 0:
            continue
        a = a_count / n_a if a_count else 0.5 / n_a
        e = e_count / n_e if e_count else 0.5 / n_e
        total += (a - e) * math.log(a / e)
    return total


def records_missing_filled(features: Sequence[Feature], records: Iterable[Mapping[str, Any]]) -> list[bool]:
    """Per record: was any numeric feature missing (so evaluated at its fill value)?"""
    numeric = [f.name for f in features if f.type == "numeric"]
    return [any(_missing(rec.get(name)) for name in numeric) for rec in records]


def _missing(value: Any) -> bool:
    kind = type(value)  # the JSON types first, without category_key (this runs per value of every decision)
    if kind is float:
        return math.isnan(value)
    if kind is int or kind is bool:
        return False
    if value is None:
        return True
    if kind is str:
        return not value.strip()
    return category_key(value) is None or (isinstance(value, str) and not value.strip())


def _rules_block(rl: RuleList, counts: Mapping[int, int], total: int) -> list[dict[str, Any]]:
    """Count, share and training share per rule (list order, the default rule, then unknown ids)."""
    ids = [*range(1, len(rl.rules) + 1), 0]
    ids += sorted(set(counts) - set(ids))
    train_total = sum(rl.rule(j).support for j in range(len(rl.rules) + 1))
    out = []
    for j in ids:
        known = 0 <= j <= len(rl.rules)
        support = rl.rule(j).support if known else 0
        out.append(
            {
                "rule_id": j,
                "rule_text": rule_text(rl, j) if known else None,
                "count": counts.get(j, 0),
                "share": counts.get(j, 0) / total if total else 0.0,
                "training_share": support / train_total if train_total else None,
            }
        )
    return out


def _series(
    edges: Sequence[tuple[datetime, datetime]], by_bucket: Mapping[int, Mapping[int, int]], order: Sequence[int]
) -> list[dict[str, Any]]:
    """Rule shares per time bucket (every bucket, empty ones with total 0)."""
    out = []
    for b, (start, end) in enumerate(edges):
        counts = by_bucket.get(b, {})
        total = sum(counts.values())
        shares = {str(j): counts[j] / total for j in order if counts.get(j)}
        out.append({"start": start.isoformat(), "end": end.isoformat(), "total": total, "shares": shares})
    return out


def version_block(
    info: VersionInfo,
    by_bucket: Mapping[int, Mapping[int, int]],
    n_filled: int,
    edges: Sequence[tuple[datetime, datetime]],
    rule: DriftRule,
) -> dict[str, Any]:
    """One entry of `versions`: totals, rules, drift and its verdict, missing-filled share and the series."""
    counts: dict[int, int] = defaultdict(int)
    for per_rule in by_bucket.values():
        for j, c in per_rule.items():
            counts[j] += c
    total = sum(counts.values())
    rules = _rules_block(info.rule_list, counts, total)
    training = [info.rule_list.rule(r["rule_id"]).support if r["rule_text"] is not None else 0 for r in rules]
    drift = psi([r["count"] for r in rules], training)
    n_rules = len(info.rule_list.rules) + 1
    state = rule.state(drift, total, n_rules)
    return {
        "version_id": info.version_id,
        "version": info.version,
        "aliases": list(info.aliases),
        "total": total,
        "drift_psi": drift,
        "drift_state": state,
        "min_decisions": rule.required(n_rules),
        "alert": state == "alert",
        "missing_filled_share": n_filled / total if total else 0.0,
        "rules": rules,
        "series": _series(edges, by_bucket, [r["rule_id"] for r in rules]),
    }


def monitoring_report(
    model: str,
    since: datetime,
    until: datetime,
    versions: Sequence[VersionInfo],
    bucket_counts: Iterable[BucketCount],
    filled_counts: Iterable[FilledCount],
    *,
    n_buckets: int,
    drift: DriftRule,
) -> dict[str, Any]:
    """The monitoring answer of docs/governance-api.md: every version that decided something in
    the window, newest version first."""
    edges = bucket_edges(since, until, n_buckets)
    by_id = {v.version_id: v for v in versions}
    grouped: dict[str, dict[int, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for version_id, bucket, rule_id, count in bucket_counts:
        if version_id not in by_id:
            raise ValueError(f"counts for unknown version {version_id!r}")
        if not 0 <= bucket < n_buckets:
            raise ValueError(f"bucket {bucket} outside 0..{n_buckets - 1}")
        cell = grouped[version_id][bucket]
        cell[rule_id] = cell.get(rule_id, 0) + count
    filled = dict(filled_counts)
    blocks = [
        version_block(by_id[vid], grouped[vid], filled.get(vid, 0), edges, drift)
        for vid in sorted(grouped, key=lambda v: -by_id[v].version)
    ]
    blocks = [b for b in blocks if b["total"] > 0]
    return {
        "model": model,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "total": sum(b["total"] for b in blocks),
        "alert_threshold": drift.threshold,
        "drift_min_decisions": drift.min_decisions,
        "drift_min_decisions_per_rule": drift.per_rule,
        "versions": blocks,
    }


__all__ = [
    "BucketCount",
    "DriftRule",
    "DriftState",
    "FilledCount",
    "VersionInfo",
    "bucket_edges",
    "bucket_of",
    "micros",
    "monitoring_report",
    "psi",
    "records_missing_filled",
    "version_block",
]
