"""Regenerate ``protobuf_types.json``: Kubernetes' protobuf field numbers, read from kubectl.

Every Go program built with ``k8s.io/api`` carries the gzipped
``FileDescriptorProto`` of each ``generated.proto`` it links (gogo-protobuf
registers them at start-up). kubectl links all built-in API groups, so its binary
holds the exact wire layout of every built-in kind it can send. This tool finds
those descriptors, parses them with :mod:`protobuf`'s wire reader and writes a
compact table: message name -> fields (JSON name, number, wire type, repeated,
message type) plus which messages are map entries.

    python -m localcluster.protobuf_gen "$(command -v kubectl)"

The table is data, not code: field numbers are part of Kubernetes' wire API and
never change once released, so a table from kubectl v1.32 stays right for later
servers (newer fields are simply absent from it and dropped when decoded).
"""

from __future__ import annotations

import io
import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any

from .protobuf import fields

OUT = Path(__file__).with_name("protobuf_types.json")
_GZIP = re.compile(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00")

# FieldDescriptorProto.Type values this table keeps (others do not occur in k8s.io/api).
_TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
    7: "fixed32", 8: "bool", 9: "string", 11: "message", 12: "bytes", 13: "uint32",
    14: "enum", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
}  # fmt: skip


def _descriptors(binary: bytes) -> list[bytes]:
    """Every gzipped FileDescriptorProto of a k8s ``generated.proto`` in the binary."""
    found: list[bytes] = []
    for match in _GZIP.finditer(binary):
        try:
            start = match.start()
            data = zlib.decompressobj(31).decompress(binary[start : start + (1 << 21)])
        except zlib.error:
            continue
        if b"generated.proto" in data[:200]:
            found.append(data)
    return found


def _message(raw: bytes, prefix: str, out: dict[str, Any], maps: dict[str, list[Any]]) -> None:
    parts = fields(raw)
    name = next(v.decode() for n, _w, v in parts if n == 1)
    full = f"{prefix}.{name}"
    table: list[list[Any]] = []
    is_map = False
    for number, _wire, value in parts:
        if number == 2:
            f = {n: v for n, _w, v in fields(value)}
            type_name = f.get(6, b"").decode().lstrip(".") or None
            table.append([f[1].decode(), f[3], _TYPES[f[5]], f.get(4) == 3, type_name])
        elif number == 3:
            _message(value, full, out, maps)
        elif number == 7:
            is_map = any(n == 7 and v for n, _w, v in fields(value))
    if is_map:
        by_name = {row[0]: row for row in table}
        maps[full] = [by_name["key"][2], by_name["value"][2], by_name["value"][4]]
    else:
        out[full] = table


def generate(binary: bytes) -> dict[str, Any]:
    messages: dict[str, Any] = {}
    maps: dict[str, list[Any]] = {}
    files: list[str] = []
    for data in _descriptors(binary):
        parts = fields(data)
        package = next(v.decode() for n, _w, v in parts if n == 2)
        files.append(next(v.decode() for n, _w, v in parts if n == 1))
        for number, _wire, value in parts:
            if number == 4:
                _message(value, package, messages, maps)
    return {
        "files": sorted(files),
        "messages": dict(sorted(messages.items())),
        "maps": dict(sorted(maps.items())),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m localcluster.protobuf_gen PATH-TO-KUBECTL")
        return 2
    table = generate(Path(args[0]).read_bytes())
    if not table["messages"]:
        print(f"{args[0]}: no Kubernetes protobuf descriptors found in this binary")
        return 1
    buf = io.StringIO()
    json.dump(table, buf, separators=(",", ":"))
    OUT.write_text(buf.getvalue() + "\n")
    print(f"wrote {OUT}: {len(table['messages'])} messages from {len(table['files'])} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
