"""JSON in and out of the client: orjson when it can, the standard library when it cannot.

Decoding watch events and list pages and encoding request bodies were the
client's largest CPU costs in the scale benchmarks (docs/benchmarks.md, issue
30): orjson decodes a NIMService-sized object about 2.5x and encodes it about
25x faster than :mod:`json`. The answers are the same: anything orjson refuses
(integers beyond 64 bits, ``NaN`` literals, non-string keys) goes through
:mod:`json`, which answers or raises exactly as before. Without orjson installed
everything goes through :mod:`json`.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - a declared dependency; json is the fallback
    orjson = None  # type: ignore[assignment]

__all__ = ["dumps", "loads"]


def loads(data: bytes | str) -> Any:
    """Decode one JSON document (``json.loads``'s answer and errors)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # json decides: it accepts a few things orjson does not, or raises
    return json.loads(data)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON (``json.dumps(obj, separators=(",", ":"))``'s document)."""
    if orjson is not None:
        try:
            return orjson.dumps(obj)
        except TypeError:  # orjson.JSONEncodeError: big ints, non-str keys, odd types
            pass
    return json.dumps(obj, separators=(",", ":")).encode()
