"""The first rows of a stored dataset, as the file has them (cells as text, missing tokens as None)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from itertools import islice

from sqlalchemy.orm import Session

from app.services import datasets
from models.csvtext import sniff_delimiter
from models.rulelist import csv_cell_value

MAX_PREVIEW_ROWS = 100
SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class Preview:
    """A dataset's header and first rows."""

    columns: list[str]
    rows: list[list[str | None]]


def head(data: bytes, limit: int) -> Preview:
    """Header and up to `limit` data rows of a CSV the upload already validated (read lazily, blank lines
    skipped, cells stripped, missing tokens as None: as `csvdata.parse_csv` reads them)."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
    delimiter = sniff_delimiter(data[:SNIFF_BYTES].decode("utf-8-sig", errors="replace"))
    reader = csv.reader(text, delimiter=delimiter, strict=True)
    header = [h.strip() for h in next(reader, [])]
    rows = islice((r for r in reader if r), min(limit, MAX_PREVIEW_ROWS))
    return Preview(header, [[csv_cell_value(cell) for cell in r] for r in rows])


def preview(session: Session, tenant_id: str, dataset_id: str, limit: int) -> Preview:
    """The first `limit` rows (at most 100) of one of the tenant's datasets; NotFound otherwise."""
    ds = datasets.get_dataset(session, tenant_id, dataset_id)
    return head(datasets.file_bytes(session, ds), limit)


__all__ = ["MAX_PREVIEW_ROWS", "Preview", "head", "preview"]
