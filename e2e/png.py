"""Decode a PNG (8-bit RGB or RGBA, as Chromium's screenshots are) with zlib and struct alone, to
check that a screenshot shows something: no image library is needed in the test environment."""

import struct
import zlib
from typing import List, Set, Tuple


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(data: bytes) -> Tuple[int, int, List[bytes], int]:
    """(width, height, rows of raw pixel bytes, bytes per pixel)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6) or body[12] != 0:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {body[12]}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            line[x] = (line[x] + (0, a, b, (a + b) // 2, _paeth(a, b, c))[f]) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def colours(data: bytes) -> Set[Tuple[int, ...]]:
    """The distinct RGB colours of a PNG."""
    _, _, rows, bpp = decode(data)
    return {tuple(row[x : x + 3]) for row in rows for x in range(0, len(row), bpp)}
