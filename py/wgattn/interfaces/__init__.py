"""One module per registered interface, each with the same skeleton (`InterfaceModule`):

OUTPUTS: tuple of output names, in the order the harness reports them
plan(kernel, case, source=None, entry_points=None, overrides=None) -> Plan
    lay the case's inputs out for a kernel of this interface (or WGSL `source` on it)
reference(case, dtype=np.float64) -> {output name: array}
    wgattn.reference with the interface's knobs mapped onto its keywords; dtype float32
    is the naive float32 implementation the tolerance rule measures
conformance_cases(seed=0) -> [Case]
    the grid `wgattn check` runs: awkward sizes, empty sequences, rows with no visible
    key, long rows, every knob the interface carries
case_from_reference(<the reference function's arguments>, name=...) -> Case
    the case computing that reference call on this interface (ValueError for what it cannot
    carry): how wgattn.native, wgattn.live and the benchmark build cases
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Protocol, Tuple, Union, cast

import numpy as np

from ..errors import InterfaceMismatch
from ..plan import Plan
from ..registry import Kernel, load

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["Case", "Option", "InterfaceModule", "module", "protocol_gaps", "MAX_ELEMENTS", "MAX_SCORES"]

# Keep one request within what a software adapter finishes in seconds and any adapter can bind,
# and the float64 reference's score matrices (B*H*Sq*Sk of them) within memory, Pyodide's included.
MAX_ELEMENTS = 1 << 22
MAX_SCORES = 1 << 24

# What a case's option may hold: causal (bool), pos and window counts (int), scale (float, None:
# 1/sqrt(D)), softcap (float), mask_kind / layout / causal_align (str), a varlen window (left,
# right). Each interface module checks its own options' values (a case may come from a user).
Option = Union[bool, int, float, str, None, Tuple[int, ...]]


@dataclass
class Case:
    """A conformance case: named input arrays (float32, or int32 for cu_seqlens) and the
    interface's options (causal, window, mask kind, ...)."""

    name: str
    inputs: Dict[str, np.ndarray]
    options: Dict[str, Option] = field(default_factory=dict)


class InterfaceModule(Protocol):
    """What every wgattn.interfaces.<name> module provides (the module docstring above)."""

    @property
    def OUTPUTS(self) -> Tuple[str, ...]: ...

    def plan(
        self,
        kernel: Kernel,
        case: Case,
        source: Optional[str] = None,
        entry_points: Optional[Mapping[str, str]] = None,
        overrides: Optional[Mapping[str, int]] = None,
    ) -> Plan: ...

    def reference(self, case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]: ...

    def conformance_cases(self, seed: int = 0) -> List[Case]: ...

    # Its arguments are its reference function's (they differ per interface), plus name=.
    def case_from_reference(self, *args: Any, **kwargs: Any) -> Case: ...


def protocol_gaps(mod: ModuleType) -> List[str]:
    """How `mod` falls short of InterfaceModule: a member missing, OUTPUTS not a tuple of names,
    or a function whose parameters (names, kinds, defaults) are not the protocol's."""
    gaps = []
    for name, want in vars(InterfaceModule).items():
        if name.startswith("_"):
            continue
        have = getattr(mod, name, None)
        if have is None:
            gaps.append(f"{name} is missing")
        elif isinstance(want, property):
            if not (isinstance(have, tuple) and all(isinstance(x, str) for x in have)):
                gaps.append(f"{name} must be a tuple of names, got {have!r}")
        elif not callable(have):
            gaps.append(f"{name} must be a function")
        else:
            params = list(inspect.signature(want).parameters.values())[1:]  # without self
            if {p.kind for p in params} == {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
                continue  # any parameters
            got = [(p.name, p.kind, p.default) for p in inspect.signature(have).parameters.values()]
            expected = [(p.name, p.kind, p.default) for p in params]
            if got != expected:
                gaps.append(f"{name}{inspect.signature(have)} must take {inspect.signature(want)} without self")
    return gaps


_CHECKED: Dict[str, InterfaceModule] = {}


def module(interface: str) -> InterfaceModule:
    """The module implementing `interface` (ValueError for an unknown one; InterfaceMismatch for
    a module that does not implement InterfaceModule)."""
    if interface not in _CHECKED:
        load().interface(interface)  # raises ValueError naming the registered ones
        mod = importlib.import_module(f"{__name__}.{interface}")
        gaps = protocol_gaps(mod)
        if gaps:
            raise InterfaceMismatch(f"{mod.__name__} does not implement InterfaceModule: {'; '.join(gaps)}")
        _CHECKED[interface] = cast(InterfaceModule, mod)
    return _CHECKED[interface]
