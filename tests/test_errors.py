"""Errors are classified by type (wgattn.errors), not by matching their text: check.py
matched "does not compile" / "does not match" in str(exc) (the second branch was dead), the page
matched /does not compile/ in the message. Every class stays a ValueError for existing callers."""

import pytest

from helpers import TARGET
from wgattn import check, errors, registry

REG = registry.load()


class _Runtime:
    """A runtime whose run() raises `exc`: what check() does with it depends on its type only."""

    info = {"device": "fake", "backend": "none"}
    target = TARGET

    def __init__(self, exc):
        self.exc = exc

    def run(self, plan):
        raise self.exc


def test_hierarchy_keeps_value_error():
    for cls in (errors.CompileError, errors.InterfaceMismatch, errors.DoesNotFit):
        assert issubclass(cls, errors.WgattnError) and issubclass(cls, ValueError)


def test_no_adapter_is_a_wgattn_error_but_not_the_caller_s():
    """AdapterError is the machine's fault (503), not bad input (422): a WgattnError, never a
    ValueError; and it lives where importing it imports no wgpu (the server's error handlers)."""
    assert issubclass(errors.AdapterError, errors.WgattnError) and not issubclass(errors.AdapterError, ValueError)
    import subprocess
    import sys

    code = "import sys, app.errors; print('wgpu' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("exc", [errors.CompileError("x.main: boom"), errors.InterfaceMismatch("x: params")])
def test_check_stops_on_a_compile_error_or_mismatch_by_type(exc):
    with pytest.raises(check.CheckError, match=str(exc)):
        check.check("attn_probs", runtime=_Runtime(exc))


def test_check_does_not_match_message_text():
    # A plain ValueError that merely mentions the words is one failing case, not a fatal error.
    report = check.check("attn_probs", runtime=_Runtime(ValueError("input does not compile or does not match")))
    assert report["passed"] == 0 and report["failed"] == len(report["cases"]) > 0
    assert all("does not compile" in o["error"] for c in report["cases"] for o in c["outputs"])


def test_pack_params_mismatch_is_typed():
    iface = REG.abi("attn_probs")
    with pytest.raises(errors.InterfaceMismatch, match="missing"):
        iface.pack_params({})


def test_no_tile_fits_is_typed():
    from wgattn.interfaces.flash_fwd import INTERFACE as flash_fwd
    from wgattn.target import Target

    case = next(c for c in flash_fwd.conformance_cases() if c.inputs["q"].shape[2] == 256)
    kernel = REG.kernel("flash_fwd.blocked")
    with pytest.raises(errors.DoesNotFit, match="no tile shape fits"):
        kernel.fit({"head_dim": 256}, Target())  # WebGPU's default limits
    plan = flash_fwd.plan(kernel, case, Target())  # a plan says so, for the page
    assert not plan.dispatches and "no tile shape fits" in plan.unavailable


def test_native_compile_error_is_typed(native_runtime):
    from wgattn.interfaces.attn_probs import INTERFACE as attn_probs

    case = attn_probs.conformance_cases()[0]
    kernel = REG.kernel("attn_probs.seed")
    plan = attn_probs.plan(kernel, case, TARGET, source="fn f() { let x: vec4<f32> = 1.0; }")
    with pytest.raises(errors.CompileError, match="does not compile"):
        native_runtime.run(plan)
