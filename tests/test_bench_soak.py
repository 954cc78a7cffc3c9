"""bench/soak.py covers every interface: it runs a small configuration of each kernel's interface
(and bench/pipeline_shapes.py takes the same ones), so an interface added without one stops the
soak at its first request. The soak itself is a measurement (docs/reliability.md), not a test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from wgattn import interfaces, live

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("soak", ROOT / "bench" / "soak.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_interface_has_a_small_configuration_valid_at_every_head_dim():
    soak = _script()
    assert set(soak.SMALL) == {i.name for i in interfaces.every()}
    for iface in interfaces.every():
        for head_dim in soak.HEAD_DIMS:  # --shapes takes the first 1..8 of them
            live.make_config(iface, dict(soak.SMALL[iface.name], head_dim=head_dim))
