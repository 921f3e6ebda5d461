"""Verify the audit hash chains in the database, streaming: pages of rows in `seq` order, memory bounded.

A tenant's chain is read in keyset pages (`seq > last ORDER BY seq LIMIT page`, on the unique
`(tenant_id, seq)` index) and fed to `ChainChecker`, which stops at the first broken link. The chain
head is read before the rows (a tail shorter than it was deleted) and after them (rows beyond it
were not appended by the writer); rows and head commit together, so writers appending during the
check raise no false alarm.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services import audit_read
from app.services.audit_chain import ChainBreak, ChainChecker, Link
from app.services.errors import NotFound
from app.tables import AuditChainHead, AuditRecord, Tenant

PAGE_ROWS = 5000


@dataclass(frozen=True)
class ChainReport:
    """The verification of one tenant's chain: rows checked, the head, the first break (None: intact)."""

    tenant_id: str
    rows_checked: int
    head: Link | None
    first_break: ChainBreak | None

    @property
    def intact(self) -> bool:
        """Whether every row links and the tail matches the head."""
        return self.first_break is None


def read_head(session: Session, tenant_id: str) -> Link | None:
    """The tenant's chain head, or None when it has none."""
    row = session.execute(
        select(AuditChainHead.seq, AuditChainHead.row_hash).where(AuditChainHead.tenant_id == tenant_id)
    ).first()
    return None if row is None else Link(row.seq, row.row_hash)


def chain_pages(session: Session, tenant_id: str, page_rows: int = PAGE_ROWS) -> Iterator[list[dict[str, Any]]]:
    """The tenant's audit rows as dicts (`audit_read.decode`: a row that does not decode is kept, marked
    `unreadable`), in `seq` order, `page_rows` at a time. The first page has no lower bound: a row with seq 0
    or below (none the writer makes) is read too, and the checker names it."""
    after: int | None = None
    parse_time = audit_read.time_parser(session.get_bind().dialect)
    while True:
        q = select(*audit_read.COLUMNS).where(AuditRecord.tenant_id == tenant_id)
        if after is not None:
            q = q.where(AuditRecord.seq > after)
        rows = session.execute(q.order_by(AuditRecord.seq).limit(page_rows)).mappings()
        page = [audit_read.decode(m, parse_time) for m in rows]
        if not page:
            return
        yield page
        if page[-1]["seq"] is None:  # the checker stops at that row
            return
        after = page[-1]["seq"]


def verify_tenant(session: Session, tenant_id: str, page_rows: int = PAGE_ROWS) -> ChainReport:
    """Check one tenant's chain from its first row to its head; the first broken link, if any."""
    head_before = read_head(session, tenant_id)
    checker = ChainChecker()
    for page in chain_pages(session, tenant_id, page_rows):
        if not all(checker.feed(row) for row in page):
            break
    head_after = read_head(session, tenant_id)
    broken = checker.finish(head_before, head_after)
    if broken is not None and broken.row_id is None and broken.kind == "beyond_head" and broken.seq is not None:
        broken = ChainBreak(broken.kind, broken.message, _row_id(session, tenant_id, broken.seq), broken.seq)
    return ChainReport(tenant_id, checker.rows_checked, head_after, broken)


def _row_id(session: Session, tenant_id: str, seq: int) -> int | None:
    q = select(AuditRecord.id).where(AuditRecord.tenant_id == tenant_id, AuditRecord.seq == seq)
    return session.execute(q).scalar()


def resolve_tenant(session: Session, tenant: str) -> str:
    """The id of a tenant given by name or id (also one deleted since, if its chain remains); NotFound otherwise."""
    found = session.scalar(select(Tenant.id).where((Tenant.name == tenant) | (Tenant.id == tenant)))
    if found is not None:
        return found
    if tenant in chain_tenants(session):
        return tenant
    raise NotFound(f"no tenant {tenant!r} and no audit chain for it")


def chain_tenants(session: Session) -> list[str]:
    """Every tenant with a chain head or audit rows, sorted."""
    heads = set(session.scalars(select(AuditChainHead.tenant_id)))
    rows = set(session.scalars(select(AuditRecord.tenant_id).distinct()))
    return sorted(heads | rows)


def audited_tenants(session: Session) -> list[str]:
    """Every tenant that exists or has a chain, sorted: a tenant whose whole chain was deleted is listed with 0 rows
    (against the head recorded outside the database, that is the deletion), never left out of the report."""
    return sorted(set(chain_tenants(session)) | set(session.scalars(select(Tenant.id))))


def verify_all(session: Session, page_rows: int = PAGE_ROWS) -> Iterator[ChainReport]:
    """Check every tenant's chain, one report per tenant."""
    for tenant_id in audited_tenants(session):
        yield verify_tenant(session, tenant_id, page_rows)
