"""Live checks: one seeded configuration per interface (its `Config`, wgattn.interfaces.config),
turned into the same case everywhere (the page's Pyodide, the server, the tests), so the browser,
the reference and the native run see identical inputs without shipping them.

`build(kernel_id, config, tensors)` checks a configuration (a dict, as a URL or the JSON API gives it) for
the kernel's interface and returns a `Live` run: the seeded tensors, the interface's case (f16
kernels judged on f16-rounded inputs) and its digest. Every problem is a ValueError that names the
field and what is allowed. `schema()` describes every interface's fields, with their bounds, for
the page's form (and for anyone deriving a request model).

Inputs come from NumPy's legacy RandomState, whose stream is the same in numpy 1.17 (Pyodide)
and 2.x (the server).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Type, TypedDict, TypeVar

import numpy as np

from . import interfaces, registry
from .cases import digest
from .conformance import expected, judged_case
from .interfaces import Case, Interface, LiveConfig
from .interfaces.config import FieldSchema
from .plan import Plan
from .registry import Kernel
from .target import Target

C = TypeVar("C", bound=LiveConfig)

__all__ = ["Live", "build", "make_config", "config_of", "seeded_tensors", "check_tensors", "schema", "catalogue"]


@dataclass
class Live:
    """One live run: the kernel, its configuration, the seeded tensors and the judged case."""

    kernel: Kernel
    config: LiveConfig  # an instance of the interface's Config
    tensors: Dict[str, np.ndarray]
    case: Case

    @property
    def interface(self) -> Interface:
        return interfaces.of(self.kernel)

    @property
    def digest(self) -> str:
        """sha256 of the drawn tensors: equal digests mean the page and the server drew the same
        inputs (derived ones, such as the backward's out and lse, follow from them)."""
        return digest(self.tensors)

    def plan(self, target: Target) -> Plan:
        """The plan of this run on `target` (its `unavailable` says when the target cannot run it)."""
        return self.interface.plan(self.kernel, self.case, target)

    def expected(self):
        """(float64 reference, naive run in the kernel's precision) of every output."""
        return expected(self.kernel, self.case)


def make_config(interface: Interface, config: Optional[Mapping[str, object]]) -> LiveConfig:
    """The configuration object of `interface` from a dict (ValueError naming a bad field)."""
    cls = interface.Config
    if isinstance(config, Mapping):
        unknown = sorted(set(config) - {f.name for f in fields(cls)})
        # A whole configuration of another interface (e.g. sdpa_arena's for a flash_fwd kernel): say so
        others = sorted(
            i.name for i in interfaces.every() if i.Config is not cls and set(config) <= {f.name for f in fields(i.Config)}
        )
        if unknown and others:
            raise ValueError(
                f"unknown config field(s) {unknown} for {interface.name}; they are fields of the configuration of "
                f"{', '.join(others)}, not of {interface.name}; its fields: {[f.name for f in fields(cls)]}"
            )
    return config_of(cls, config, interface.name)


def config_of(cls: Type[C], config: Optional[Mapping[str, object]], what: str) -> C:
    """A configuration of dataclass `cls` (a LiveConfig) from a dict, None giving its defaults;
    ValueError naming a bad or unknown field of `what`."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be an object, got {type(config).__name__}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"unknown config field(s) {unknown} for {what}; its fields: {known}")
    try:
        return cls(**config)
    except TypeError as exc:  # a field given with a wrong type the dataclass could not take
        raise ValueError(str(exc)) from None


def build(
    kernel_id: str, config: Optional[Mapping[str, object]] = None, tensors: Optional[Mapping[str, np.ndarray]] = None
) -> Live:
    """The live run of `kernel_id` on `config` (a dict); `tensors` replaces seeded ones (same names,
    shapes and dtypes: `check_tensors`)."""
    kernel = registry.load().kernel(kernel_id)
    iface = interfaces.of(kernel)
    cfg = make_config(iface, config)
    drawn = cfg.tensors()
    if tensors is not None:
        drawn = check_tensors(drawn, tensors)
    case = iface.live_case(cfg, drawn, f"live-{kernel.id}")
    return Live(kernel, cfg, drawn, judged_case(kernel, case))


def seeded_tensors(kernel_id: str, config: Optional[Mapping[str, object]] = None) -> Dict[str, np.ndarray]:
    """The tensors a configuration draws (a client may replace the float and bool ones)."""
    return make_config(interfaces.of(registry.load().kernel(kernel_id)), config).tensors()


def check_tensors(seeded: Mapping[str, np.ndarray], given: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Seeded tensors with the given float/bool ones in their place (any of them: those not given
    stay seeded): same shapes and dtypes, finite. Integer tensors (sequence offsets) follow from
    the configuration and cannot be replaced."""
    allowed = sorted(n for n, t in seeded.items() if t.dtype.kind in "fb")
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown inputs {unknown}; this configuration takes {allowed}")
    out = dict(seeded)
    for name in given:
        arr, want = np.asarray(given[name]), seeded[name]
        if arr.dtype != want.dtype or arr.shape != want.shape:
            raise ValueError(
                f"input {name!r} must be {want.dtype} of shape {list(want.shape)}, got {arr.dtype} {list(arr.shape)}"
            )
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ValueError(f"input {name!r} has non-finite values")
        out[name] = arr
    return out


def schema() -> Dict[str, List[FieldSchema]]:
    """interface -> [{name, type, default, min?, max?, choices?, sentinels?, hint?}]: every field
    of its live configuration, with its bounds (the page's form shows them)."""
    return {i.name: i.Config.schema() for i in interfaces.every()}


class InterfaceInfo(TypedDict):
    summary: str
    reference: str  # the wgattn.reference function it computes
    conventions: Dict[str, str]


class KernelInfo(TypedDict):
    id: str
    interface: str
    summary: str
    requires: List[str]  # adapter features
    precision: str  # "f32" | "f16"
    wgsl: str  # its WGSL file under /shaders/ (a template several kernels may share)


class Catalogue(TypedDict):
    """GET /api/kernels: every interface and kernel, and each interface's live configuration."""

    interfaces: Dict[str, InterfaceInfo]
    kernels: List[KernelInfo]
    configs: Dict[str, List[FieldSchema]]  # the live configuration's fields per interface (POST /api/run's config)


def _served(path: Path) -> str:
    """A kernel's WGSL file as the server serves it under /shaders/ ("" when it is elsewhere)."""
    try:
        return path.relative_to(registry.shader_dir()).as_posix()
    except ValueError:
        return ""


def catalogue() -> Catalogue:
    """Every registered interface and kernel (shaders/manifest.json) and the live configurations."""
    reg = registry.load()
    return {
        "interfaces": {
            name: {"summary": a.summary, "reference": a.reference, "conventions": dict(a.conventions)}
            for name, a in reg.abis.items()
        },
        "kernels": [
            {
                "id": k.id,
                "interface": k.interface,
                "summary": k.summary,
                "requires": list(k.requires),
                "precision": k.precision,
                "wgsl": _served(k.path),
            }
            for k in reg.kernels.values()
        ],
        "configs": schema(),
    }
