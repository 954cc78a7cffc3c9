"""Live configurations: one dataclass per interface, each field with its bounds as data.

A live check (the page, POST /api/run, the tests) names a kernel and a configuration: a few sizes,
knobs and a seed from which every runtime draws identical inputs (NumPy's legacy RandomState,
whose stream is the same in numpy 1.17 under Pyodide and in 2.x on the server). Each interface's
`Config` is a dataclass (the page's Pyodide has no pydantic) whose fields are made by `knob()`:

    heads_kv: int = knob(0, 0, 256, sentinels={0: "as many as heads"})

carries in `dataclasses.fields(cls)[i].metadata` its bounds (`min`, `max`), `choices`,
`sentinels` (values that mean something special) and a `hint`; float fields name the one numeric
check they go through (wgattn.reference.check_scale or check_softcap). `LiveConfig` checks every
field against that data when the object is made (a ValueError naming the field and what is
allowed), and `schema()` hands the same data to the page's form and to whoever derives a request
model from it. Cross-field rules (GQA, sizes) live in each class's `check()`.
"""

from __future__ import annotations

import numbers
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence

import numpy as np

from .. import reference

__all__ = ["knob", "LiveConfig", "FieldSchema", "F32_CHECKS", "LABELS"]

# The one numeric check per kind of float field: what the kernel receives is a normal float32.
F32_CHECKS: Dict[str, Callable[[Any], float]] = {
    "scale": lambda x: reference.check_scale(x, 1),
    "softcap": reference.check_softcap,
}
_F32_BOUNDS = {"scale": (-reference.F32_MAX, reference.F32_MAX), "softcap": (0.0, reference.F32_MAX)}
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
) -> Any:
    """A configuration field: its default, its bounds [lo, hi] (ints), its `choices` (strings),
    `sentinels` ({value: meaning}), a `hint`, and for a float the name of its numeric check
    (F32_CHECKS: "scale" or "softcap", whose bounds it takes)."""
    if f32:
        lo, hi = _F32_BOUNDS[f32]
    metadata = {
        "min": lo,
        "max": hi,
        "choices": list(choices) if choices is not None else None,
        "sentinels": {str(k): v for k, v in (sentinels or {}).items()},
        "hint": hint,
        "f32": f32,
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


def _check_field(name: str, kind: type, value: Any, md: Mapping[str, Any]) -> None:
    """One field against its metadata: a ValueError naming it and what is allowed."""
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


@dataclass
class LiveConfig:
    """The base of every interface's live configuration (no fields of its own)."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            _check_field(f.name, hints[f.name], getattr(self, f.name), f.metadata)
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
