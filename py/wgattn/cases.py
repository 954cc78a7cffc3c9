"""Seeded inputs that every runtime can rebuild bit for bit, and the digest that proves it.

Each interface's live configuration (wgattn.interfaces.<name>.Config: a small dataclass of
sizes, knobs and a seed) draws float32 tensors from NumPy's legacy RandomState, whose stream is
the same in numpy 1.17 (the page's Pyodide) and 2.x (the server), so the browser and the server
run the kernel on identical inputs without shipping them. `digest()` lets both sides prove it.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Optional

import numpy as np

from .interfaces.base import MAX_ELEMENTS, MAX_SCORES

__all__ = ["digest", "MAX_ELEMENTS", "MAX_SCORES"]


def digest(inputs: Mapping[str, Optional[np.ndarray]]) -> str:
    """sha256 over the inputs' names, shapes and bytes: equal digests mean identical inputs."""
    h = hashlib.sha256()
    for name in sorted(inputs):
        t = inputs[name]
        if t is None:
            continue
        t = np.ascontiguousarray(t)
        h.update(f"{name}:{t.dtype.str}:{t.shape};".encode())
        h.update(t.tobytes())
    return h.hexdigest()
