"""gzip-compressed uploads (`.csv.gz`), decompressed with the upload limit applied to the decompressed size."""

from __future__ import annotations

import zlib

from app.services.errors import Invalid, TooLarge

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20


def looks_gzipped(data: bytes) -> bool:
    """Whether the bytes start like a gzip stream (no text file does: 0x8b is not valid UTF-8 there)."""
    return data[:2] == GZIP_MAGIC


def gunzip(data: bytes, limit: int, what: str = "file", shown_limit: int | None = None) -> bytes:
    """The decompressed bytes (every member of a multi-member file); TooLarge past `limit` decompressed bytes (its
    message names `shown_limit` when given: the configured limit of a body that has room for multipart framing).

    Decompresses in bounded steps, so a small file that would expand to gigabytes (a "gzip bomb") is
    refused after `limit` bytes, never held in memory whole.
    """
    out = bytearray()
    rest = data
    too_large = TooLarge(
        f"{what}: decompresses to more than {limit if shown_limit is None else shown_limit} bytes; the upload limit "
        "applies to its decompressed size"
    )
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while rest:
                out += d.decompress(rest, CHUNK)
                if len(out) > limit:
                    raise too_large
                rest = d.unconsumed_tail
            out += d.flush()
        except zlib.error as e:
            raise Invalid.field(
                what, f"not a valid gzip file ({e}); send the CSV itself or gzip it again", code="csv_bad_gzip"
            ) from None
        if not d.eof:
            raise Invalid.field(what, "the gzip file is truncated; send the whole file", code="csv_bad_gzip")
        rest = d.unused_data.lstrip(b"\x00")  # members may follow; gzip pads some archives with zeros
    if len(out) > limit:
        raise too_large
    return bytes(out)
