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


def page_of_scalars(session: Session, query: Select[T], order_by: Any, limit: int, offset: int) -> Page[T]:
    """One page of a single-entity query."""
    rows = session.scalars(query.order_by(*order_by).limit(limit).offset(offset)).all()
    return Page(list(rows), count(session, query))
