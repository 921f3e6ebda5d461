"""Monitoring a named model from its audit trail: one GROUP BY over the window's audit rows, handed to
the pure `monitoring.monitoring_report` (rule shares against training, drift, series)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Float, Integer, String, case, cast, func, select
from sqlalchemy.orm import Session

from app.services import registry
from app.services.errors import Invalid
from app.services.monitoring import BucketCount, DriftRule, FilledCount, VersionInfo, micros, monitoring_report
from app.tables import AuditRecord, ModelAlias, ModelVersion, RegisteredModel, utcnow
from models.rulelist import RuleList

DEFAULT_WINDOW = timedelta(days=7)
UNIX_EPOCH_JULIAN_DAY = 2440587.5


@dataclass(frozen=True)
class Window:
    """[since, until) in `buckets` equal slices."""

    since: datetime
    until: datetime
    buckets: int


def _utc(at: datetime, field: str) -> datetime:
    try:
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise Invalid.field(f"query.{field}", "out of range: in UTC it falls outside the years 1 to 9999") from None


def window(since: datetime | None, until: datetime | None, buckets: int, now: datetime | None = None) -> Window:
    """The window asked for (naive times are UTC; default: the 7 days up to now); Invalid naming the query
    parameter at fault (`query.since`, `query.until`, as FastAPI names its own) when empty or outside the years
    1 to 9999. A `since` alone that is not before now is its own fault: `until` was not sent."""
    end = _utc(until, "until") if until is not None else (now or utcnow())
    if since is not None:
        start = _utc(since, "since")
    elif end - datetime.min.replace(tzinfo=UTC) < DEFAULT_WINDOW:
        raise Invalid.field(
            "query.until",
            "out of range: the default window (the 7 days before until) starts before year 1; give since",
        )
    else:
        start = end - DEFAULT_WINDOW
    if end <= start and until is None:
        raise Invalid.field(
            "query.since",
            f"is in the future: it must be before now ({end.isoformat(timespec='seconds')}), or give a later until too",
        )
    if end <= start:
        raise Invalid.field("query.until", f"must be after since ({start.isoformat()})")
    return Window(start, end, buckets)


def _epoch_seconds(dialect: str) -> ColumnElement[float]:
    """Seconds since 1970 of an audit row's time, in the database's own arithmetic."""
    if dialect == "sqlite":  # stored as 'YYYY-MM-DD HH:MM:SS.ffffff' UTC text
        return (func.julianday(AuditRecord.created_at) - UNIX_EPOCH_JULIAN_DAY) * 86400.0
    return cast(func.extract("epoch", AuditRecord.created_at), Float)


def _epoch_microseconds(dialect: str) -> ColumnElement[int]:
    """Microseconds since 1970 of an audit row's time, exactly (julianday() rounds to the millisecond)."""
    at = AuditRecord.created_at
    if dialect == "sqlite":  # whole seconds, then the stored fraction's digits ('.5' is 500000; none is 0)
        seconds = cast(func.strftime("%s", at), BigInteger)
        return seconds * 1_000_000 + cast(func.substr(cast(at, String) + "000000", 21, 6), BigInteger)
    return cast(func.round(func.extract("epoch", at) * 1_000_000), BigInteger)


def _bucket(dialect: str, w: Window) -> ColumnElement[int]:
    """floor((t - since) * buckets / width): the time bucket of a row (clamped afterwards), in whole
    microseconds where the product fits 64 bits (every window up to a century at 1,000 buckets), so a
    decision at a bucket's start is in that bucket as `monitoring.bucket_of` says; in seconds beyond."""
    width_us = micros(w.until) - micros(w.since)
    if width_us * w.buckets < 2**62:  # rows lie in [since, until): (t - since) * buckets stays below this
        return ((_epoch_microseconds(dialect) - micros(w.since)) * w.buckets) // width_us
    width = (w.until - w.since).total_seconds()
    offset = (_epoch_seconds(dialect) - w.since.timestamp()) * (w.buckets / width)
    if dialect == "sqlite":  # the rows are at or after `since`: truncation is the floor
        return cast(offset, Integer)
    return cast(func.floor(offset), Integer)


def decision_counts(
    session: Session, tenant_id: str, rm: RegisteredModel, w: Window
) -> tuple[list[BucketCount], list[FilledCount]]:
    """Decisions per (version, bucket, rule) and records with filled missing values per version, in one
    GROUP BY over the tenant's audit rows of the model's versions in the window."""
    dialect = session.get_bind().dialect.name
    versions = select(ModelVersion.id).where(ModelVersion.registered_model_id == rm.id)
    rows = (
        select(
            AuditRecord.model_version_id.label("version_id"),
            _bucket(dialect, w).label("bucket"),
            AuditRecord.rule_id.label("rule_id"),
            case((AuditRecord.missing_filled.is_(True), 1), else_=0).label("filled"),
        )
        .where(
            AuditRecord.tenant_id == tenant_id,
            AuditRecord.created_at >= w.since,
            AuditRecord.created_at < w.until,
            AuditRecord.model_version_id.in_(versions),
        )
        .subquery()
    )
    grouped = session.execute(
        select(rows.c.version_id, rows.c.bucket, rows.c.rule_id, func.count(), func.sum(rows.c.filled)).group_by(
            rows.c.version_id, rows.c.bucket, rows.c.rule_id
        )
    ).all()
    counts: list[BucketCount] = []
    filled: dict[str, int] = {}
    for version_id, bucket, rule_id, n, n_filled in grouped:
        try:
            place, rule = min(max(int(bucket), 0), w.buckets - 1), int(rule_id)
        except (TypeError, ValueError):  # a row changed outside the service (no time, no rule): the audit names it
            continue
        counts.append((version_id, place, rule, int(n)))
        filled[version_id] = filled.get(version_id, 0) + int(n_filled or 0)
    return counts, list(filled.items())


def version_infos(session: Session, version_ids: Sequence[str]) -> list[VersionInfo]:
    """Number, aliases and parsed rule list of the versions that decided something."""
    if not version_ids:
        return []
    aliases: dict[str, list[str]] = {}
    for alias, vid in session.execute(
        select(ModelAlias.alias, ModelAlias.version_id).where(ModelAlias.version_id.in_(version_ids))
    ):
        aliases.setdefault(vid, []).append(alias)
    rows = session.execute(
        select(ModelVersion.id, ModelVersion.version, ModelVersion.rule_list).where(ModelVersion.id.in_(version_ids))
    ).all()
    return [
        VersionInfo(vid, number, tuple(sorted(aliases.get(vid, []))), RuleList.from_dict(doc))
        for vid, number, doc in rows
    ]


def monitor(session: Session, tenant_id: str, ref: str, w: Window, *, drift: DriftRule) -> dict[str, Any]:
    """The monitoring answer of docs/governance-api.md for the named model `ref` points into."""
    mv = registry.resolve(session, tenant_id, ref)
    rm = session.get(RegisteredModel, mv.registered_model_id)
    assert rm is not None  # a version's model: the foreign key holds it
    counts, filled = decision_counts(session, tenant_id, rm, w)
    infos = version_infos(session, sorted({c[0] for c in counts}))
    return monitoring_report(rm.name, w.since, w.until, infos, counts, filled, n_buckets=w.buckets, drift=drift)


__all__ = ["Window", "decision_counts", "monitor", "version_infos", "window"]
