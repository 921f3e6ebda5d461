"""Decisions: records (JSON) or a CSV batch through a served rule list, each with its audit rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Engine

from app.services import audit, csvdata, serving
from app.services.auth import Principal
from app.services.errors import TooLarge
from app.services.serving import ServedModel
from models.counterfactual import counterfactual

ExplainMode = Literal["rules", "counterfactual", "none"]


def check_record_count(n: int, limit: int) -> None:
    """TooLarge when a JSON request carries more records than allowed."""
    if n > limit:
        raise TooLarge(f"records: {n} records; at most {limit} per request (use the CSV batch endpoint for more)")


def decide_records(model: ServedModel, records: list[Any], *, explain: ExplainMode) -> list[dict[str, Any]]:
    """Validate records against the model's fields (RecordError naming each) and decide them; with
    "counterfactual", each answer also carries the smallest change that leads to another class."""
    serving.validate_records(model, records)
    results = serving.predict_records(model, records, explain=explain != "none")
    if explain == "counterfactual":
        for record, result in zip(records, results, strict=True):
            result["counterfactual"] = counterfactual(model.rule_list, record)
    return results


def audit_rows(caller: Principal, model: ServedModel, records: list[Any], results: list[dict[str, Any]]) -> list[Any]:
    """The audit rows of one request's decisions."""
    return audit.audit_rows(
        caller.tenant_id, caller.key_id, model.version_id, model.rule_list.features, records, results
    )


@dataclass(frozen=True)
class CsvDecisions:
    """The answer CSV of a batch and the deciding rule of each row."""

    text: str
    rule_ids: list[int]


def decide_csv(
    engine: Engine, caller: Principal, model: ServedModel, data: bytes, *, max_rows: int, ignore_extra: bool
) -> CsvDecisions:
    """CSV in, CSV out (index, prediction, probability, rule_id, p_<class>...), audited before it is returned.

    Blocking (parsing, evaluation, the audit insert): run it off the event loop.
    """
    table = csvdata.parse_csv(data, max_rows=max_rows)
    records = serving.table_records(model, table, ignore_extra=ignore_extra)
    header, rows, ids = serving.batch_csv_rows(model, records)
    results = [
        {"prediction": r[1], "probabilities": dict(zip(model.class_keys, r[4:], strict=True)), "rule_id": r[3]}
        for r in rows
    ]
    audit.write_rows_or_unavailable(engine, audit_rows(caller, model, records, results))
    return CsvDecisions(csvdata.write_csv(header, rows), ids)
