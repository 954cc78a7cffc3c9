"""Tensors on the wire: {"dtype", "shape", "data"} with the little-endian bytes base64-encoded.

Used by the server's JSON API and by the page's Python alike, so both read what the other writes.
Base64 costs a third more than raw bytes but keeps one JSON body per request and response.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Dict

import numpy as np

__all__ = ["DTYPES", "encode", "decode", "jsonable"]

DTYPES = ("float32", "int32", "bool")


def encode(arr: np.ndarray) -> Dict[str, object]:
    arr = np.asarray(arr)
    if arr.dtype.name not in DTYPES:
        raise ValueError(f"cannot send dtype {arr.dtype}; allowed: {list(DTYPES)}")
    data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": base64.b64encode(data).decode("ascii")}


def decode(obj: Dict[str, object], name: str = "tensor") -> np.ndarray:
    """The array, or ValueError saying what is wrong with the encoding."""
    dtype, shape, data = obj.get("dtype"), obj.get("shape"), obj.get("data")
    if dtype not in DTYPES:
        raise ValueError(f"{name}: dtype must be one of {list(DTYPES)}, got {dtype!r}")
    if not isinstance(shape, (list, tuple)) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"{name}: shape must be a list of non-negative integers, got {shape!r}")
    try:
        raw = base64.b64decode(str(data), validate=True)
    except Exception:
        raise ValueError(f"{name}: data must be base64") from None
    itemsize = np.dtype(dtype).itemsize
    count = int(np.prod(shape)) if shape else 1
    if len(raw) != count * itemsize:
        raise ValueError(f"{name}: shape {list(shape)} of {dtype} needs {count * itemsize} bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


def jsonable(obj):
    """`obj` with every non-finite float as a string ("inf", "-inf", "nan"): JSON has none, and
    an empty row's lse or a failed case's error is exactly such a value. A dataclass is written
    as its fields (the shape wgattn.typescript declares for it)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj
