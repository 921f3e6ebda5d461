"""Monitoring from audit counts: counts equal the decisions made, PSI, series, missing-filled share."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.services.monitoring import (
    DriftRule,
    VersionInfo,
    bucket_edges,
    bucket_of,
    monitoring_report,
    psi,
    records_missing_filled,
)
from models.rulelist import RuleList
from tests.models.test_rulelist import DOC

SINCE = datetime(2025, 1, 1, tzinfo=UTC)
UNTIL = SINCE + timedelta(days=7)


def _decisions(rl: RuleList, n: int, seed: int) -> list[tuple[datetime, int, bool]]:
    """Simulated audit rows of one version: (time, rule id, missing value filled?)."""
    rng = np.random.default_rng(seed)
    records: list[dict[str, Any]] = [
        {
            "age": None if rng.random() < 0.1 else int(rng.integers(18, 90)),
            "chest pain": rng.choice(["typical", "asymptomatic", None]),
            "smoker": rng.choice(["true", "false"]),
            "unused": None if rng.random() < 0.05 else 1.0,
        }
        for _ in range(n)
    ]
    ids = rl.apply(records).tolist()
    filled = records_missing_filled(rl.features, records)
    times = [SINCE + timedelta(seconds=float(s)) for s in rng.uniform(0, 7 * 86400, n)]
    return list(zip(times, ids, filled, strict=True))


def test_report_counts_equal_the_decisions_made() -> None:
    rl = RuleList.from_dict(DOC)
    audit = {"mv_a": _decisions(rl, 700, seed=1), "mv_b": _decisions(rl, 300, seed=2)}
    versions = [
        VersionInfo("mv_a", 1, (), rl),
        VersionInfo("mv_b", 2, ("production",), rl),
        VersionInfo("mv_c", 3, (), rl),
    ]
    n_buckets = 24
    grouped = Counter(
        (vid, bucket_of(at, SINCE, UNTIL, n_buckets), rule_id) for vid, rows in audit.items() for at, rule_id, _ in rows
    )
    filled = [(vid, sum(f for _, _, f in rows)) for vid, rows in audit.items()]
    out = monitoring_report(
        "heart",
        SINCE,
        UNTIL,
        versions,
        [*((v, b, r, c) for (v, b, r), c in grouped.items()), ("mv_c", 0, 1, 0)],
        filled,
        n_buckets=n_buckets,
        drift=DriftRule(0.2),
    )
    assert out["total"] == 1000
    assert [v["version_id"] for v in out["versions"]] == ["mv_b", "mv_a"]  # newest first; mv_c decided nothing
    assert out["versions"][0]["aliases"] == ["production"]
    for block in out["versions"]:
        rows = audit[block["version_id"]]
        assert block["total"] == len(rows)
        by_rule = Counter(rule_id for _, rule_id, _ in rows)
        assert [r["rule_id"] for r in block["rules"]] == [1, 2, 3, 0]
        for r in block["rules"]:
            assert r["count"] == by_rule[r["rule_id"]]
            assert r["share"] == pytest.approx(by_rule[r["rule_id"]] / len(rows))
            assert r["training_share"] == pytest.approx(rl.rule(r["rule_id"]).support / 29)
        assert block["missing_filled_share"] == pytest.approx(sum(f for _, _, f in rows) / len(rows))
        assert 0 < block["missing_filled_share"] < 1
        expected_psi = psi([by_rule[j] for j in (1, 2, 3, 0)], [10, 4, 5, 10])
        assert block["drift_psi"] == pytest.approx(expected_psi)
        assert block["alert"] == (expected_psi >= 0.2)
        series = block["series"]
        assert len(series) == n_buckets
        assert sum(s["total"] for s in series) == len(rows)
        first = [rule_id for at, rule_id, _ in rows if at < SINCE + (UNTIL - SINCE) / n_buckets]
        assert series[0]["total"] == len(first)
        assert series[0]["shares"] == {str(j): c / len(first) for j, c in Counter(first).items()}
        assert series[0]["start"] == SINCE.isoformat()
        assert series[-1]["end"] == UNTIL.isoformat()


def test_psi_with_empty_cells_smoothed() -> None:
    assert psi([50, 50, 0], [50, 150, 0]) == pytest.approx(0.25 * math.log(2) - 0.25 * math.log(0.5 / 0.75))
    a, e = 0.5 / 100, 0.5
    assert psi([100, 0], [50, 50]) == pytest.approx((1 - 0.5) * math.log(2) + (a - e) * math.log(a / e))
    assert psi([30, 10], [300, 100]) == pytest.approx(0.0)
    assert psi([0, 0], [1, 1]) is None


def test_alert_follows_the_threshold() -> None:
    rl = RuleList.from_dict(DOC)
    counts = [("mv", 0, 1, 100)]  # everything decided by rule 1: far from training
    out = monitoring_report(
        "m", SINCE, UNTIL, [VersionInfo("mv", 1, (), rl)], counts, [], n_buckets=1, drift=DriftRule(0.2)
    )
    block = out["versions"][0]
    assert block["drift_psi"] > 0.2 and block["alert"] is True
    assert block["missing_filled_share"] == 0.0
    calm = monitoring_report(
        "m", SINCE, UNTIL, [VersionInfo("mv", 1, (), rl)], counts, [], n_buckets=1, drift=DriftRule(50)
    )
    assert calm["versions"][0]["alert"] is False


def test_too_few_decisions_are_reported_but_never_alert() -> None:
    rl = RuleList.from_dict(DOC)  # 3 rules + the default rule: 4 cells
    drift = DriftRule(0.2, min_decisions=50, per_rule=20)  # needs max(50, 20 x 4) = 80 decisions

    def block(n: int) -> dict[str, Any]:
        counts = [("mv", 0, 1, n)]  # everything decided by rule 1: far from training at any n
        out = monitoring_report("m", SINCE, UNTIL, [VersionInfo("mv", 1, (), rl)], counts, [], n_buckets=1, drift=drift)
        return out["versions"][0]  # type: ignore[no-any-return]

    few = block(2)
    assert few["drift_psi"] > 0.2  # computed and reported ...
    assert (few["drift_state"], few["alert"], few["min_decisions"]) == (
        "insufficient_data",
        False,
        80,
    )  # ... not judged
    assert (block(79)["drift_state"], block(79)["alert"]) == ("insufficient_data", False)
    assert (block(80)["drift_state"], block(80)["alert"]) == ("alert", True)
    assert DriftRule(0.2, min_decisions=100, per_rule=10).required(4) == 100
    assert DriftRule(0.2, min_decisions=100, per_rule=10).required(41) == 410  # a 40-rule list needs more


def test_drift_states() -> None:
    rule = DriftRule(0.2, min_decisions=10)
    assert rule.state(None, 1000, 3) == "no_training_counts"
    assert rule.state(5.0, 9, 3) == "insufficient_data"
    assert rule.state(0.19, 10, 3) == "ok"
    assert rule.state(0.2, 10, 3) == "alert"


def test_buckets_cover_the_window() -> None:
    edges = bucket_edges(SINCE, UNTIL, 7)
    assert edges[0][0] == SINCE and edges[-1][1] == UNTIL
    assert all(a[1] == b[0] for a, b in itertools.pairwise(edges))
    assert bucket_of(SINCE, SINCE, UNTIL, 7) == 0
    assert bucket_of(SINCE + timedelta(days=1), SINCE, UNTIL, 7) == 1
    assert bucket_of(SINCE + timedelta(days=1) - timedelta(microseconds=1), SINCE, UNTIL, 7) == 0
    assert bucket_of(UNTIL, SINCE, UNTIL, 7) == 6
    with pytest.raises(ValueError):
        bucket_edges(UNTIL, SINCE, 3)


@pytest.mark.parametrize("n", [7, 13, 999, 1000])
def test_a_bucket_starts_at_the_first_instant_it_counts(n: int) -> None:
    """A review: where 7 days do not divide into n buckets, a shown start (rounded to the nearest microsecond)
    could lie in the bucket before it (12 of 13 starts, 998 of 999)."""
    edges = bucket_edges(SINCE, UNTIL, n)
    assert edges[0][0] == SINCE and edges[-1][1] == UNTIL
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(edges))
    one = timedelta(microseconds=1)
    for i, (start, _) in enumerate(edges):
        assert bucket_of(start, SINCE, UNTIL, n) == i
        assert i == 0 or bucket_of(start - one, SINCE, UNTIL, n) == i - 1


def test_bad_counts_are_refused() -> None:
    rl = RuleList.from_dict(DOC)
    versions = [VersionInfo("mv", 1, (), rl)]
    with pytest.raises(ValueError, match="unknown version"):
        monitoring_report("m", SINCE, UNTIL, versions, [("other", 0, 1, 1)], [], n_buckets=2, drift=DriftRule(0.2))
    with pytest.raises(ValueError, match="bucket 2"):
        monitoring_report("m", SINCE, UNTIL, versions, [("mv", 2, 1, 1)], [], n_buckets=2, drift=DriftRule(0.2))


def test_missing_filled_counts_only_numeric_features() -> None:
    rl = RuleList.from_dict(DOC)
    base = {"age": 50, "chest pain": "typical", "smoker": "true", "unused": 0.0}
    records = [
        base,
        {**base, "age": None},
        {**base, "unused": float("nan")},
        {**base, "age": ""},
        {**base, "chest pain": None},  # a missing category is a level, not a filled value
        {**base, "age": 0},
    ]
    assert records_missing_filled(rl.features, records) == [False, True, True, True, False, False]
