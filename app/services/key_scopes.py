"""What an API key may do: `full` (everything its tenant may), `predict` (ask for decisions, nothing else) or
`read` (read everything, change nothing).

A backend that calls the service per record needs only decisions; a `predict` key stolen from it cannot read
datasets, train, move `production`, or read the audit trail. A reviewer, auditor or regulator needs to read
versions, evaluations and the audit trail (and verify it) without being able to change them, train, move an
alias or make decisions (each decision writes an audit row): a `read` key answers GET and HEAD only. The check
is on the request's method and path, so it holds for every route, the direct prediction route included.
"""

from __future__ import annotations

import re
from typing import Final

from app.services.errors import Forbidden, Invalid

FULL: Final = "full"
PREDICT: Final = "predict"
READ: Final = "read"
SCOPES: Final = (FULL, PREDICT, READ)
_DECISION_PATH = re.compile(r"/v1/models/[^/]+/predict(?:\.csv)?")
_READ_METHODS: Final = frozenset({"GET", "HEAD"})  # no operation answering these writes anything


def allows(scope: str, method: str, path: str) -> bool:
    """Whether a key of `scope` may call `method path` (the request's path, or an OpenAPI path template)."""
    if scope == FULL:
        return True
    if scope == PREDICT:
        return method.upper() == "POST" and bool(_DECISION_PATH.fullmatch(path))
    return scope == READ and method.upper() in _READ_METHODS


def check_scope(scope: str) -> str:
    """The scope, when it is one of SCOPES; Invalid naming them otherwise."""
    if scope not in SCOPES:
        raise Invalid.field("scope", f"must be one of {', '.join(SCOPES)} (got {scope!r})", code="invalid_scope")
    return scope


def require(scope: str, method: str, path: str) -> None:
    """Forbidden when a key of `scope` may not call `method path`."""
    if allows(scope, method, path):
        return
    what = {
        PREDICT: "it may only ask for decisions (POST /v1/models/{ref}/predict and /predict.csv)",
        READ: "it may only read (GET and HEAD): it changes nothing and makes no decisions (each writes an audit row)",
    }.get(scope, "it may not do this")
    raise Forbidden(f"this API key has scope {scope!r}: {what}; use a key with scope 'full'", code="key_scope")


# A restricted key's lookup prefix is stored marked, by scope: a release that does not know scopes (the one before
# them, run on this database after a rollback or during a rolling upgrade) finds no such key and refuses it (401),
# instead of taking it for a key that may do everything. This release looks every spelling up.
RESTRICTED_MARK: Final = "r-"  # predict keys (the first restricted scope)
_MARKS: Final = {PREDICT: RESTRICTED_MARK, READ: "ro-"}  # key prefixes are hex: no plain prefix starts so


def stored_prefix(prefix: str, scope: str) -> str:
    """The prefix as stored for a key of `scope`: marked unless the key is full."""
    return prefix if scope == FULL else f"{_MARKS[scope]}{prefix}"


def stored_prefixes(prefix: str) -> tuple[str, ...]:
    """Every spelling a key with this prefix may be stored under (one per scope)."""
    return (prefix, *(mark + prefix for mark in _MARKS.values()))


def scope_of(stored: str, recorded: str) -> str:
    """A stored key's scope: its recorded one, and its mark's when the prefix is marked and the record says `full`
    (a row that lost its scope column to a downgrade and got it back as `full` stays as restricted as it was)."""
    if recorded == FULL:
        return next((scope for scope, mark in _MARKS.items() if stored.startswith(mark)), FULL)
    return recorded
