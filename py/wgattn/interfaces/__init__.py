"""One module per registered interface, each with the same skeleton:

OUTPUTS: tuple of output names, in the order the harness reports them
plan(kernel, case, source=None, entry_points=None, overrides=None) -> Plan
    lay the case's inputs out for a kernel of this interface (or WGSL `source` on it)
reference(case, dtype=np.float64) -> {output name: array}
    wgattn.reference with the interface's knobs mapped onto its keywords; dtype float32
    is the naive float32 implementation the tolerance rule measures
conformance_cases(seed=0) -> [Case]
    the grid `wgattn check` runs: awkward sizes, empty sequences, rows with no visible
    key, long rows, every knob the interface carries
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict

import numpy as np

__all__ = ["Case", "module", "MAX_ELEMENTS", "MAX_SCORES"]

# Keep one request within what a software adapter finishes in seconds and any adapter can bind,
# and the float64 reference's score matrices (B*H*Sq*Sk of them) within memory, Pyodide's included.
MAX_ELEMENTS = 1 << 22
MAX_SCORES = 1 << 24


@dataclass
class Case:
    """A conformance case: named input arrays (float32, or int32 for cu_seqlens) and the
    interface's options (causal, window, mask kind, ...)."""

    name: str
    inputs: Dict[str, np.ndarray]
    options: Dict[str, object] = field(default_factory=dict)


def module(interface: str):
    """The module implementing `interface` (ValueError for an unknown one)."""
    from .. import registry

    registry.load().interface(interface)  # raises ValueError naming the registered ones
    return importlib.import_module(f"{__name__}.{interface}")
