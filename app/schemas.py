"""Request and response bodies of the JSON API (pydantic validates; errors become 422 JSON).

The run request is generated from the interfaces' live configurations (wgattn.interfaces.config:
each field's bounds, choices and float check as data), one model per interface and set of kernel
limits (the kernels that support head_dim <= 256 get a model that says so), chosen by the kernel
the request names: the OpenAPI document then says what the server accepts field by field (no
unknown keys, every bound), and a schema-driven client reaches the run. What JSON Schema cannot
say stays in wgattn.live and the runtime, a 422 naming the fields: the size of a case (a product
of fields against a memory bound), one field against another (positions within the history; GQA,
whose heads_kv "must divide heads" in its description: as JSON Schema it is a branch per value,
which made the document 6x larger and schemathesis's generation 6x slower, and drew larger
cases that the size bound refuses instead; docs/reliability.md), the inputs' shapes (they follow
from the configuration), and what the adapter lacks.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Annotated, Any, Callable, Dict, List, Literal, Mapping, Optional, Tuple, Type, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    create_model,
    model_validator,
)

from wgattn import interfaces, live, registry, wire
from wgattn.cases import MAX_ELEMENTS
from wgattn.interfaces.config import F32_RANGES, check_field

__all__ = ["Tensor", "OutputTensor", "RunRequest", "RunResponse", "DEFAULT_KERNEL", "request_models"]

# The base64 of the largest tensor a case may have (MAX_ELEMENTS 4-byte values).
MAX_DATA_CHARS = 4 * math.ceil(4 * MAX_ELEMENTS / 3)
DEFAULT_KERNEL = "sdpa_arena.seed"  # what a request that names no kernel runs
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"  # whole quads, padded


class Tensor(BaseModel):
    """A tensor on the wire: little-endian bytes, base64 (see wgattn.wire)."""

    model_config = ConfigDict(extra="forbid")
    dtype: Literal["float32", "int32", "bool"]
    # An accepted tensor has the configuration's shape, within MAX_ELEMENTS: no extent is larger
    # (a zero-size shape with larger ones was NumPy's "cannot reshape" or "array is too big").
    shape: List[Annotated[int, Field(ge=0, le=MAX_ELEMENTS)]] = Field(max_length=8)
    data: str = Field(max_length=MAX_DATA_CHARS, pattern=_BASE64)

    def array(self, name: str):
        return wire.decode(self.model_dump(), name)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _json_schema(kind: type, md: Mapping[str, Any]) -> Dict[str, Any]:
    """What one live-configuration field takes, as JSON Schema, from its knob() metadata."""
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer", "minimum": int(md["min"]), "maximum": int(md["max"])}
    if kind is str:
        return {"type": "string", "enum": list(md["choices"])}
    if kind is float:  # the closed intervals its one check lets through
        return {"anyOf": [{"type": "number", "minimum": lo, "maximum": hi} for lo, hi in F32_RANGES[md["f32"]]]}
    raise TypeError(f"a live configuration field of type {kind.__name__} has no request type")


def _field_type(name: str, kind: type, md: Mapping[str, Any]) -> Any:
    """One field: checked by the configuration's own check (its message says what is allowed),
    described by its bounds."""

    def check(value: Any) -> Any:
        if kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema's integer: 2.0 is 2
        check_field(name, kind, value, md)
        return value

    return Annotated[Any, AfterValidator(check), WithJsonSchema(_json_schema(kind, md))]


def _description(md: Mapping[str, Any]) -> Optional[str]:
    meanings = [f"{value}: {meaning}" for value, meaning in (md.get("sentinels") or {}).items()]
    divides = f"must divide {md['divides']}" if md.get("divides") else ""
    text = "; ".join(filter(None, [md.get("hint", ""), divides, *meanings]))
    return text or None


def _known_keys(refuse: Callable[[List[str], Mapping[str, Any]], None]) -> Any:
    """A model's check that its body names only its fields, before pydantic's own "extra inputs
    are not permitted": `refuse(unknown, body)` raises a ValueError saying what is allowed."""

    @model_validator(mode="before")
    @classmethod
    def known(cls, body: Any) -> Any:
        if isinstance(body, dict):
            unknown = sorted(set(body) - set(cls.model_fields))
            if unknown:
                refuse(unknown, body)
        return body

    return known


def _config_model(iface: interfaces.Interface, limits: Mapping[str, int], suffix: str) -> Type[BaseModel]:
    """The interface's live configuration as a pydantic model: its fields, defaults and bounds,
    the bounds in the schema narrowed to the kernels' `limits` (the registry refuses past them,
    naming the kernel: that check and its message stay the runtime's)."""
    hints = typing.get_type_hints(iface.Config)
    fields: Dict[str, Any] = {}
    for f in dataclasses.fields(iface.Config):
        md = dict(f.metadata)
        if f.name in limits:
            md["max"] = min(md["max"], limits[f.name])
        shown = _json_schema(hints[f.name], md)
        field_type = Annotated[_field_type(f.name, hints[f.name], f.metadata), WithJsonSchema(shown)]
        fields[f.name] = (field_type, Field(f.default, description=_description(f.metadata)))
    return create_model(
        f"{_camel(iface.name)}{suffix}Config",
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"The seeded configuration of a {iface.name} kernel (wgattn.live).",
        __validators__={"known": _known_keys(lambda unknown, body: live.make_config(iface, body))},
        **fields,
    )


def _inputs_drawn(iface: interfaces.Interface) -> Dict[str, Tuple[str, int]]:
    """name -> (dtype, rank) of the float and bool tensors the interface's configurations draw
    (those a client may replace): the defaults' and those each choice or flag adds (sdpa_arena's
    mask, drawn for mask="padding"), in the order drawn."""
    hints = typing.get_type_hints(iface.Config)
    variants: List[Dict[str, Any]] = [{}]
    for f in dataclasses.fields(iface.Config):
        if hints[f.name] is bool:
            variants.append({f.name: not f.default})
        elif hints[f.name] is str:
            variants += [{f.name: choice} for choice in f.metadata["choices"]]
    drawn: Dict[str, Tuple[str, int]] = {}
    for variant in variants:
        try:
            tensors = iface.Config(**variant).tensors()
        except ValueError:  # a choice the defaults' other fields rule out
            continue
        drawn.update((n, (t.dtype.name, t.ndim)) for n, t in tensors.items() if t.dtype.kind in "fb")
    return drawn


@functools.lru_cache(maxsize=None)
def _tensor_model(dtype: str, rank: int) -> Type[Tensor]:
    """A Tensor of one dtype and rank (its shape's extents follow from the configuration)."""
    return create_model(
        f"Tensor{dtype.capitalize()}{rank}d",
        __base__=Tensor,
        __doc__=f"A {rank}-d {dtype} tensor on the wire: little-endian bytes, base64 (see wgattn.wire).",
        dtype=(Literal[dtype], ...),
        shape=(List[Annotated[int, Field(ge=0, le=MAX_ELEMENTS)]], Field(min_length=rank, max_length=rank)),
    )


def _inputs_model(iface: interfaces.Interface) -> Type[BaseModel]:
    drawn = _inputs_drawn(iface)
    names = list(drawn)
    fields: Dict[str, Any] = {name: (_tensor_model(*drawn[name]), None) for name in names}

    def unknown_inputs(unknown: List[str], body: Mapping[str, Any]) -> None:
        raise ValueError(f"unknown inputs {unknown}; a {iface.name} configuration draws at most {names}")

    return create_model(
        f"{_camel(iface.name)}Inputs",
        __config__=ConfigDict(extra="forbid"),
        __validators__={"known": _known_keys(unknown_inputs)},
        __doc__=f"Tensors in place of the seeded ones of a {iface.name} configuration (any of those it draws; "
        "the rest stay seeded), each in the configuration's shape: a 422 names the shape otherwise.",
        **fields,
    )


def _kernel_groups(iface: interfaces.Interface) -> Dict[str, Tuple[Tuple[str, ...], Dict[str, int]]]:
    """The interface's kernels grouped by their limits on configuration fields (registry
    `limits`, e.g. head_dim <= 256), each group named: the interface's name, with the limits
    when its kernels do not all share them (varlen_bwd and varlen_bwd_head_dim256)."""
    config_fields = {f.name for f in dataclasses.fields(iface.Config)}
    groups: Dict[Tuple[Tuple[str, int], ...], List[str]] = {}
    for k in iface.kernels():
        key = tuple(sorted((n, int(v)) for n, v in k.limits.items() if n in config_fields))
        groups.setdefault(key, []).append(k.id)
    named = {}
    for key, ids in groups.items():
        name = iface.name + ("".join(f"_{n}{v}" for n, v in key) if len(groups) > 1 else "")
        named[name] = (tuple(ids), dict(key))
    return named


def _run_model(iface: interfaces.Interface, name: str, ids: Tuple[str, ...], limits: Mapping[str, int]) -> Type[BaseModel]:
    """POST /api/run's body for the kernels `ids` of one interface that share `limits`."""
    suffix = _camel(name[len(iface.name) :])
    Config = _config_model(iface, limits, suffix)
    kernel_field: Any = Field(..., description=f"a registered {iface.name} kernel (GET /api/kernels)")
    if DEFAULT_KERNEL in ids:
        kernel_field = Field(DEFAULT_KERNEL, description=f"a registered {iface.name} kernel; default {DEFAULT_KERNEL}")
    return create_model(
        f"Run{_camel(name)}",
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"Run a {iface.name} kernel natively on `config`'s seeded inputs, or on `inputs`.",
        kernel=(Literal[ids], kernel_field),
        config=(Config, Field(default_factory=Config)),
        inputs=(Optional[_inputs_model(iface)], None),
    )


def request_models() -> Dict[str, Type[BaseModel]]:
    """model name (an interface, and its kernels' limits where they differ) -> its run request model."""
    return {
        name: _run_model(iface, name, ids, limits)
        for iface in interfaces.every()
        for name, (ids, limits) in _kernel_groups(iface).items()
    }


_MODEL_OF_KERNEL: Dict[str, str] = {
    kernel: name for iface in interfaces.every() for name, (ids, _) in _kernel_groups(iface).items() for kernel in ids
}


def _interface_of(body: Any) -> Optional[str]:
    """Which model reads this body (a dict from JSON, a model when validated again): that of the
    kernel it names (DEFAULT_KERNEL when none); None, a 422 listing the kernels, for a kernel that
    is not registered."""
    if not isinstance(body, dict):  # the default's model says what a body must be
        body = {"kernel": getattr(body, "kernel", DEFAULT_KERNEL)}
    kernel = body.get("kernel", DEFAULT_KERNEL)
    return _MODEL_OF_KERNEL.get(kernel) if isinstance(kernel, str) else None


_KERNELS: Tuple[str, ...] = tuple(registry.load().kernels)
RunRequest = Annotated[
    Union[tuple(Annotated[model, Tag(name)] for name, model in request_models().items())],
    Discriminator(
        _interface_of,
        custom_error_type="unknown_kernel",
        custom_error_message=f"kernel must be a registered kernel id, one of {list(_KERNELS)}",
    ),
]


class OutputTensor(BaseModel):
    """An output on the wire, as `Tensor` but unbounded: an output may be larger than any input
    (attn_probs_batched's probabilities: up to wgattn.cases' MAX_SCORES values)."""

    dtype: Literal["float32", "int32", "bool"]
    shape: List[int]
    data: str


class RunResponse(BaseModel):
    kernel: str
    config: Dict[str, Any] = Field(description="the configuration with every field filled in")
    adapter: Dict[str, object]
    digest: str = Field(description="sha256 of the inputs (wgattn.cases.digest)")
    outputs: Dict[str, OutputTensor]
    timings: Dict[str, float] = Field(description="milliseconds: wall, and gpu from timestamps if any")
