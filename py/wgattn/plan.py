"""A dispatch plan: everything a WebGPU runtime needs to run a kernel, and nothing runtime-specific.

Python builds the plan (buffers with their bytes, pipelines with their override constants,
workgroup counts, where the outputs are); an executor only moves bytes: `wgattn.native` with
wgpu-py, static/webgpu.js in the browser (fed by the same Python under Pyodide). Both runtimes
therefore run exactly the same dispatches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Literal, Optional, Tuple, TypedDict

import numpy as np

__all__ = ["Buffer", "Dispatch", "Output", "Plan", "PlanJson", "Usage", "BindingType"]

Usage = Literal["storage", "uniform"]
BindingType = Literal["uniform", "storage", "read-only-storage"]  # WebGPU's GPUBufferBindingType


class PlanBufferJson(TypedDict):
    """A buffer of a plan, for the page's executor (its bytes come separately)."""

    name: str
    size: int
    usage: Usage
    has_data: bool
    read: bool


class PlanDispatchJson(TypedDict):
    """A dispatch of a plan, for the page's executor."""

    label: str
    source: str
    entry_point: str
    constants: Dict[str, float]
    bindings: List[Tuple[int, str]]
    layout: List[Tuple[int, BindingType]]
    workgroups: Tuple[int, int, int]
    requires: List[str]


class PlanJson(TypedDict):
    """Plan.to_js(): what static/webgpu.js executes."""

    unavailable: str  # why the target cannot run it ("" when it can): then nothing else is in it
    buffers: List[PlanBufferJson]
    dispatches: List[PlanDispatchJson]


@dataclass
class Buffer:
    """A GPU buffer. `data` is its initial contents (None: zeros); `read` copies it back."""

    name: str
    size: int
    usage: Usage
    data: Optional[bytes] = None
    read: bool = False

    def __post_init__(self) -> None:
        if self.usage not in ("storage", "uniform"):
            raise ValueError(f"buffer {self.name}: usage must be 'storage' or 'uniform'")
        # WebGPU sizes are multiples of 4; a zero-sized binding is invalid, and a kernel that binds
        # vec4 rows (VEC4) needs 16 bytes at least: an empty tensor still gets 16.
        self.size = max(16, (int(self.size) + 3) // 4 * 4)
        if self.data is not None and len(self.data) > self.size:
            raise ValueError(f"buffer {self.name}: {len(self.data)} bytes of data exceed size {self.size}")
        # writeBuffer copies whole 4-byte words too: an odd count of float16 values (a cache of
        # head_dim 1) was a validation error. The buffer past the data is zeros either way.
        if self.data is not None and len(self.data) % 4:
            self.data = bytes(self.data) + bytes(-len(self.data) % 4)


@dataclass
class Dispatch:
    """One compute pipeline run once over `workgroups`, bound to named buffers."""

    label: str  # the kernel id (GPU labels are "<label>.<buffer>")
    source: str  # WGSL text
    entry_point: str
    constants: Dict[str, float]
    bindings: Dict[int, str]  # @binding index in @group(0) -> buffer name
    layout: List[Tuple[int, BindingType]]
    workgroups: Tuple[int, int, int]
    requires: Tuple[str, ...] = ()  # adapter features the shader needs
    trusted: bool = False  # a registered kernel that may run without runtime bounds checks
    workgroup_storage: int = 0  # bytes of var<workgroup> arrays the entry point uses
    invocations: int = 1  # invocations per workgroup (its @workgroup_size)


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
    # Why the target it was built for cannot run it (wgattn.target), "" when it can. A plan for a
    # kernel the target cannot run at all, or cannot fit, has no buffers nor dispatches.
    unavailable: str = ""

    @classmethod
    def unrunnable(cls, why: str) -> "Plan":
        """The plan of a kernel that its target cannot run: nothing but the reason."""
        return cls(buffers=[], dispatches=[], outputs=[], unavailable=why)

    def unpack(self, raw: Dict[str, bytes]) -> Dict[str, np.ndarray]:
        """Output tensors from the bytes of the buffers that were read back."""
        return {o.name: o.take(raw[o.buffer]) for o in self.outputs}

    def to_js(self) -> "PlanJson":
        """A JSON-able structure for the page's executor. Bytes are not in it: the executor asks
        for each buffer whose `has_data` is set (wgattn.page.PageSession.plan_bytes); it runs
        nothing when `unavailable` says why it cannot."""
        return {
            "unavailable": self.unavailable,
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
                    "bindings": [(i, name) for i, name in sorted(d.bindings.items())],
                    "layout": [(i, t) for i, t in d.layout],
                    "workgroups": (d.workgroups[0], d.workgroups[1], d.workgroups[2]),
                    "requires": list(d.requires),
                }
                for d in self.dispatches
            ],
        }
