"""Request and response bodies of the JSON API (pydantic validates; errors become 422 JSON)."""
from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wgattn import wire
from wgattn.cases import SdpaCase


class Tensor(BaseModel):
    """A tensor on the wire: little-endian bytes, base64 (see wgattn.wire)."""

    model_config = ConfigDict(extra="forbid")
    dtype: Literal["float32", "int32", "bool"]
    shape: List[int]
    data: str

    def array(self, name: str):
        return wire.decode(self.model_dump(), name)


class RunRequest(BaseModel):
    """Run `kernel` natively on `config`'s seeded inputs, or on `inputs` when given."""

    model_config = ConfigDict(extra="forbid")
    kernel: str = Field("sdpa_arena.seed", max_length=200, description="a registered kernel id")
    config: SdpaCase = Field(default_factory=SdpaCase)
    inputs: Optional[Dict[str, Tensor]] = Field(
        None, description="q, k, v (and mask for padding) in config's shapes; default: seeded")

    @field_validator("inputs")
    @classmethod
    def _known_inputs(cls, value):
        if value is not None:
            unknown = set(value) - {"q", "k", "v", "mask"}
            if unknown:
                raise ValueError(f"unknown inputs {sorted(unknown)}; allowed: q, k, v, mask")
        return value


class RunResponse(BaseModel):
    kernel: str
    config: SdpaCase
    adapter: Dict[str, object]
    digest: str = Field(description="sha256 of the inputs (wgattn.cases.digest)")
    outputs: Dict[str, Tensor]
    timings: Dict[str, float] = Field(description="milliseconds: wall, and gpu from timestamps if any")
