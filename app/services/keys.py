"""API keys: generation and hashing (pure). Keys are shown once and stored as SHA-256 only."""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_PREFIX = "nrk"


def generate_key() -> tuple[str, str]:
    """A new key and its lookup prefix: `nrk_<prefix>_<secret>`."""
    prefix = secrets.token_hex(6)
    return f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}", prefix


def hash_key(key: str) -> str:
    """Hex SHA-256 of the key (keys are 256-bit random, so a fast hash is enough)."""
    return hashlib.sha256(key.encode()).hexdigest()


def split_prefix(key: str) -> str | None:
    """The lookup prefix of a well-formed key, else None."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or len(parts[1]) != 12:
        return None
    return parts[1]


def matches(key: str, stored_hash: str) -> bool:
    """Constant-time check of a presented key against its stored hash."""
    return hmac.compare_digest(hash_key(key), stored_hash)
