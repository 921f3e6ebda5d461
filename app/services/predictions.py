"""Decisions: records (JSON) or a CSV batch through a served rule list, each with its audit rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from app.services import audit, csvdata, serving
from app.services.auth import Principal
from app.services.errors import TooLarge
from app.services.serving import ServedModel


def check_record_count(n: int, limit: int) -> None:
    """TooLarge when a JSON request carries more records than allowed."""
    if n > limit:
        raise TooLarge(f"records: {n} records; at most {limit} per request (use the CSV batch endpoint for more)")


def decide_records(model: ServedModel, records: list[Any], *, explain: bool) -> list[dict[str, Any]]:
    """Validate records against the model's fields (RecordError naming each) and decide them."""
    serving.validate_records(model, records)
    return serving.predict_records(model, records, explain=explain)


def audit_rows(caller: Principal, model: ServedModel, records: list[Any], results: list[dict[str, Any]]) -> list[Any]:
    """The audit rows of one request's decisions."""
    return audit.audit_rows(
        caller.tenant_id, caller.key_id, model.version_id, model.rule_list.features, records, results
    )


def decide_csv(
    engine: Engine, caller: Principal, model: ServedModel, data: bytes, *, max_rows: int, ignore_extra: bool
) -> str:
    """CSV in, CSV out (index, prediction, probability, rule_id, p_<class>...), audited before it is returned.

    Blocking (parsing, evaluation, the audit insert): run it off the event loop.
    """
    table = csvdata.parse_csv(data, max_rows=max_rows)
    records = serving.table_records(model, table, ignore_extra=ignore_extra)
    header, rows, _ = serving.batch_csv_rows(model, records)
    results = [
        {"prediction": r[1], "probabilities": dict(zip(model.class_keys, r[4:], strict=True)), "rule_id": r[3]}
        for r in rows
    ]
    audit.write_rows_or_unavailable(engine, audit_rows(caller, model, records, results))
    return csvdata.write_csv(header, rows)
