"""Seeded test cases that every runtime can rebuild bit for bit.

A case is a small dataclass of sizes, knobs and a seed; `inputs()` draws float32 tensors from
NumPy's legacy RandomState, whose stream is the same in numpy 1.17 (the page's Pyodide) and 2.x
(the server), so the browser and the server run the kernel on identical inputs without shipping
them. `digest()` lets both sides prove it.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Dict, Optional

import numpy as np

from .interfaces import Case, sdpa_arena
from .plan import Plan
from .registry import Kernel

__all__ = ["SdpaCase", "digest", "MAX_ELEMENTS", "MAX_SCORES"]

# Keep one request within what a software adapter finishes in seconds and any adapter can bind,
# and the float64 reference's score matrices (B*H*Sq*Sk of them) within memory, Pyodide's included.
MAX_ELEMENTS = 1 << 22
MAX_SCORES = 1 << 24
LAYOUTS = ("bhsd", "bshd")


@dataclass
class SdpaCase:
    """A `sdpa_arena` case: q [B,H,Sq,D] (or [B,Sq,H,D]), k/v with Sk keys, one mask kind."""

    batch: int = 1
    heads: int = 4
    seq_q: int = 128
    seq_k: int = 128
    head_dim: int = 64
    layout: str = "bhsd"
    mask: str = "causal"  # none | causal | padding | window
    window: int = 16      # mask "window": keys i - window .. i
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "seq_q", "seq_k", "head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65536:
                raise ValueError(f"{name} must be an integer in 1..65536, got {value!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        if self.mask not in sdpa_arena.MASK_KINDS:
            raise ValueError(f"mask must be one of {list(sdpa_arena.MASK_KINDS)}, got {self.mask!r}")
        if not isinstance(self.window, int) or not 0 <= self.window < 2**31:
            raise ValueError(f"window must be an integer >= 0, got {self.window!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be an integer in 0..2**32-1, got {self.seed!r}")
        elements = self.batch * self.heads * self.head_dim * (2 * self.seq_q + 2 * self.seq_k)
        if self.mask == "padding":
            elements += self.batch * self.seq_k
        if elements > MAX_ELEMENTS:
            raise ValueError(
                f"case too large: {elements} elements in q, k, v and out; at most {MAX_ELEMENTS}")
        scores = self.batch * self.heads * self.seq_q * self.seq_k
        if scores > MAX_SCORES:
            raise ValueError(f"case too large: batch*heads*seq_q*seq_k = {scores} scores; at most {MAX_SCORES}")

    def shape(self, seq: int):
        if self.layout == "bhsd":
            return (self.batch, self.heads, seq, self.head_dim)
        return (self.batch, seq, self.heads, self.head_dim)

    def inputs(self) -> Dict[str, Optional[np.ndarray]]:
        """q, k, v (float32, standard normal) and, for mask "padding", a key mask [B,1,1,Sk]
        keeping a random prefix of each sequence (batch 1 onwards may keep none: empty rows)."""
        rs = np.random.RandomState(self.seed)
        q = rs.standard_normal(self.shape(self.seq_q)).astype(np.float32)
        k = rs.standard_normal(self.shape(self.seq_k)).astype(np.float32)
        v = rs.standard_normal(self.shape(self.seq_k)).astype(np.float32)
        mask = None
        if self.mask == "padding":
            keep = rs.randint(0, self.seq_k + 1, size=self.batch)
            keep[0] = max(keep[0], (self.seq_k + 1) // 2)
            mask = np.arange(self.seq_k)[None, :] < keep[:, None]
            mask = mask.reshape(self.batch, 1, 1, self.seq_k)
        return {"q": q, "k": k, "v": v, "mask": mask}

    @property
    def name(self) -> str:
        extra = f"{self.window}" if self.mask == "window" else ""
        return (f"{self.mask}{extra}-{self.layout}-b{self.batch}h{self.heads}-"
                f"{self.seq_q}x{self.seq_k}-d{self.head_dim}-s{self.seed}")

    def to_case(self, inputs: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Case:
        """This configuration as a conformance Case of the sdpa_arena interface."""
        inputs = self.inputs() if inputs is None else inputs
        return Case(self.name, {k: v for k, v in inputs.items() if v is not None},
                    {"mask_kind": self.mask, "window": self.window, "scale": None, "layout": self.layout})

    def plan(self, kernel: Kernel, inputs: Dict[str, Optional[np.ndarray]],
             source: Optional[str] = None) -> Plan:
        return sdpa_arena.plan(kernel, self.to_case(inputs), source=source)

    def reference(self, inputs: Dict[str, Optional[np.ndarray]], dtype=np.float64) -> Dict[str, np.ndarray]:
        return sdpa_arena.reference(self.to_case(inputs), dtype=dtype)

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


def digest(inputs: Dict[str, Optional[np.ndarray]]) -> str:
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
