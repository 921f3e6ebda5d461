"""Where dataset bytes live: a small interface, implemented in the database (any worker reads it)."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.tables import Blob


class BlobStore(Protocol):
    """Put/get/delete bytes by key inside the caller's transaction."""

    def put(self, key: str, data: bytes) -> None:
        """Store bytes under a new key."""
        ...

    def get(self, key: str) -> bytes:
        """Read bytes; KeyError when absent."""
        ...

    def delete(self, key: str) -> None:
        """Remove bytes (no error when absent)."""
        ...


class DatabaseBlobStore:
    """Blobs in the `blobs` table, written in the same transaction as the row that points at them."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def put(self, key: str, data: bytes) -> None:
        """Store bytes under a new key."""
        self.session.add(Blob(key=key, data=data, size_bytes=len(data)))

    def get(self, key: str) -> bytes:
        """Read bytes; KeyError when absent."""
        data = self.session.scalar(select(Blob.data).where(Blob.key == key))
        if data is None:
            raise KeyError(key)
        return bytes(data)

    def delete(self, key: str) -> None:
        """Remove bytes (no error when absent)."""
        self.session.execute(delete(Blob).where(Blob.key == key))
