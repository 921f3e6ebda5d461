"""One page of a tenant-scoped query: the rows and the total count before limit/offset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """Rows of one page and how many rows the whole query has."""

    items: list[T]
    total: int


def count(session: Session, query: Select[*tuple[Any, ...]]) -> int:
    """How many rows a query returns."""
    return session.scalar(select(func.count()).select_from(query.subquery())) or 0


def page_of_rows(
    session: Session, query: Select[*tuple[Any, ...]], order_by: Any, limit: int, offset: int
) -> Page[Any]:
    """One page of a query's rows and the query's total, from one statement (the count as an uncorrelated
    scalar subquery, evaluated once), so that both come from the same snapshot: read as two statements, rows
    committed in between made `total` disagree with `items` (a reader of the last page saw one or two items
    fewer than `total` said). (`count(*) OVER ()` would read every matching row at full width before the
    LIMIT.) Past the last row the page is empty and the total is counted apart."""
    total = select(func.count()).select_from(query.order_by(None).subquery()).scalar_subquery()
    counted = query.add_columns(total.label("_page_total"))
    rows = session.execute(counted.order_by(*order_by).limit(limit).offset(offset)).all()
    if not rows:
        return Page([], count(session, query))
    return Page([tuple(r[:-1]) for r in rows], int(rows[0][-1]))


def page_of_scalars(session: Session, query: Select[T], order_by: Any, limit: int, offset: int) -> Page[T]:
    """One page of a single-entity query (`page_of_rows`)."""
    page = page_of_rows(session, query, order_by, limit, offset)
    return Page([r[0] for r in page.items], page.total)
