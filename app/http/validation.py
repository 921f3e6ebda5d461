"""Pydantic's validation errors in plain words: `parameters.options.lr: must be a number`."""

from __future__ import annotations

from typing import Any

TYPE_WORDS = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "int_parsing_size": "must be an integer of at most 4300 digits",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_unicode": "must be a string of valid Unicode",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "missing": "required",
    "extra_forbidden": "not a known field",
    "none_required": "must be null",
}
BOUND_WORDS = {
    "greater_than": ("gt", "must be greater than {}"),
    "greater_than_equal": ("ge", "must be at least {}"),
    "less_than": ("lt", "must be less than {}"),
    "less_than_equal": ("le", "must be at most {}"),
    "too_short": ("min_length", "must have at least {} item(s)"),
    "too_long": ("max_length", "must have at most {} item(s)"),
    "string_too_short": ("min_length", "must have at least {} character(s)"),
    "string_too_long": ("max_length", "must have at most {} character(s)"),
}
CUSTOM_PREFIXES = ("Value error, ", "Assertion failed, ")


def plain_message(error: dict[str, Any]) -> str:
    """What is wrong with one field, without pydantic's wording ("Input should be ...")."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind in TYPE_WORDS:
        return TYPE_WORDS[kind]
    if kind in BOUND_WORDS:
        key, template = BOUND_WORDS[kind]
        if key in ctx:
            return template.format(ctx[key])
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', 'the documented values')}"
    msg = str(error.get("msg", "invalid"))
    for prefix in CUSTOM_PREFIXES:
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg
