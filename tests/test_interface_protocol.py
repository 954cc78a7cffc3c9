"""Every registered interface's module implements wgattn.interfaces.InterfaceModule, the skeleton
that check, conformance, native, live, the page and the benchmark call (issue 14); module()
refuses one that does not."""

import sys
import types

import pytest

from wgattn import interfaces, registry
from wgattn.errors import InterfaceMismatch
from wgattn.interfaces import InterfaceModule, module, protocol_gaps

NAMES = sorted(registry.load().interfaces)
MEMBERS = ("OUTPUTS", "plan", "reference", "conformance_cases", "case_from_reference")


def _copy(mod, **changes):
    """A module with `mod`'s members, `changes` applied (None removes one)."""
    fake = types.ModuleType(mod.__name__)
    for name in MEMBERS:
        setattr(fake, name, getattr(mod, name))
    for name, value in changes.items():
        if value is None:
            delattr(fake, name)
        else:
            setattr(fake, name, value)
    return fake


def test_protocol_lists_the_skeleton():
    assert sorted(n for n in vars(InterfaceModule) if not n.startswith("_")) == sorted(MEMBERS)


@pytest.mark.parametrize("name", NAMES)
def test_every_interface_module_implements_the_protocol(name):
    mod = module(name)
    assert protocol_gaps(mod) == []
    assert mod.OUTPUTS and all(isinstance(o, str) for o in mod.OUTPUTS)


@pytest.mark.parametrize("member", MEMBERS)
def test_a_module_without_a_member_falls_short(member):
    gaps = protocol_gaps(_copy(sys.modules["wgattn.interfaces.attn_probs"], **{member: None}))
    assert gaps == [f"{member} is missing"]


def test_a_renamed_parameter_or_a_bad_outputs_falls_short():
    real = module("attn_probs")

    def plan(kernel, case, source=None, entry_point=None, overrides=None):  # entry_points renamed
        return real.plan(kernel, case, source, entry_point, overrides)

    def conformance_cases(seed=1):  # another default
        return real.conformance_cases(seed)

    gaps = protocol_gaps(_copy(sys.modules["wgattn.interfaces.attn_probs"], plan=plan, conformance_cases=conformance_cases))
    assert [g.split("(")[0] for g in gaps] == ["plan", "conformance_cases"], gaps
    assert protocol_gaps(_copy(sys.modules["wgattn.interfaces.attn_probs"], OUTPUTS=["probs"])) == [
        "OUTPUTS must be a tuple of names, got ['probs']"
    ]


def test_module_refuses_a_module_that_falls_short(monkeypatch):
    broken = _copy(sys.modules["wgattn.interfaces.attn_probs"], reference=None)
    monkeypatch.setitem(sys.modules, "wgattn.interfaces.attn_probs", broken)
    monkeypatch.delitem(interfaces._CHECKED, "attn_probs", raising=False)
    with pytest.raises(InterfaceMismatch, match="attn_probs does not implement InterfaceModule: reference is missing"):
        module("attn_probs")
    with pytest.raises(ValueError, match="unknown interface 'nope'"):
        module("nope")
