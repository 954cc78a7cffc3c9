"""Live configurations: one dataclass per interface, each field with its bounds as data.

A live check (the page, POST /api/run, the tests) names a kernel and a configuration: a few sizes,
knobs and a seed from which every runtime draws identical inputs (NumPy's legacy RandomState,
whose stream is the same in numpy 1.17 under Pyodide and in 2.x on the server). Each interface's
`Config` is a dataclass (the page's Pyodide has no pydantic) whose fields are made by `knob()`:

    heads_kv: int = knob(0, 0, 256, sentinels={0: "as many as heads"})

carries in `dataclasses.fields(cls)[i].metadata` its bounds (`min`, `max`), `choices`,
`sentinels` (values that mean something special) and a `hint`; float fields name the one numeric
check they go through (wgattn.reference.check_scale or check_softcap; F32_RANGES says what each
lets through); a field that must divide another (GQA's key/value heads divide the query heads)
names it in `divides`. `LiveConfig` checks every field against that data when the object is made
(a ValueError naming the field and what is allowed), and `schema()` hands the same data to the
page's form and to whoever derives a request model from it. Rules between fields that are not
data (the size of a case) live in each class's `check()`.
"""

from __future__ import annotations

import numbers
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import reference

__all__ = ["knob", "LiveConfig", "FieldSchema", "F32_CHECKS", "F32_RANGES", "LABELS", "check_field", "check_divides"]

# The one numeric check per kind of float field: what the kernel receives is a normal float32.
F32_CHECKS: Dict[str, Callable[[Any], float]] = {
    "scale": lambda x: reference.check_scale(x, 1),
    "softcap": reference.check_softcap,
}
# The values each check lets through, as closed intervals: a scale's magnitude is a normal float32
# of either sign; a softcap is 0 (off) or a positive normal float32. A request model states them.
F32_RANGES: Dict[str, Tuple[Tuple[float, float], ...]] = {
    "scale": ((-reference.F32_MAX, -reference.F32_MIN), (reference.F32_MIN, reference.F32_MAX)),
    "softcap": ((0.0, 0.0), (reference.F32_MIN, reference.F32_MAX)),
}
# The form's words for the fields that interfaces share (a field not named here shows its name).
LABELS = {
    "batch": "batch size",
    "heads": "query heads",
    "heads_kv": "key/value heads",
    "history": "keys in the history",
    "positions": "query positions",
    "seq_q": "query length",
    "seq_k": "key length",
    "head_dim": "head dimension",
    "layout": "memory layout",
    "mask": "mask",
    "window": "window (keys)",
    "window_left": "window: keys to the left",
    "window_right": "window: keys to the right",
    "causal": "causal",
    "causal_align": "causal alignment",
    "softcap": "score softcap",
    "padding": "ragged lengths",
    "scale": "score scale",
    "seed": "random seed",
    "new_tokens": "new tokens per sequence",
    "seq_len": "cached tokens (first sequence)",
    "block_size": "cache block size (tokens)",
    "alibi": "ALiBi slopes",
    "sinks": "attention sinks",
    "ragged": "sequences of other lengths",
}
_TYPES: Dict[type, Literal["int", "float", "bool", "str"]] = {int: "int", float: "float", bool: "bool", str: "str"}


def knob(
    default: Any,
    lo: Optional[float] = None,
    hi: Optional[float] = None,
    *,
    choices: Optional[Sequence[str]] = None,
    sentinels: Optional[Mapping[Any, str]] = None,
    hint: str = "",
    f32: str = "",
    divides: str = "",
) -> Any:
    """A configuration field: its default, its bounds [lo, hi] (ints), its `choices` (strings),
    `sentinels` ({value: meaning}), a `hint`, for a float the name of its numeric check
    (F32_CHECKS: "scale" or "softcap", whose bounds it takes: F32_RANGES' ends), and for an int
    the field it `divides` (a sentinel 0 divides everything: it means "as many as" that field)."""
    if f32:
        lo, hi = F32_RANGES[f32][0][0], F32_RANGES[f32][-1][1]
    metadata = {
        "min": lo,
        "max": hi,
        "choices": list(choices) if choices is not None else None,
        "sentinels": {str(k): v for k, v in (sentinels or {}).items()},
        "hint": hint,
        "f32": f32,
        "divides": divides,
    }
    return field(default=default, metadata=metadata)


class _Field(typing.TypedDict):
    name: str
    type: Literal["int", "float", "bool", "str"]
    default: Any


class FieldSchema(_Field, total=False):
    """One field of a live configuration, as the page's form shows it (wgattn.live.schema)."""

    label: str  # the field in words, for the form (LABELS; the name when it has none)
    min: float
    max: float
    choices: List[str]
    sentinels: Dict[str, str]  # value (as text) -> what it means
    hint: str


def check_field(name: str, kind: type, value: Any, md: Mapping[str, Any]) -> None:
    """One field (its type and knob() metadata) against a value: a ValueError naming it and what
    is allowed. The one check of a field, wherever a configuration is read."""
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
    elif kind is int:
        lo, hi = md["min"], md["max"]
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= int(value) <= hi:
            raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    elif kind is float:
        F32_CHECKS[md["f32"]](value)
    elif kind is str:
        if not isinstance(value, str) or value not in md["choices"]:
            raise ValueError(f"{name} must be one of {md['choices']}, got {value!r}")


def check_divides(name: str, value: Any, md: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """A field that divides another (knob's `divides`; 0, a sentinel, divides everything): a
    ValueError naming both. GQA is the one such rule: a key/value head serves a whole group of
    query heads."""
    other = md.get("divides")
    if other and value and config[other] % value:
        raise ValueError(f"{other} ({config[other]}) must be a multiple of {name} ({value}) for grouped-query attention")


@dataclass
class LiveConfig:
    """The base of every interface's live configuration (no fields of its own)."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            check_field(f.name, hints[f.name], getattr(self, f.name), f.metadata)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for f in fields(self):
            check_divides(f.name, values[f.name], f.metadata, values)
        self.check()

    def check(self) -> None:
        """Rules between fields (a ValueError naming them); none by default."""

    @property
    def heads(self) -> int:  # every configuration has query heads: the pictures pick one
        raise NotImplementedError

    def tensors(self) -> Dict[str, np.ndarray]:
        """The tensors drawn from the seed (a client may replace the float and bool ones)."""
        raise NotImplementedError

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)

    @classmethod
    def schema(cls) -> List[FieldSchema]:
        """[{name, type, default, min?, max?, choices?, sentinels?, hint?}] of every field."""
        hints = typing.get_type_hints(cls)
        rows: List[FieldSchema] = []
        for f in fields(cls):
            md = f.metadata
            row: FieldSchema = {
                "name": f.name,
                "label": LABELS.get(f.name, f.name),
                "type": _TYPES[hints[f.name]],
                "default": None if f.default is MISSING else f.default,
            }
            for key in ("min", "max", "choices"):
                if md.get(key) is not None:
                    row[key] = md[key]
            if md.get("sentinels"):
                row["sentinels"] = dict(md["sentinels"])
            if md.get("hint"):
                row["hint"] = md["hint"]
            rows.append(row)
        return rows
