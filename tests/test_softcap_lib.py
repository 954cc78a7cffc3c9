"""softcap without the tanh built-in (issue 11): shaders/lib/softcap.wgsl is pasted verbatim into
every kernel that soft-caps (there is no include mechanism yet), and no kernel calls tanh()."""
import re
from pathlib import Path

import pytest

SHADERS = Path(__file__).resolve().parent.parent / "shaders"
LIB = (SHADERS / "lib" / "softcap.wgsl").read_text()
PROBE = "precision_probe.wgsl"  # measures the built-in on purpose


def _code(text: str) -> str:
    """WGSL without its // comments."""
    return re.sub(r"//[^\n]*", "", text)


def _kernels():
    return sorted(p for p in SHADERS.glob("*.wgsl"))


def test_lib_defines_the_agreed_signature():
    assert "fn softcap_apply(x: f32, cap: f32) -> f32 {" in LIB
    assert "fn softcap_slope(x: f32, cap: f32) -> f32 {" in LIB
    assert not re.search(r"\btanh\s*\(", _code(LIB)), "the lib must not use the tanh built-in"


@pytest.mark.parametrize("path", _kernels(), ids=lambda p: p.name)
def test_every_softcapping_kernel_pastes_the_lib_verbatim(path):
    text = path.read_text()
    soft_caps = re.search(r"^\s*softcap\s*:\s*f32", text, re.M) is not None
    if soft_caps or "fn softcap_" in text:
        assert LIB in text, f"{path.name}: its softcap code differs from shaders/lib/softcap.wgsl (paste it verbatim)"
    if path.name != PROBE:
        assert not re.search(r"\btanh\s*\(", _code(text)), (
            f"{path.name} calls the tanh built-in: drivers may give it an absolute error of 1e-7 "
            "(thousands of ulps near 0); use softcap_apply from shaders/lib/softcap.wgsl")


def test_the_kernels_that_take_softcap_are_covered():
    """The check above is not vacuous: the four softcap kernels carry the lib."""
    carriers = {p.name for p in _kernels() if LIB in p.read_text()}
    assert {"flash_fwd.tiled.wgsl", "flash_fwd.tiled_f16.wgsl", "varlen_bwd.seed.wgsl",
            "varlen_bwd.tiled.wgsl", PROBE} <= carriers
