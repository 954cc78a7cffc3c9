"""The interfaces: one object per registered interface, each an `Interface` (wgattn.interfaces.base,
which says what one owns and how to add one) living in wgattn/interfaces/<name>.py as `INTERFACE`.

    get(name)      the interface object (ValueError naming the registered ones)
    of(kernel)     the object of a kernel's interface
    every()        every registered interface's object, in the manifest's order

The modules are found by the manifest's names: adding an interface touches this package only by
adding its module.
"""

from __future__ import annotations

import importlib
from typing import Dict, List

from ..errors import InterfaceMismatch
from ..registry import Kernel, load
from .base import MAX_ELEMENTS, MAX_SCORES, Case, FilledCheck, Interface, Layout, Option
from .config import LiveConfig

__all__ = [
    "Case",
    "Option",
    "Layout",
    "Interface",
    "LiveConfig",
    "FilledCheck",
    "get",
    "of",
    "every",
    "MAX_ELEMENTS",
    "MAX_SCORES",
]

_LOADED: Dict[str, Interface] = {}


def get(name: str) -> Interface:
    """The object of interface `name` (ValueError for an unknown one; InterfaceMismatch for a
    module whose INTERFACE is not that interface's object)."""
    if name not in _LOADED:
        load().abi(name)  # raises ValueError naming the registered ones
        mod = importlib.import_module(f"{__name__}.{name}")
        obj = getattr(mod, "INTERFACE", None)
        if not isinstance(obj, Interface) or obj.name != name:
            raise InterfaceMismatch(f"{mod.__name__}.INTERFACE must be the {name} Interface object, got {obj!r}")
        _LOADED[name] = obj
    return _LOADED[name]


def of(kernel: Kernel) -> Interface:
    """The object of `kernel`'s interface."""
    return get(kernel.interface)


def every() -> List[Interface]:
    """Every registered interface's object, in the manifest's order."""
    return [get(name) for name in load().abis]
