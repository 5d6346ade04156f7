"""Avro binary encoding primitives shared by Avro container files and Hudi log blocks."""
from __future__ import annotations


def encode_long(value: int) -> bytes:
    """Avro's variable-length zig-zag encoding of a long (also used for ints)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_bytes(raw: bytes) -> bytes:
    """Avro bytes/string: the length as a long, then the bytes."""
    return encode_long(len(raw)) + raw
