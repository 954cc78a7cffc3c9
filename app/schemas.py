"""Request and response bodies of the JSON API (pydantic validates; errors become 422 JSON)."""

import math
from typing import Annotated, Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from wgattn import live, wire
from wgattn.cases import MAX_ELEMENTS

# A name the client chooses (a config field, an input): every real one is a short identifier.
Name = Annotated[str, StringConstraints(max_length=64)]
# The base64 of the largest tensor a case may have (MAX_ELEMENTS 4-byte values).
MAX_DATA_CHARS = 4 * math.ceil(4 * MAX_ELEMENTS / 3)

_CONFIG_DOC = (
    "The seeded configuration, by the kernel's interface (wgattn.live; unknown fields and fields "
    "the interface has no knob for are a 422): "
    + "; ".join(f"{name}: " + ", ".join(f"{f['name']}={f['default']!r}" for f in rows) for name, rows in live.schema().items())
)


class Tensor(BaseModel):
    """A tensor on the wire: little-endian bytes, base64 (see wgattn.wire)."""

    model_config = ConfigDict(extra="forbid")
    dtype: Literal["float32", "int32", "bool"]
    shape: List[int] = Field(max_length=8)
    data: str = Field(max_length=MAX_DATA_CHARS)

    def array(self, name: str):
        return wire.decode(self.model_dump(), name)


class RunRequest(BaseModel):
    """Run `kernel` (any registered one) natively on `config`'s seeded inputs, or on `inputs`."""

    model_config = ConfigDict(extra="forbid")
    kernel: str = Field("sdpa_arena.seed", max_length=200, description="a registered kernel id (GET /api/kernels)")
    config: Dict[Name, Any] = Field(default_factory=dict, max_length=32, description=_CONFIG_DOC)
    inputs: Optional[Dict[Name, Tensor]] = Field(
        None,
        max_length=8,
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
