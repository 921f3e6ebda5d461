"""What an API key may do: `full` (everything its tenant may) or `predict` (ask for decisions, nothing else).

A backend that calls the service per record needs only decisions; a `predict` key stolen from it cannot read
datasets, train, move `production`, or read the audit trail. The check is on the request's method and path, so
it holds for every route, the direct prediction route included.
"""

from __future__ import annotations

import re
from typing import Final

from app.services.errors import Forbidden, Invalid

FULL: Final = "full"
PREDICT: Final = "predict"
SCOPES: Final = (FULL, PREDICT)
_DECISION_PATH = re.compile(r"/v1/models/[^/]+/predict(?:\.csv)?")


def allows(scope: str, method: str, path: str) -> bool:
    """Whether a key of `scope` may call `method path` (the request's path, or an OpenAPI path template)."""
    return scope == FULL or (scope == PREDICT and method.upper() == "POST" and bool(_DECISION_PATH.fullmatch(path)))


def check_scope(scope: str) -> str:
    """The scope, when it is one of SCOPES; Invalid naming them otherwise."""
    if scope not in SCOPES:
        raise Invalid.field("scope", f"must be one of {', '.join(SCOPES)} (got {scope!r})", code="invalid_scope")
    return scope


def require(scope: str, method: str, path: str) -> None:
    """Forbidden when a key of `scope` may not call `method path`."""
    if allows(scope, method, path):
        return
    what = (
        "it may only ask for decisions (POST /v1/models/{ref}/predict and /predict.csv)"
        if scope == PREDICT
        else "it may not do this"
    )
    raise Forbidden(f"this API key has scope {scope!r}: {what}; use a key with scope 'full'", code="key_scope")


# A restricted key's lookup prefix is stored marked: a release that does not know scopes (the one before them, run
# on this database after a rollback or during a rolling upgrade) finds no such key and refuses it (401), instead
# of taking it for a key that may do everything. This release looks both spellings up.
RESTRICTED_MARK: Final = "r-"


def stored_prefix(prefix: str, scope: str) -> str:
    """The prefix as stored for a key of `scope`: marked unless the key is full."""
    return prefix if scope == FULL else f"{RESTRICTED_MARK}{prefix}"


def scope_of(stored: str, recorded: str) -> str:
    """A stored key's scope: its recorded one, and `predict` at least when its prefix is marked (a row that lost its
    scope column to a downgrade and got it back as `full` stays restricted)."""
    return PREDICT if stored.startswith(RESTRICTED_MARK) and recorded == FULL else recorded
