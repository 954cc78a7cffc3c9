"""Request and response bodies of the JSON API (pydantic validates; errors become 422 JSON)."""

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from wgattn import live, wire

_CONFIG_DOC = (
    "The seeded configuration, by the kernel's interface (wgattn.live; unknown fields and fields "
    "the interface has no knob for are a 422): "
    + "; ".join(f"{name}: " + ", ".join(f"{f['name']}={f['default']!r}" for f in rows) for name, rows in live.schema().items())
)


class Tensor(BaseModel):
    """A tensor on the wire: little-endian bytes, base64 (see wgattn.wire)."""

    model_config = ConfigDict(extra="forbid")
    dtype: Literal["float32", "int32", "bool"]
    shape: List[int]
    data: str

    def array(self, name: str):
        return wire.decode(self.model_dump(), name)


class RunRequest(BaseModel):
    """Run `kernel` (any registered one) natively on `config`'s seeded inputs, or on `inputs`."""

    model_config = ConfigDict(extra="forbid")
    kernel: str = Field("sdpa_arena.seed", max_length=200, description="a registered kernel id (GET /api/kernels)")
    config: Dict[str, Any] = Field(default_factory=dict, description=_CONFIG_DOC)
    inputs: Optional[Dict[str, Tensor]] = Field(
        None,
        description="the float tensors the configuration draws, in its shapes (sdpa_arena: q, k, v "
        "and mask for padding; varlen: q, k, v, dout; probs: q, k_hist); default: seeded",
    )


class RunResponse(BaseModel):
    kernel: str
    config: Dict[str, Any] = Field(description="the configuration with every field filled in")
    adapter: Dict[str, object]
    digest: str = Field(description="sha256 of the inputs (wgattn.cases.digest)")
    outputs: Dict[str, Tensor]
    timings: Dict[str, float] = Field(description="milliseconds: wall, and gpu from timestamps if any")
