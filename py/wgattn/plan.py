"""A dispatch plan: everything a WebGPU runtime needs to run a kernel, and nothing runtime-specific.

Python builds the plan (buffers with their bytes, pipelines with their override constants,
workgroup counts, where the outputs are); an executor only moves bytes: `wgattn.native` with
wgpu-py, static/webgpu.js in the browser (fed by the same Python under Pyodide). Both runtimes
therefore run exactly the same dispatches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

__all__ = ["Buffer", "Dispatch", "Output", "Plan"]


@dataclass
class Buffer:
    """A GPU buffer. `data` is its initial contents (None: zeros); `read` copies it back."""

    name: str
    size: int
    usage: str  # "storage" or "uniform"
    data: Optional[bytes] = None
    read: bool = False

    def __post_init__(self) -> None:
        if self.usage not in ("storage", "uniform"):
            raise ValueError(f"buffer {self.name}: usage must be 'storage' or 'uniform'")
        # WebGPU sizes are multiples of 4; a zero-sized binding is invalid, so keep at least 4.
        self.size = max(4, (int(self.size) + 3) // 4 * 4)
        if self.data is not None and len(self.data) > self.size:
            raise ValueError(f"buffer {self.name}: {len(self.data)} bytes of data exceed size {self.size}")


@dataclass
class Dispatch:
    """One compute pipeline run once over `workgroups`, bound to named buffers."""

    label: str  # the kernel id (GPU labels are "<label>.<buffer>")
    source: str  # WGSL text
    entry_point: str
    constants: Dict[str, float]
    bindings: Dict[int, str]  # @binding index in @group(0) -> buffer name
    layout: List[Tuple[int, str]]  # (binding, "uniform" | "storage" | "read-only-storage")
    workgroups: Tuple[int, int, int]
    requires: Tuple[str, ...] = ()  # adapter features the shader needs
    trusted: bool = False  # a registered kernel that may run without runtime bounds checks


@dataclass
class Output:
    """A tensor read back from a buffer: float32 elements from `offset`, reshaped to `shape`."""

    name: str
    buffer: str
    offset: int
    shape: Tuple[int, ...]
    dtype: str = "float32"

    def take(self, raw: bytes) -> np.ndarray:
        count = int(np.prod(self.shape)) if self.shape else 1
        arr = np.frombuffer(raw, dtype=self.dtype, count=count, offset=4 * self.offset)
        return arr.reshape(self.shape).copy()


@dataclass
class Plan:
    """Buffers, dispatches in order, and the outputs to unpack afterwards."""

    buffers: List[Buffer]
    dispatches: List[Dispatch]
    outputs: List[Output]
    meta: Dict[str, object] = field(default_factory=dict)

    def unpack(self, raw: Dict[str, bytes]) -> Dict[str, np.ndarray]:
        """Output tensors from the bytes of the buffers that were read back."""
        return {o.name: o.take(raw[o.buffer]) for o in self.outputs}

    def to_js(self) -> Dict[str, object]:
        """A JSON-able structure for the page's executor. Bytes are not in it: the executor asks
        for each buffer whose `has_data` is set (wgattn.page.PageSession.plan_bytes)."""
        return {
            "buffers": [
                {"name": b.name, "size": b.size, "usage": b.usage, "has_data": b.data is not None, "read": b.read}
                for b in self.buffers
            ],
            "dispatches": [
                {
                    "label": d.label,
                    "source": d.source,
                    "entry_point": d.entry_point,
                    "constants": dict(d.constants),
                    "bindings": [[i, name] for i, name in sorted(d.bindings.items())],
                    "layout": [[i, t] for i, t in d.layout],
                    "workgroups": list(d.workgroups),
                    "requires": list(d.requires),
                }
                for d in self.dispatches
            ],
        }
