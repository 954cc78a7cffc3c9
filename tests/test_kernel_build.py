"""How a registered kernel becomes WGSL and a tile shape: the preprocessor (#include, #if), variants
from one template, tile candidates chosen per adapter limits (and their declared workgroup storage
checked against the WGSL's own arrays), caps and constraints that keep every index in bounds, and
which dispatches may be built without runtime checks (trusted mode)."""

from __future__ import annotations

import re

import pytest

from helpers import needs_features, workgroup_storage
from wgattn import conformance, registry
from wgattn.interfaces import flash_fwd, module
from wgattn.wgsl import preprocess

REG = registry.load()
TILED = [k for k in REG.kernels.values() if k.tiles]
LIMITS = [
    {"max_wg_storage": s, "max_invocations": i, "cpu": c}
    for s, i, c in ((49152, 1024, 0), (32768, 256, 0), (16384, 256, 0), (32768, 1024, 1))
]


def _files(**files):
    return lambda path: files[path]


def test_include_once_and_nested():
    read = _files(**{"a.wgsl": '#include "b.wgsl"\nfn a() {}', "b.wgsl": "fn b() {}"})
    out = preprocess('#include "a.wgsl"\n#include "b.wgsl"\nfn main() {}', {}, read)
    assert out.count("fn b() {}") == 1 and out.index("fn b()") < out.index("fn a()") < out.index("fn main()")


def test_if_else_endif_nest():
    src = "#if F16\nenable f16;\n#if BIG\nbig\n#else\nsmall\n#endif\n#else\nf32\n#endif\nend"
    keep = lambda d: [x for x in preprocess(src, d, _files()).splitlines() if x]  # noqa: E731
    assert keep({"F16": 1, "BIG": 0}) == ["enable f16;", "small", "end"]
    assert keep({"F16": 1, "BIG": 1}) == ["enable f16;", "big", "end"]
    assert keep({}) == ["f32", "end"]


@pytest.mark.parametrize(
    "src, message",
    [
        ("#if A\nx", "#if without #endif"),
        ("#endif", "#endif without #if"),
        ("#if A\n#else\n#else\n#endif", "#else without #if"),
        ('#include "../secret"', "inside the shaders folder"),
        ("#if A B\n#endif", "one define name"),
    ],
)
def test_bad_directives_say_what_is_wrong(src, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        preprocess(src, {}, _files())


@pytest.mark.parametrize("kernel", list(REG.kernels.values()), ids=lambda k: k.id)
def test_every_kernel_source_is_expanded(kernel):
    src = kernel.source({"head_dim": 64})
    assert not [line for line in src.splitlines() if line.lstrip().startswith("#")]


def test_variants_share_one_template():
    f32, f16 = REG.kernel("flash_fwd.blocked"), REG.kernel("flash_fwd.blocked_f16")
    assert f32.path == f16.path
    assert "enable f16;" in f16.source({"head_dim": 64}) and "enable f16;" not in f32.source({"head_dim": 64})
    # head_dim % 4 == 0 moves rows as vec4; other head dims read scalars.
    assert "array<vec4<f32>>" in f32.source({"head_dim": 64})
    assert "array<vec4<f32>>" not in f32.source({"head_dim": 59})


@pytest.mark.parametrize("kernel", TILED, ids=lambda k: k.id)
@pytest.mark.parametrize("dim", [1, 8, 59, 64, 111, 128, 256])
@pytest.mark.parametrize("limits", LIMITS, ids=lambda lim: f"{lim['max_wg_storage']}{'-cpu' if lim['cpu'] else ''}")
def test_tile_choice_fits_the_adapter(kernel, dim, limits):
    try:
        knobs = kernel.knobs({"head_dim": dim}, limits=limits)
    except ValueError as exc:
        assert "no tile shape fits" in str(exc) and kernel.interface.name in str(exc)
        assert dim == 256 or limits["max_wg_storage"] <= 16384, "only the largest head dims may find no tile"
        return
    src = kernel.source({"head_dim": dim})
    used = max(workgroup_storage(src, knobs, p.entry_point) for p in kernel.interface.passes)
    assert used == registry._evaluate(kernel.storage, {"head_dim": dim, **knobs}), "storage expression drifted"
    assert used <= limits["max_wg_storage"] and knobs["WG"] <= limits["max_invocations"]
    for name, most in kernel.caps.items():
        assert knobs[name] <= most
    for expr in kernel.constraints:
        assert registry._evaluate(expr, knobs) == 0
    if "PF" in knobs:  # every vec4 of a K/V tile has an invocation that moves it
        assert knobs["PF"] * knobs["WG"] >= knobs["BC"] * knobs["KS"]


def test_more_storage_gives_larger_tiles():
    k = REG.kernel("flash_fwd.blocked")
    rows = [k.knobs({"head_dim": 64}, limits=lim)["BR"] for lim in LIMITS if not lim["cpu"]]
    assert rows == sorted(rows, reverse=True) and rows[0] > rows[-1]


def test_software_adapters_get_their_own_tiles():
    """lavapipe and SwiftShader run invocations as CPU lanes: 32 invocations beat 128 there
    (bench/sweep_tiles.py, docs/performance.md); a GPU with the same limits keeps the GPU tile."""
    k = REG.kernel("flash_fwd.blocked")
    cpu = k.knobs({"head_dim": 64}, limits={"max_wg_storage": 32768, "max_invocations": 1024, "cpu": 1})
    gpu = k.knobs({"head_dim": 64}, limits={"max_wg_storage": 32768, "max_invocations": 1024, "cpu": 0})
    assert (cpu["BR"], cpu["WG"]) == (32, 32) and gpu["WG"] == 128


@pytest.mark.parametrize("kernel", TILED, ids=lambda k: k.id)
def test_caps_match_the_wgsl_arrays(kernel):
    """Where the WGSL sizes private arrays by MAX_<knob>, the registry caps that knob at it."""
    src = kernel.source({"head_dim": 64})
    for name in re.findall(r"const\s+MAX_(\w+)\s*:\s*u32", src):
        if name in kernel.overrides or any(name in t for t in kernel.tiles):
            m = re.search(r"const\s+MAX_%s\s*:\s*u32\s*=\s*(\d+)u;" % name, src)
            assert kernel.caps.get(name) == int(m.group(1)), f"{kernel.id}: caps[{name}] != MAX_{name}"


def test_a_tile_breaking_a_constraint_is_refused():
    k = REG.kernel("flash_fwd.blocked")
    with pytest.raises(ValueError, match=r"BC % \(WG // \(BR // 4\)\) != 0"):
        k.knobs({"head_dim": 64}, overrides={"BR": 16, "BC": 12, "WG": 32})
    with pytest.raises(ValueError, match="TN=16 > 8"):
        k.knobs({"head_dim": 64}, overrides={"BR": 16, "BC": 64, "WG": 16})


def _case(prefix):
    (case,) = [c for c in flash_fwd.conformance_cases() if c.name.startswith(prefix)]
    return case


def test_trusted_only_for_registered_text():
    k = REG.kernel("flash_fwd.blocked")
    case = _case("softcap-d64")
    assert all(d.trusted for d in flash_fwd.plan(k, case).dispatches)
    # Tile overrides pass the caps and constraints, so they stay trusted; user WGSL never is.
    assert all(d.trusted for d in flash_fwd.plan(k, case, overrides={"BR": 16, "BC": 16, "WG": 16}).dispatches)
    assert not any(d.trusted for d in flash_fwd.plan(k, case, source=k.source({"head_dim": 64})).dispatches)
    tiled = REG.kernel("flash_fwd.tiled")  # no caps: an override could overflow its arrays
    assert not any(d.trusted for d in flash_fwd.plan(tiled, case, overrides={"BC": 8}).dispatches)
    user = REG.user_kernel("flash_fwd")
    assert not any(d.trusted for d in flash_fwd.plan(user, case, source=tiled.source()).dispatches)


# A tile shape the defaults never pick on this adapter (4 column groups, 4 keys and 4 vec4 columns
# per invocation): the generic mapping is right, not just the tuned one.
@pytest.mark.parametrize("kernel_id", ["flash_fwd.blocked", "flash_fwd.blocked_f16"])
@pytest.mark.parametrize("prefix", ["causal-tl-d111", "window-right-tl-d59", "softcap-d64"])
def test_other_tile_shapes_match_reference(native_runtime, kernel_id, prefix):
    kernel = REG.kernel(kernel_id)
    needs_features(native_runtime, kernel)
    rows = conformance.run_case(native_runtime, kernel, _case(prefix), overrides={"BR": 16, "BC": 16, "WG": 16})
    bad = [r for r in rows if not r["pass"]]
    assert not bad, bad


@pytest.mark.parametrize("kernel_id", [k.id for k in REG.kernels.values() if k.trusted])
def test_trusted_kernels_pass_with_runtime_checks_too(native_runtime, kernel_id):
    """The grids run trusted (the default); a sample runs checked, so both modes are held."""
    kernel = REG.kernel(kernel_id)
    needs_features(native_runtime, kernel)
    mod = module(kernel.interface.name)
    case = mod.conformance_cases()[1]
    saved = native_runtime.trusted
    native_runtime.trusted = False
    try:
        rows = conformance.run_case(native_runtime, kernel, case)
    finally:
        native_runtime.trusted = saved
    assert rows and all(r["pass"] for r in rows), rows


def test_default_mode_and_switch(monkeypatch):
    from wgattn import native

    monkeypatch.delenv("WGATTN_TRUSTED", raising=False)
    assert native.trusted_default()
    for off in ("0", "false", "off"):
        monkeypatch.setenv("WGATTN_TRUSTED", off)
        assert not native.trusted_default()
