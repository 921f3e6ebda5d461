"""Comparing two versions of the tenant: the rule-level diff and, with a dataset, both on its rows."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from app.services import datasets, registry
from app.services.comparison import compare_on_table, diff_rule_lists
from app.services.csvdata import parse_csv
from app.services.evaluations import version_ref
from app.storage import DatabaseBlobStore
from models.rulelist import RuleList


def compare_versions(
    session: Session, tenant_id: str, ref: str, other: str, *, dataset_id: str | None, target: str | None
) -> dict[str, Any]:
    """The comparison body of docs/governance-api.md (`dataset` null without a dataset)."""
    mv_base, mv_other = registry.resolve(session, tenant_id, ref), registry.resolve(session, tenant_id, other)
    base, other_rl = RuleList.from_dict(mv_base.rule_list), RuleList.from_dict(mv_other.rule_list)
    out: dict[str, Any] = {
        "base": asdict(version_ref(session, mv_base)),
        "other": asdict(version_ref(session, mv_other)),
        **diff_rule_lists(base, other_rl),
        "dataset": None,
    }
    if dataset_id is not None:
        ds = datasets.get_dataset(session, tenant_id, dataset_id)
        table = parse_csv(DatabaseBlobStore(session).get(ds.blob_key))
        if target is None and base.target in table.columns:
            target = base.target
        out["dataset"] = {"dataset_id": ds.id, **compare_on_table(base, other_rl, table, target)}
    return out


__all__ = ["compare_versions"]
