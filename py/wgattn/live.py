"""Live checks: one seeded configuration per family of interfaces, turned into the same case
everywhere (the page's Pyodide, the server, the tests), so the browser, the reference and the
native run see identical inputs without shipping them.

    family      interfaces                           configuration
    sdpa        sdpa_arena                           wgattn.cases.SdpaCase (mask kinds, layouts)
    varlen      varlen_fwd, flash_fwd, varlen_bwd     VarlenConfig (packed sequences, GQA, causal
                                                      alignment, window, softcap, ragged lengths)
    probs       attn_probs, attn_probs_batched        ProbsConfig (key history, query positions,
                                                      GQA, window, scale)

`build(kernel_id, config)` validates a configuration (a dict, as a URL or the JSON API gives it)
for the kernel's interface and returns a `Live` run: the seeded tensors, the interface's case (f16
kernels judged on f16-rounded inputs) and its digest. Every problem is a ValueError that names the
field and what is allowed. `schema()` describes the fields, for the page's form.

Inputs come from NumPy's legacy RandomState, whose stream is the same in numpy 1.17 (Pyodide)
and 2.x (the server).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import reference, registry
from .cases import MAX_ELEMENTS, MAX_SCORES, SdpaCase, digest
from .conformance import expected, judged_case
from .interfaces import Case, module
from .registry import Kernel

__all__ = [
    "VarlenConfig",
    "ProbsConfig",
    "Live",
    "FAMILIES",
    "build",
    "config_class",
    "make_config",
    "seeded_tensors",
    "check_tensors",
    "schema",
]

_CAUSAL_ALIGNS = ("bottom_right", "top_left")


def _int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")


def _bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


def _real(name: str, value: object, lo: float, allow_zero: bool = True) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < lo
        or (not allow_zero and value == 0)
    ):
        raise ValueError(f"{name} must be a finite number >= {lo}{'' if allow_zero else ', not 0'}, got {value!r}")


@dataclass
class VarlenConfig:
    """`batch` sequences of seq_q queries and seq_k keys packed token-major ([total, heads, D]);
    with `padding` each sequence keeps a random number of them (0 included: empty sequences and
    rows with no key), sequence 0 at least half."""

    batch: int = 2
    heads: int = 4
    heads_kv: int = 0  # key/value heads (GQA); 0: as many as heads
    seq_q: int = 128
    seq_k: int = 128
    head_dim: int = 64
    causal: bool = True
    causal_align: str = "bottom_right"  # or top_left; the same when a sequence has len_q == len_k
    window_left: int = -1  # keys i - left .. i + right visible; -1 unbounded
    window_right: int = -1
    softcap: float = 0.0  # scores become softcap * tanh(s / softcap); 0 off
    padding: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _int("batch", self.batch, 1, 256)
        _int("heads", self.heads, 1, 256)
        _int("heads_kv", self.heads_kv, 0, 256)
        _int("seq_q", self.seq_q, 1, 65536)
        _int("seq_k", self.seq_k, 1, 65536)
        _int("head_dim", self.head_dim, 1, 1024)
        _bool("causal", self.causal)
        if self.causal_align not in _CAUSAL_ALIGNS:
            raise ValueError(f"causal_align must be one of {list(_CAUSAL_ALIGNS)}, got {self.causal_align!r}")
        _int("window_left", self.window_left, -1, 2**31 - 1)
        _int("window_right", self.window_right, -1, 2**31 - 1)
        _real("softcap", self.softcap, 0.0)
        _bool("padding", self.padding)
        _int("seed", self.seed, 0, 2**32 - 1)
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of heads_kv ({self.heads_kv}) for grouped-query attention")
        elements = self.batch * self.head_dim * (4 * self.heads * self.seq_q + 4 * self.kv_heads * self.seq_k)
        if elements > MAX_ELEMENTS:
            raise ValueError(f"case too large: {elements} elements in q, k, v, out and their gradients; at most {MAX_ELEMENTS}")
        scores = self.batch * self.heads * self.seq_q * self.seq_k
        if scores > MAX_SCORES:
            raise ValueError(f"case too large: batch*heads*seq_q*seq_k = {scores} scores; at most {MAX_SCORES}")

    @property
    def kv_heads(self) -> int:
        return self.heads_kv or self.heads

    def tensors(self) -> Dict[str, np.ndarray]:
        """Sequence lengths (as cu_seqlens), then q, k, v and dout, standard normal float32."""
        rs = np.random.RandomState(self.seed)
        lens_q = np.full(self.batch, self.seq_q)
        lens_k = np.full(self.batch, self.seq_k)
        if self.padding:
            lens_q = rs.randint(0, self.seq_q + 1, size=self.batch)
            lens_k = rs.randint(0, self.seq_k + 1, size=self.batch)
            lens_q[0] = max(lens_q[0], (self.seq_q + 1) // 2)
            lens_k[0] = max(lens_k[0], (self.seq_k + 1) // 2)
        cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
        total_q, total_k, d = int(cu_q[-1]), int(cu_k[-1]), self.head_dim
        q = rs.standard_normal((total_q, self.heads, d)).astype(np.float32)
        k = rs.standard_normal((total_k, self.kv_heads, d)).astype(np.float32)
        v = rs.standard_normal((total_k, self.kv_heads, d)).astype(np.float32)
        dout = rs.standard_normal((total_q, self.heads, d)).astype(np.float32)
        return {"q": q, "k": k, "v": v, "dout": dout, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}

    def options(self) -> Dict[str, object]:
        return {
            "causal": self.causal,
            "window": (self.window_left, self.window_right),
            "softcap": float(self.softcap),
            "causal_align": self.causal_align,
        }

    def case(self, interface: str, t: Mapping[str, np.ndarray], name: str) -> Case:
        mod = module(interface)
        args = (t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"])
        if interface == "varlen_bwd":
            # What a float32 forward hands the backward: the float64 forward rounded to float32.
            out, lse = reference.varlen_attention_fwd(*args, dtype=np.float64, **self.options())
            return mod.case_from_reference(
                t["dout"],
                t["q"],
                t["k"],
                t["v"],
                out.astype(np.float32),
                lse.astype(np.float32),
                t["cu_seqlens_q"],
                t["cu_seqlens_k"],
                name=name,
                **self.options(),
            )
        return mod.case_from_reference(*args, name=name, **self.options())

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


@dataclass
class ProbsConfig:
    """Probabilities of the last `positions` positions of a key history of `history` keys, each
    over the keys up to it (and within `window` keys of it)."""

    heads: int = 8
    heads_kv: int = 2  # key heads (GQA)
    history: int = 256
    head_dim: int = 64
    positions: int = 64  # query positions: the last ones of the history
    window: int = 0  # visible keys counting the current one; 0 unbounded
    scale: float = 1.0  # scores are scale * q.k (q is drawn with 1/sqrt(D) already)
    seed: int = 0

    def __post_init__(self) -> None:
        _int("heads", self.heads, 1, 256)
        _int("heads_kv", self.heads_kv, 1, 256)
        _int("history", self.history, 1, 1 << 20)
        _int("head_dim", self.head_dim, 1, 1024)
        _int("positions", self.positions, 1, self.history)
        _int("window", self.window, 0, 2**31 - 1)
        _real("scale", self.scale, -math.inf, allow_zero=False)
        _int("seed", self.seed, 0, 2**32 - 1)
        if self.heads % self.heads_kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of heads_kv ({self.heads_kv}) for grouped-query attention")
        elements = self.head_dim * (self.positions * self.heads + self.history * self.heads_kv)
        scores = self.positions * self.heads * self.history
        if elements > MAX_ELEMENTS or scores > MAX_SCORES:
            raise ValueError(
                f"case too large: {elements} elements in q and k_hist (at most {MAX_ELEMENTS}), "
                f"{scores} probabilities (at most {MAX_SCORES})"
            )

    def tensors(self) -> Dict[str, np.ndarray]:
        """q [positions, heads, D] (scores about N(0, 1) at scale 1), k_hist [history, heads_kv, D]."""
        rs = np.random.RandomState(self.seed)
        d = self.head_dim
        q = (rs.standard_normal((self.positions, self.heads, d)) / np.sqrt(d)).astype(np.float32)
        k = rs.standard_normal((self.history, self.heads_kv, d)).astype(np.float32)
        return {"q": q, "k_hist": k}

    def case(self, interface: str, t: Mapping[str, np.ndarray], name: str) -> Case:
        mod = module(interface)
        positions = np.arange(self.history - self.positions, self.history)
        if interface == "attn_probs":
            if self.positions != 1:
                raise ValueError(f"attn_probs computes one position per dispatch: positions must be 1, got {self.positions}")
            return mod.case_from_reference(
                t["q"][0], t["k_hist"], pos=int(positions[0]), window=self.window, scale=self.scale, name=name
            )
        return mod.case_from_reference(t["q"], t["k_hist"], positions, window=self.window, scale=self.scale, name=name)

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)


def _draw(cfg) -> Dict[str, np.ndarray]:
    """The tensors a configuration draws from its seed (SdpaCase's mask only with mask "padding")."""
    drawn = cfg.inputs() if isinstance(cfg, SdpaCase) else cfg.tensors()
    return {k: v for k, v in drawn.items() if v is not None}


def _case(cfg, interface: str, tensors: Mapping[str, np.ndarray], name: str) -> Case:
    """The interface's case of a configuration on these tensors."""
    if isinstance(cfg, SdpaCase):
        case = cfg.to_case(dict(tensors))
        case.name = name
        return case
    return cfg.case(interface, tensors, name)


# interface -> (configuration class, fields the user may set there, defaults differing from the
# class's). Fields outside the list keep their defaults: the interface has no such knob.
# interface: (configuration class, the fields it sets (None: all), defaults that differ from the class's)
FAMILIES: Dict[str, Tuple[type, Optional[Tuple[str, ...]], Dict[str, object]]] = {
    "sdpa_arena": (SdpaCase, None, {}),
    "varlen_fwd": (
        VarlenConfig,
        ("batch", "heads", "seq_q", "seq_k", "head_dim", "causal", "causal_align", "padding", "seed"),
        {"causal_align": "top_left"},
    ),
    "flash_fwd": (VarlenConfig, None, {}),
    "varlen_bwd": (VarlenConfig, None, {}),
    "attn_probs": (ProbsConfig, ("heads", "heads_kv", "history", "head_dim", "window", "seed"), {"positions": 1}),
    "attn_probs_batched": (ProbsConfig, None, {}),
}


def config_class(interface: str):
    """(class, settable field names, defaults) of an interface's live configuration."""
    try:
        cls, settable, defaults = FAMILIES[interface]
    except KeyError:
        raise ValueError(f"interface {interface!r} has no live configuration; live interfaces: {sorted(FAMILIES)}") from None
    names = [f.name for f in fields(cls)]
    return cls, list(settable or names), dict(defaults)


@dataclass
class Live:
    """One live run: the kernel, its configuration, the seeded tensors and the judged case."""

    kernel: Kernel
    config: Union[SdpaCase, VarlenConfig, ProbsConfig]  # a configuration class of FAMILIES
    tensors: Dict[str, np.ndarray]
    case: Case

    @property
    def digest(self) -> str:
        """sha256 of the drawn tensors: equal digests mean the page and the server drew the same
        inputs (derived ones, such as the backward's out and lse, follow from them)."""
        return digest(self.tensors)

    def plan(self):
        return module(self.kernel.interface.name).plan(self.kernel, self.case)

    def expected(self):
        """(float64 reference, naive run in the kernel's precision) of every output."""
        return expected(self.kernel, self.case)


def make_config(interface: str, config: Optional[Mapping[str, object]]):
    """The configuration object for `interface` from a dict (ValueError naming a bad field)."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be an object, got {type(config).__name__}")
    cls, settable, defaults = config_class(interface)
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        # A whole configuration of another family (e.g. sdpa_arena's for a flash_fwd kernel): say so
        others = sorted(
            {name for name, (c, _, _) in FAMILIES.items() if c is not cls and set(config) <= {f.name for f in fields(c)}}
        )
        which = f"; they are fields of the configuration of {', '.join(others)}, not of {interface}" if others else ""
        raise ValueError(f"unknown config field(s) {unknown} for {interface}{which}; its fields: {settable}")
    values = dict(defaults)
    for name, value in config.items():
        if name not in settable and value != values.get(name, getattr(cls, name, None)):
            raise ValueError(f"{name} does not apply to {interface} (it has no such knob); its fields: {settable}")
        values[name] = value
    try:
        return cls(**values)
    except TypeError as exc:  # a field given with a wrong type the dataclass could not take
        raise ValueError(str(exc)) from None


def build(
    kernel_id: str, config: Optional[Mapping[str, object]] = None, tensors: Optional[Mapping[str, np.ndarray]] = None
) -> Live:
    """The live run of `kernel_id` on `config` (a dict); `tensors` replaces seeded ones (same names,
    shapes and dtypes: `check_tensors`)."""
    kernel = registry.load().kernel(kernel_id)
    interface = kernel.interface.name
    cfg = make_config(interface, config)
    drawn = _draw(cfg)
    if tensors is not None:
        drawn = check_tensors(drawn, tensors)
    case = _case(cfg, interface, drawn, f"live-{kernel.id}")
    return Live(kernel, cfg, drawn, judged_case(kernel, case))


def seeded_tensors(kernel_id: str, config: Optional[Mapping[str, object]] = None) -> Dict[str, np.ndarray]:
    """The tensors a configuration draws (a client may replace the float and bool ones)."""
    return _draw(make_config(registry.load().kernel(kernel_id).interface.name, config))


def check_tensors(seeded: Mapping[str, np.ndarray], given: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Seeded tensors with the given float/bool ones in their place: same shapes and dtypes, finite.
    Integer tensors (sequence offsets) follow from the configuration and cannot be replaced."""
    allowed = sorted(n for n, t in seeded.items() if t.dtype.kind in "fb")
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown inputs {unknown}; this configuration takes {allowed}")
    out = dict(seeded)
    for name in allowed:
        if name not in given:
            raise ValueError(f"inputs must include {name!r} (shape {list(seeded[name].shape)})")
        arr, want = np.asarray(given[name]), seeded[name]
        if arr.dtype != want.dtype or arr.shape != want.shape:
            raise ValueError(
                f"input {name!r} must be {want.dtype} of shape {list(want.shape)}, got {arr.dtype} {list(arr.shape)}"
            )
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ValueError(f"input {name!r} has non-finite values")
        out[name] = arr
    return out


_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}
_CHOICES = {"causal_align": list(_CAUSAL_ALIGNS), "layout": ["bhsd", "bshd"], "mask": ["none", "causal", "padding", "window"]}


def schema() -> Dict[str, List[Dict[str, object]]]:
    """interface -> [{name, type, default, choices?}] of the fields the user may set there."""
    import typing

    out = {}
    for interface in FAMILIES:
        cls, settable, defaults = config_class(interface)
        hints = typing.get_type_hints(cls)
        rows = []
        for f in fields(cls):
            if f.name not in settable:
                continue
            row = {"name": f.name, "type": _TYPES[hints[f.name]], "default": defaults.get(f.name, f.default)}
            if f.name in _CHOICES:
                row["choices"] = _CHOICES[f.name]
            rows.append(row)
        out[interface] = rows
    return out
