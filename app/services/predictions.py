"""Decisions: records (JSON) or a CSV batch through a served rule list, each with its audit rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any, Literal

from sqlalchemy import Engine

from app.services import audit, batch, serving
from app.services.auth import Principal
from app.services.errors import Invalid, TooLarge
from app.services.serving import ServedModel
from models.counterfactual import counterfactual

ExplainMode = Literal["rules", "counterfactual", "none"]


def check_record_count(n: int, limit: int) -> None:
    """TooLarge when a JSON request carries more records than allowed."""
    if n > limit:
        raise TooLarge(f"records: {n} records; at most {limit} per request (use the CSV batch endpoint for more)")


def explain_mode(body: ExplainMode, body_given: bool, query: bool | None) -> ExplainMode:
    """What to explain, from the body's `explain` and the query's `explain` (None: not in the query).

    The query's boolean is the older switch: `false` means "none", `true` an explanation (the body's mode,
    "rules" when the body gives none). Both given and disagreeing is a 422 naming both: neither silently wins.
    """
    if query is None:
        return body
    if not body_given:
        return "rules" if query else "none"
    if query == (body != "none"):
        return body
    message = (
        f'the query\'s explain={str(query).lower()} contradicts the body\'s "explain": "{body}"; send one of them '
        '(the body\'s takes "rules", "counterfactual" or "none")'
    )
    raise Invalid(
        message,
        code="conflicting_explain",
        details=[
            {"field": "query.explain", "message": f"{str(query).lower()} contradicts the body's explain"},
            {"field": "explain", "message": f"{body!r} contradicts the query's explain={str(query).lower()}"},
        ],
    )


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
        caller.tenant_id, caller.key_id, model.version_id, model.rule_list.features, records, results, model.categorical
    )


@dataclass(frozen=True)
class CsvDecisions:
    """The answer CSV of a batch and the deciding rule of each row."""

    text: str
    rule_ids: list[int]


class CsvBatch:
    """One predict.csv request: the file checked up front, then scored, audited and answered chunk by chunk.

    Blocking (parsing, evaluation, the audit inserts): call its methods off the event loop.
    """

    def __init__(self, engine: Engine, scorer: batch.Scorer, checked: batch.CheckedFile) -> None:
        self.engine, self.scorer, self.checked = engine, scorer, checked
        self._chunks = checked.chunks()

    @classmethod
    def check(
        cls, engine: Engine, caller: Principal, model: ServedModel, fh: IO[bytes], *, max_rows: int, ignore_extra: bool
    ) -> CsvBatch:
        """Parse and type the whole file (4xx naming line and column on the first bad row); nothing decided yet.
        The upload and the typed columns are on disk: a full or failing one is Unavailable (temporary storage)."""
        try:
            checked = batch.check_file(model, fh, max_rows=max_rows, ignore_extra=ignore_extra)
        except OSError as e:
            raise batch.storage_failed(e, "the file") from None
        return cls(engine, batch.Scorer(model, caller.tenant_id, caller.key_id), checked)

    @property
    def n_rows(self) -> int:
        """Data rows in the file."""
        return self.checked.n_rows

    def header(self) -> str:
        """The answer's header line."""
        return self.scorer.header()

    def next_chunk(self) -> CsvDecisions | None:
        """Decide the next chunk, commit its audit rows (or raise Unavailable); its answer rows, None at the end."""
        try:
            chunk = next(self._chunks, None)
        except OSError as e:  # the spilled columns could not be read back
            raise batch.storage_failed(e, "the file's checked rows") from None
        if chunk is None:
            return None
        ids, rows = self.scorer.decide(chunk)
        seqs = audit.write_rows_or_unavailable(self.engine, audit.ColumnRows(rows))
        return CsvDecisions(self.scorer.text(chunk, ids, seqs), ids.tolist())

    def close(self) -> None:
        """Drop the spilled columns."""
        self.checked.close()
