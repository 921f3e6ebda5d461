"""Comparing two versions of the tenant: the rule-level diff and, with a dataset, both on its rows."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from app.services import datasets, registry
from app.services.comparison import compare_on_table, diff_rule_lists
from app.services.csvdata import Table, categorical_names, parse_csv
from app.services.errors import Invalid
from app.services.evaluations import VersionRef, training_file, version_ref
from app.services.training_overlap import training_overlap
from models.rulelist import RuleList


def check_size(n_rows: int, sync_max_rows: int) -> None:
    """A comparison scores its dataset in the request: refuse one over the synchronous limit, naming what to run."""
    if n_rows > sync_max_rows:
        raise Invalid.field(
            "dataset_id",
            f"the dataset has {n_rows:,} rows; a comparison scores it in the request, which is limited to "
            f"{sync_max_rows:,} rows (NEURULES_EVALUATION_SYNC_MAX_ROWS). Run an evaluation of each version on it "
            "(POST /v1/models/{ref}/evaluations: scored in the background) to set their metrics side by side, "
            f"or compare on a sample of at most {sync_max_rows:,} rows for the disagreement and the cross-table",
            code="dataset_too_large_to_compare",
        )


def check_same_target(base: RuleList, other: RuleList, base_ref: VersionRef, other_ref: VersionRef) -> None:
    """Two versions are compared only when they predict the same column: the rule diff, the disagreement and
    the metrics of versions predicting different things would answer a question nobody asked."""
    if base.target != other.target:
        raise Invalid.field(
            "other",
            f"{other_ref.name}@{other_ref.version} ({other_ref.id}) predicts {other.target!r} but the base version "
            f"{base_ref.name}@{base_ref.version} ({base_ref.id}) predicts {base.target!r}; only versions trained "
            "for the same target can be compared",
            code="targets_differ",
        )


def compare_versions(
    session: Session,
    tenant_id: str,
    ref: str,
    other: str,
    *,
    dataset_id: str | None,
    target: str | None,
    sync_max_rows: int,
) -> dict[str, Any]:
    """The comparison body of docs/governance-api.md (`dataset` null without a dataset); a dataset over
    `sync_max_rows` rows is refused before it is read."""
    if target is not None and dataset_id is None:  # a label column with no data to read it from: never ignored
        raise Invalid.field("target", "names the label column of `dataset_id`; give dataset_id too")
    mv_base, mv_other = registry.resolve(session, tenant_id, ref), registry.resolve(session, tenant_id, other)
    base, other_rl = RuleList.from_dict(mv_base.rule_list), RuleList.from_dict(mv_other.rule_list)
    base_ref, other_ref = version_ref(session, mv_base), version_ref(session, mv_other)
    check_same_target(base, other_rl, base_ref, other_ref)
    out: dict[str, Any] = {
        "base": asdict(base_ref),
        "other": asdict(other_ref),
        **diff_rule_lists(base, other_rl),
        "dataset": None,
    }
    if dataset_id is not None:
        ds = datasets.get_dataset(session, tenant_id, dataset_id)
        check_size(ds.n_rows, sync_max_rows)
        table, other_table = tables_as_read(datasets.file_bytes(session, ds), base, other_rl)
        if target is None and base.target in table.columns:
            target = base.target
        block = {"dataset_id": ds.id, **compare_on_table(base, other_rl, table, target, other_table)}
        if target is not None:  # the rows each version was trained on, found by value (a file cut from one)
            sides = (("base", base, mv_base, table), ("other", other_rl, mv_other, other_table))
            block["training_overlap"] = {
                side: training_overlap(rl, t, target, training_file(session, mv, max_rows=sync_max_rows))
                for side, rl, mv, t in sides
            }
        out["dataset"] = block
    return out


def tables_as_read(data: bytes, base: RuleList, other: RuleList) -> tuple[Table, Table]:
    """The file as each version reads it (the same rows): a column categorical in one list keeps its decimal
    commas there and is read as a number in the other. One parse for both read with the commas of a column
    categorical in only one list rewritten (`1,5` -> `1.5`), which that list's levels never matched: its side
    was scored wrong, and the versions "disagreed" on rows where they agree."""
    table = parse_csv(data, keep_text=categorical_names(base))
    if _categorical(base) == _categorical(other):
        return table, table
    return table, parse_csv(data, keep_text=categorical_names(other))


def _categorical(rl: RuleList) -> frozenset[str]:
    return frozenset(f.name for f in rl.features if f.type == "categorical")


__all__ = ["check_same_target", "check_size", "compare_versions", "tables_as_read"]
