"""The registry's hash chains (pure): who moved which alias, deleted it or created a version, made tamper-evident.

Each registered model's events form one chain, as a tenant's decisions do (`audit_chain`): event `seq` (1, 2, 3,
...) carries `prev_hash`, the `row_hash` of the model's event `seq - 1` (`GENESIS` for the first), and its own
`row_hash`, the SHA-256 of

    neurules.registry.v1 \\n <seq> \\n <prev_hash> \\n <canonical JSON of the event's other columns>

The model's row keeps the head (`events_seq`, `events_hash`), moved in the transaction that records the event.
`app.services.registry_events` links events with these functions; `audit_verify` checks them with the audit's
`ChainChecker`. A `version_created` event carries the SHA-256 of the version's rule list (`content_sha256`, in the
body when set: events from before it was recorded hash as they did), so changing a stored rule list breaks its seal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from app.services.audit_chain import Link, row_hash, timestamp

HASH_PREFIX = "neurules.registry.v1"
BODY_COLUMNS = (
    "action",
    "alias",
    "api_key_id",
    "at",
    "from_version",
    "job_id",
    "registered_model_id",
    "tenant_id",
    "to_version",
)


SEAL_COLUMN = "content_sha256"  # in the body only when set (migration 0009 added it)


def canonical_event(row: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys, compact, ASCII) of an event's columns besides id, seq and the hashes."""
    body = {name: row[name] for name in BODY_COLUMNS}
    body["at"] = timestamp(row["at"])
    if row.get(SEAL_COLUMN) is not None:
        body[SEAL_COLUMN] = row[SEAL_COLUMN]
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def version_sha256(document: Any, text: Any) -> str:
    """What a version seals: the SHA-256 (hex) of the canonical JSON (sorted keys, compact, ASCII) of
    `{"rule_list": <its rule-list document>, "text": <its rules as text>}` (what decides, and what people read)."""
    body = json.dumps({"rule_list": document, "text": text}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def event_hash(row: Mapping[str, Any]) -> str:
    """The hash an event's content and links give (what its `row_hash` must be)."""
    return row_hash(row["seq"], row["prev_hash"], canonical_event(row), HASH_PREFIX)


def link_event(row: dict[str, Any], head: Link) -> Link:
    """Give `row` its seq, prev_hash and row_hash after `head`; the new head."""
    row["seq"], row["prev_hash"] = head.seq + 1, head.row_hash
    row["row_hash"] = event_hash(row)
    return Link(row["seq"], row["row_hash"])


__all__ = [
    "BODY_COLUMNS",
    "HASH_PREFIX",
    "SEAL_COLUMN",
    "canonical_event",
    "event_hash",
    "link_event",
    "version_sha256",
]
