"""Canonical CBOR: the only byte format crystalmesh puts on the wire.

Every signed thing is signed over bytes produced here, so two implementations
must produce *identical* bytes for the same value. We use RFC 8949 §4.2.1
"core deterministic encoding" (cbor2's ``canonical=True``) over a deliberately
small data model:

    int (-2**64 .. 2**64-1), bytes, str, bool, None, list, dict with str keys

Floats are refused on purpose: money is integer micro-USDC and fractions are
integer parts-per-million, so no value ever depends on float formatting.

Decoding is strict. A message is accepted only if re-encoding the decoded
value gives back exactly the received bytes; that single check rejects
non-minimal integers and lengths, unsorted or duplicate map keys,
indefinite-length items and trailing bytes, on top of the explicit checks for
size, depth and types. Every failure is a :class:`CodecError`.
"""

from __future__ import annotations

import json
from typing import Any

import cbor2

__all__ = [
    "MAX_DEPTH",
    "MAX_MESSAGE_BYTES",
    "CodecError",
    "decode",
    "encode",
    "json_too_deep",
]

MAX_MESSAGE_BYTES = 256 * 1024
"""Largest encoded message accepted anywhere (gossip or request/response)."""

MAX_DEPTH = 16
"""Deepest container nesting accepted; a top-level scalar has depth 0."""

_MIN_INT = -(2**64)
_MAX_INT = 2**64 - 1


class CodecError(ValueError):
    """The value cannot be encoded, or the bytes are not canonical crystalmesh CBOR."""


def encode(value: Any) -> bytes:
    """Encode ``value`` as canonical CBOR, refusing anything outside the data model."""
    _check_value(value, depth=0)
    try:
        return cbor2.dumps(value, canonical=True)
    except Exception as error:  # e.g. a str with lone surrogates
        raise CodecError(f"cannot encode: {error}") from error


def decode(data: bytes, max_size: int = MAX_MESSAGE_BYTES) -> Any:
    """Decode one canonical CBOR item that is exactly ``data``.

    Raises :class:`CodecError` for anything larger than ``max_size`` (checked
    before parsing), not canonical, or outside the data model.
    """
    if isinstance(data, bytearray | memoryview):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise CodecError(f"expected bytes, got {type(data).__name__}")
    if len(data) > max_size:
        raise CodecError(f"oversize: {len(data)} bytes > {max_size}")
    if not data:
        raise CodecError("empty input")
    try:
        value = cbor2.loads(
            data,
            tag_hook=_refuse_tag,
            max_depth=MAX_DEPTH + 1,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            strict_hashable_types=True,
        )
    except CodecError:
        raise
    except Exception as error:  # cbor2 raises several types; callers see one
        raise CodecError(f"malformed CBOR: {error}") from error
    _check_value(value, depth=0)
    try:
        canonical = cbor2.dumps(value, canonical=True)
    except Exception as error:
        raise CodecError(f"cannot re-encode: {error}") from error
    if canonical != data:
        raise CodecError("not canonical CBOR (or trailing bytes)")
    return value


def _refuse_tag(decoder: Any, tag: Any) -> Any:
    raise CodecError(f"CBOR tags are not allowed (tag {getattr(tag, 'tag', '?')})")


def _check_value(value: Any, depth: int) -> None:
    """Raise CodecError unless ``value`` lies inside the wire data model."""
    if depth > MAX_DEPTH:
        raise CodecError(f"nesting deeper than {MAX_DEPTH}")
    # bool before int: bool is a subclass of int, and both are allowed.
    if value is None or isinstance(value, bool | str | bytes):
        return
    if isinstance(value, int):
        if not _MIN_INT <= value <= _MAX_INT:
            raise CodecError("integer outside the CBOR 64-bit range")
        return
    if isinstance(value, list):
        for item in value:
            _check_value(item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodecError(f"map keys must be str, got {type(key).__name__}")
            _check_value(item, depth + 1)
        return
    if isinstance(value, float):
        raise CodecError("floats are not allowed on the wire (use integer units)")
    raise CodecError(f"type not allowed on the wire: {type(value).__name__}")


def json_too_deep(body: bytes, limit: int) -> bool:
    """True if ``body``'s JSON arrays/objects nest deeper than ``limit`` (a linear scan, no recursion)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


class JsonRefused(ValueError):
    """JSON that is too large, nests too deep, does not parse, or is not an object."""


def load_json_object(data: bytes, what: str, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """``data`` as one JSON object within ``max_bytes`` and ``max_depth``; the depth is proved
    before ``json.loads`` recurses (py_ecc raises the recursion limit past what the C stack
    holds). Raises :class:`JsonRefused` naming ``what`` and the limit it broke."""
    if len(data) > max_bytes:
        raise JsonRefused(f"{what} is larger than {max_bytes} bytes")
    if json_too_deep(data, max_depth):
        raise JsonRefused(f"{what} nests deeper than {max_depth} levels")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise JsonRefused(f"{what} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise JsonRefused(f"{what} must be a JSON object")
    return value
