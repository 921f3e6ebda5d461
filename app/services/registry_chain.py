"""The registry's hash chains (pure): who moved which alias, deleted it or created a version, made tamper-evident.

Each registered model's events form one chain, as a tenant's decisions do (`audit_chain`): event `seq` (1, 2, 3,
...) carries `prev_hash`, the `row_hash` of the model's event `seq - 1` (`GENESIS` for the first), and its own
`row_hash`, the SHA-256 of

    neurules.registry.v1 \\n <seq> \\n <prev_hash> \\n <canonical JSON of the event's other columns>

The model's row keeps the head (`events_seq`, `events_hash`), moved in the transaction that records the event.
`app.services.registry_events` links events with these functions; `audit_verify` checks them with the audit's
`ChainChecker`. A `version_created` event carries the SHA-256 of the version's rule list (`content_sha256`, in the
body when set: events from before it was recorded hash as they did), so changing a stored rule list breaks its seal;
since migration 0010 it carries the SHA-256 of the version's metrics, input schema and provenance too
(`details_sha256`), and every event the model's name (`model_name`), so a model renamed (or two models' names
swapped) in the database no longer matches its chain. Since migration 0011 a `version_reviewed` event carries the
review itself (`decision`, `note`, `evaluation_ids`), so a review changed in the database breaks its hash. Each is in
the body only when set.
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
DETAILS_COLUMN = "details_sha256"  # migration 0010: in the body only when set
NAME_COLUMN = "model_name"  # migration 0010: in the body only when set
REVIEW_COLUMNS = ("decision", "note", "evaluation_ids")  # migration 0011 (version_reviewed): in the body when set
OPTIONAL_COLUMNS = (SEAL_COLUMN, DETAILS_COLUMN, NAME_COLUMN, *REVIEW_COLUMNS)


def canonical_event(row: Mapping[str, Any]) -> str:
    """Canonical JSON (sorted keys, compact, ASCII) of an event's columns besides id, seq and the hashes."""
    body = {name: row[name] for name in BODY_COLUMNS}
    body["at"] = timestamp(row["at"])
    for name in OPTIONAL_COLUMNS:
        if row.get(name) is not None:
            body[name] = row[name]
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _sha256_of(body: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of the canonical JSON (sorted keys, compact, ASCII) of `body`."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def version_sha256(document: Any, text: Any) -> str:
    """What a version seals: the SHA-256 (hex) of the canonical JSON (sorted keys, compact, ASCII) of
    `{"rule_list": <its rule-list document>, "text": <its rules as text>}` (what decides, and what people read)."""
    return _sha256_of({"rule_list": document, "text": text})


def details_sha256(metrics: Any, input_schema: Any, provenance: Any) -> str:
    """The seal of what a reviewer weighs a version by: the SHA-256 (hex) of the canonical JSON of
    `{"input_schema": ..., "metrics": ..., "provenance": ...}` (scores, the fields it reads, the training file)."""
    return _sha256_of({"input_schema": input_schema, "metrics": metrics, "provenance": provenance})


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
    "DETAILS_COLUMN",
    "HASH_PREFIX",
    "NAME_COLUMN",
    "OPTIONAL_COLUMNS",
    "REVIEW_COLUMNS",
    "SEAL_COLUMN",
    "canonical_event",
    "details_sha256",
    "event_hash",
    "link_event",
    "version_sha256",
]
