"""softcap without the tanh built-in (issue 11): every kernel that soft-caps includes
shaders/lib/softcap.wgsl (written once; wgattn.wgsl expands it), and no kernel calls tanh()."""

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


INCLUDE = '#include "lib/softcap.wgsl"'


@pytest.mark.parametrize("path", _kernels(), ids=lambda p: p.name)
def test_every_softcapping_kernel_includes_the_lib(path):
    text = path.read_text()
    soft_caps = re.search(r"^\s*softcap\s*:\s*f32", text, re.M) is not None
    if soft_caps or "softcap_" in text:
        assert INCLUDE in text, f"{path.name}: soft-caps without {INCLUDE}"
        assert "fn softcap_" not in text, f"{path.name}: defines its own softcap instead of the lib's"
    if path.name != PROBE:
        assert not re.search(r"\btanh\s*\(", _code(text)), (
            f"{path.name} calls the tanh built-in: drivers may give it an absolute error of 1e-7 "
            "(thousands of ulps near 0); use softcap_apply from shaders/lib/softcap.wgsl"
        )


def test_the_kernels_that_take_softcap_are_covered():
    """The check above is not vacuous: the four softcap kernels carry the lib."""
    carriers = {p.name for p in _kernels() if INCLUDE in p.read_text()}
    assert {
        "flash_fwd.tiled.wgsl",
        "flash_fwd.tiled_f16.wgsl",
        "flash_fwd.blocked.wgsl",
        "varlen_bwd.seed.wgsl",
        "varlen_bwd.tiled.wgsl",
        PROBE,
    } <= carriers


def test_expanded_sources_carry_the_lib_once():
    from wgattn import registry

    for kernel in registry.load().kernels.values():
        src = kernel.source({"head_dim": 64})
        if "softcap_apply(" in src:
            assert src.count("fn softcap_apply(") == 1, kernel.id
