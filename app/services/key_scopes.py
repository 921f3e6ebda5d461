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
    if not allows(scope, method, path):
        raise Forbidden(
            f"this API key has scope {scope!r}: it may only ask for decisions (POST /v1/models/{{ref}}/predict and "
            "/predict.csv); use a key with scope 'full' for anything else",
            code="key_scope",
        )
