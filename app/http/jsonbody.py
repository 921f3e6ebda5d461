"""JSON on the hot path: orjson, with the standard library as the fallback for what orjson refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(payload: Any) -> bytes:
    """Compact JSON of `payload`; an int beyond 64 bits (a record may echo one) goes through `json`."""
    try:
        return orjson.dumps(payload, default=str)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), default=str).encode()
