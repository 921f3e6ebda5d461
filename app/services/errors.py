"""Domain errors: what went wrong, with a stable code, in words a user can act on.

Services raise these; they know nothing about HTTP. `app.errors` maps each kind to a status at the
edge (NotFound 404, Invalid 422, Conflict 409, TooLarge 413, Unsupported 415, Malformed 400,
Unauthenticated 401, Forbidden 403, Unavailable 503). A new failure is a new `code` on an existing kind.
"""

from __future__ import annotations

from typing import Any, ClassVar

Detail = dict[str, Any]


class DomainError(Exception):
    """An expected failure: a stable `code`, a readable `message` and per-field `details`."""

    default_code: ClassVar[str] = "error"

    def __init__(self, message: str, *, code: str | None = None, details: list[Detail] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details: list[Detail] = details or []


class NotFound(DomainError):
    """The resource does not exist for this tenant (other tenants' ids answer the same)."""

    default_code = "not_found"


class Invalid(DomainError):
    """Well-formed input whose content is invalid; the message names the field, row or record."""

    default_code = "invalid_input"

    @classmethod
    def field(cls, field: str, message: str, code: str | None = None) -> Invalid:
        """An error about one field: message `field: message`, one detail naming it."""
        return cls(f"{field}: {message}", code=code, details=[{"field": field, "message": message}])


class Conflict(DomainError):
    """The request conflicts with the resource's current state."""

    default_code = "conflict"


class TooLarge(DomainError):
    """The input is over a configured limit."""

    default_code = "payload_too_large"


class Unsupported(DomainError):
    """The input comes in a form (content type, encoding) the service does not accept."""

    default_code = "unsupported_media_type"


class Malformed(DomainError):
    """The request cannot be read at all (a broken multipart body)."""

    default_code = "bad_request"


class Unauthenticated(DomainError):
    """No credentials, or unknown / revoked ones."""

    default_code = "unauthorized"


class Forbidden(DomainError):
    """A valid key that may not do this (its scope, `key_scopes`)."""

    default_code = "forbidden"


class Unavailable(DomainError):
    """A dependency (database, broker, audit store, worker) cannot be reached; nothing was done."""

    default_code = "service_unavailable"

    def __init__(self, message: str, *, dependency: str, code: str | None = None) -> None:
        super().__init__(message, code=code or f"{dependency}_unavailable")
        self.dependency = dependency


__all__ = [
    "Conflict",
    "Detail",
    "DomainError",
    "Forbidden",
    "Invalid",
    "Malformed",
    "NotFound",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "Unsupported",
]
