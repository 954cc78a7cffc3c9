"""How a registered kernel becomes WGSL and a tile shape: the preprocessor (#include, #if), variants
from one template, tile candidates chosen per adapter limits (and their declared workgroup storage
checked against the WGSL's own arrays), caps and constraints that keep every index in bounds, and
which dispatches may be built without runtime checks (trusted mode)."""

from __future__ import annotations

import dataclasses
import re
import shutil

import pytest

from helpers import MATRIX_TARGET, TARGET, chosen_knobs, needs_features
from wgattn import conformance, registry, wgsl
from wgattn.errors import DoesNotFit
from wgattn.expr import evaluate
from wgattn.interfaces.flash_fwd import INTERFACE as flash_fwd
from wgattn.target import WEBGPU_LIMITS, Target
from wgattn.wgsl import preprocess

REG = registry.load()
TILED = [k for k in REG.kernels.values() if k.tiles]


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


def test_const_takes_its_value_from_the_defines():
    src = "#const MAX_DK\n#if BIG\n#const MAX_DN\n#endif\nend"
    assert preprocess(src, {"MAX_DK": 8, "BIG": 0}, _files()).split() == ["const", "MAX_DK:", "u32", "=", "8u;", "end"]
    assert "const MAX_DN: u32 = 16u;" in preprocess(src, {"MAX_DK": 8, "BIG": 1, "MAX_DN": 16}, _files())


def test_for_repeats_its_lines_with_the_count_in_place_of_its_name():
    src = "#for i TM\n#for j TN - 1\nlet a_{i}_{j} = x[{i} * 4u + {j}];\n#endfor\n#if BIG\nbig_{i}\n#endif\n#endfor\nend"
    out = [x for x in preprocess(src, {"TM": 2, "TN": 3, "BIG": 1}, _files()).splitlines() if x]
    assert out == [
        "let a_0_0 = x[0 * 4u + 0];",
        "let a_0_1 = x[0 * 4u + 1];",
        "big_0",
        "let a_1_0 = x[1 * 4u + 0];",
        "let a_1_1 = x[1 * 4u + 1];",
        "big_1",
        "end",
    ]
    assert [x for x in preprocess(src, {"TM": 0, "TN": 3}, _files()).splitlines() if x] == ["end"]
    assert "a_0" not in preprocess("#if NO\n#for i 2\na_{i}\n#endfor\n#endif", {}, _files())


@pytest.mark.parametrize(
    "src, message",
    [
        ("#if A\nx", "#if without #endif"),
        ("#endif", "#endif without #if"),
        ("#if A\n#else\n#else\n#endif", "#else without #if"),
        ('#include "../secret"', "inside the shaders folder"),
        ("#if A B\n#endif", "one define name"),
        ("#const MAX_DK", "#const MAX_DK needs a define MAX_DK"),
        ("#const 8", "#const takes one define name"),
        ("#for i 2\nx", "#for without #endfor"),
        ("#endfor", "#endfor without #for"),
        ("#for 2\n#endfor", "#for takes a name and a count"),
        ("#for i N\n#endfor", "#for i: expression 'N' names unknown 'N'"),
        ("#for i 1000\n#endfor", "repeats 1000 times"),
    ],
)
def test_bad_directives_say_what_is_wrong(src, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        preprocess(src, {}, _files())


def params(kernel, head_dim=64):
    """Sizes for a kernel's defines and knobs: every Params field (a define may name any: decode's
    names block_size), 16 each but head_dim."""
    return {**{p.name: 16 for p in kernel.abi.params if not p.padding}, "head_dim": head_dim}


@pytest.mark.parametrize("kernel", list(REG.kernels.values()), ids=lambda k: k.id)
def test_every_kernel_source_is_expanded(kernel):
    sizes = params(kernel)
    knobs = chosen_knobs(kernel) or kernel.knobs(sizes, MATRIX_TARGET)  # defines may name knobs
    src = kernel.source(sizes, MATRIX_TARGET, knobs)
    assert not [line for line in src.splitlines() if line.lstrip().startswith("#")]


def test_variants_share_one_template():
    f32, f16 = REG.kernel("flash_fwd.blocked"), REG.kernel("flash_fwd.blocked_f16")
    assert f32.path == f16.path
    assert "enable f16;" in f16.source({"head_dim": 64}) and "enable f16;" not in f32.source({"head_dim": 64})
    # head_dim % 4 == 0 moves rows as vec4; other head dims read scalars.
    assert "array<vec4<f32>>" in f32.source({"head_dim": 64})
    assert "array<vec4<f32>>" not in f32.source({"head_dim": 59})


def _target(storage: int, invocations: int, software: bool) -> Target:
    limits = dict(WEBGPU_LIMITS)
    limits.update({"max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": invocations})
    return dataclasses.replace(MATRIX_TARGET, limits=limits, software=software, name=f"{storage} bytes")


TARGETS = [_target(s, i, c) for s, i, c in ((49152, 1024, False), (32768, 256, False), (16384, 256, False), (32768, 1024, True))]


def test_workgroup_storage_is_read_from_the_wgsl():
    """What an entry point uses, directly or through what it calls, counted as WebGPU counts it:
    vecN and aliases of f16 and f32, atomics, lengths that are expressions of the knobs."""
    src = """
alias T = f16;
override N: u32;
var<workgroup> a: array<vec4<T>, 2u * N>;        // 16 bytes * N
var<workgroup> b: array<f32, (N + 31u) / 32u>;   // used through helper()
var<workgroup> c: array<atomic<u32>, N>;         // used by the other entry point only
fn helper() { b[0] = 1.0; }
@compute @workgroup_size(N, 2) fn one() { a[0] = vec4<T>(); helper(); }
@compute @workgroup_size(64) fn two() { atomicStore(&c[0], 1u); }
"""
    assert wgsl.workgroup_storage(src, "one", {"N": 40}) == 16 * 40 + 4 * 2
    assert wgsl.workgroup_storage(src, "two", {"N": 40}) == 4 * 40
    assert wgsl.workgroup_size(src, "one") == "(N) * (2)" and wgsl.literal_workgroup_size(src, "two") == 64


@pytest.mark.parametrize("kernel", TILED, ids=lambda k: k.id)
@pytest.mark.parametrize("dim", [1, 8, 59, 64, 111, 128, 256])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.name}{'-cpu' if t.software else ''}")
def test_tile_choice_fits_the_adapter(kernel, dim, target):
    try:
        fit = kernel.fit(params(kernel, dim), target)
    except ValueError as exc:
        assert "no tile shape fits" in str(exc) and kernel.interface in str(exc)
        assert dim == 256 or target.limit("max-compute-workgroup-storage-size") <= 16384, (
            "only the largest head dims may find no tile"
        )
        return
    knobs = fit.knobs
    assert fit.storage <= target.limit("max-compute-workgroup-storage-size")
    assert fit.invocations <= target.limit("max-compute-invocations-per-workgroup")
    for name, most in kernel.caps(kernel.source(params(kernel, dim), target, knobs)).items():
        assert knobs[name] <= most
    for expr in kernel.constraints:
        assert evaluate(expr, {**kernel.target_names(target), **knobs}) == 0
    if "PF" in knobs:  # every vec4 of a K/V tile has an invocation that moves it
        assert knobs["PF"] * knobs["WG"] >= knobs["BC"] * knobs["KS"]


def test_more_storage_gives_larger_tiles():
    k = REG.kernel("flash_fwd.blocked")
    rows = [k.knobs({"head_dim": 64}, t)["BR"] for t in TARGETS if not t.software]
    assert rows == sorted(rows, reverse=True) and rows[0] > rows[-1]


def test_software_adapters_get_their_own_tiles():
    """lavapipe and SwiftShader run invocations as CPU lanes: 32 invocations beat 128 there
    (bench/sweep_tiles.py, docs/performance.md); a GPU with the same limits keeps the GPU tile."""
    k = REG.kernel("flash_fwd.blocked")
    cpu = k.knobs({"head_dim": 64}, _target(32768, 1024, True))
    gpu = k.knobs({"head_dim": 64}, _target(32768, 1024, False))
    assert (cpu["BR"], cpu["WG"]) == (32, 32) and gpu["WG"] == 128


@pytest.mark.parametrize("kernel", [k for k in REG.kernels.values() if k.trusted], ids=lambda k: k.id)
def test_every_trusted_kernel_s_knobs_are_held_to_its_wgsl(kernel):
    """Whatever the kernel (tiled or not), fit() holds its knobs to the caps its WGSL declares
    (`const MAX_<knob>`), its constraints, and the workgroup storage and invocations its WGSL's
    arrays and @workgroup_size need on the adapter: a knob past any of them is refused."""
    src = kernel.source(params(kernel))
    sizes = {p.name: 64 for p in kernel.abi.params}
    chosen = chosen_knobs(kernel) or None  # knobs its interface chooses per target, held alike
    fit = kernel.fit(sizes, TARGET, chosen=chosen)
    caps = kernel.caps(src, chosen)
    for name, most in caps.items():
        with pytest.raises(DoesNotFit, match=f"{name}={most + 1} > {most}"):
            kernel.fit(sizes, TARGET, overrides={**fit.knobs, name: most + 1}, chosen=chosen)
    with pytest.raises(DoesNotFit, match="no tile shape fits"):
        kernel.fit(sizes, _target(256, 16, False), chosen=chosen)


def test_caps_follow_the_wgsl(tmp_path):
    shutil.copytree(registry.shader_dir(), tmp_path / "shaders")
    path = tmp_path / "shaders" / "flash_fwd.blocked.wgsl"
    path.write_text(path.read_text().replace("const MAX_TN: u32 = 8u;", "const MAX_TN: u32 = 4u;"))
    k = registry.load(tmp_path / "shaders" / "manifest.json").kernel("flash_fwd.blocked")
    assert k.caps(k.source({"head_dim": 64}))["TN"] == 4
    with pytest.raises(ValueError, match="TN=8 > 4"):
        k.knobs({"head_dim": 64}, TARGET, overrides={"BR": 16, "BC": 64, "WG": 32})


def test_a_tile_breaking_a_constraint_is_refused():
    k = REG.kernel("flash_fwd.blocked")
    with pytest.raises(ValueError, match=r"BC % \(WG // \(BR // 4\)\) != 0"):
        k.knobs({"head_dim": 64}, TARGET, overrides={"BR": 16, "BC": 12, "WG": 32})
    with pytest.raises(ValueError, match="TN=16 > 8"):
        k.knobs({"head_dim": 64}, TARGET, overrides={"BR": 16, "BC": 64, "WG": 16})


def _case(prefix):
    (case,) = [c for c in flash_fwd.conformance_cases() if c.name.startswith(prefix)]
    return case


def test_trusted_only_for_registered_text():
    k = REG.kernel("flash_fwd.blocked")
    case = _case("softcap-d64")
    assert all(d.trusted for d in flash_fwd.plan(k, case, TARGET).dispatches)
    # Tile overrides pass the caps and constraints, so they stay trusted; user WGSL never is.
    assert all(d.trusted for d in flash_fwd.plan(k, case, TARGET, overrides={"BR": 16, "BC": 16, "WG": 16}).dispatches)
    assert not any(d.trusted for d in flash_fwd.plan(k, case, TARGET, source=k.source({"head_dim": 64})).dispatches)
    tiled = REG.kernel("flash_fwd.tiled")  # no tile candidates: its overrides are no shape the registry vetted
    assert not any(d.trusted for d in flash_fwd.plan(tiled, case, TARGET, overrides={"BC": 8}).dispatches)
    user = REG.user_kernel("flash_fwd")
    assert not any(d.trusted for d in flash_fwd.plan(user, case, TARGET, source=tiled.source({"head_dim": 64})).dispatches)


# A tile shape the defaults never pick on this adapter (8 column groups, 2 keys per invocation and,
# at d111 and d59, a last column group only partly inside the head dimension): the generic mapping
# is right, not just the tuned one.
OTHER_TILE = {"BR": 16, "BC": 16, "WG": 32}


def test_the_other_tile_is_not_a_default_here(native_runtime):
    for kernel_id in ("flash_fwd.blocked", "flash_fwd.blocked_f16"):
        for prefix in ("causal-tl-d111", "window-right-tl-d59", "softcap-d64"):
            (main,) = flash_fwd.plan(REG.kernel(kernel_id), _case(prefix), native_runtime.target).dispatches
            assert {n: main.constants[n] for n in OTHER_TILE} != OTHER_TILE


@pytest.mark.parametrize("kernel_id", ["flash_fwd.blocked", "flash_fwd.blocked_f16"])
@pytest.mark.parametrize("prefix", ["causal-tl-d111", "window-right-tl-d59", "softcap-d64"])
def test_other_tile_shapes_match_reference(native_runtime, kernel_id, prefix):
    kernel = REG.kernel(kernel_id)
    needs_features(native_runtime, kernel)
    rows = conformance.run_case(native_runtime, kernel, _case(prefix), overrides=OTHER_TILE)
    bad = [r for r in rows if not r["pass"]]
    assert not bad, bad


# The smallest candidate, one row group of 4 rows on 8 invocations (a software adapter's last
# resort at large head dims; on a GPU a tile narrower than a subgroup is never taken), with ALiBi
# and sinks: right at sizes that fit.
SMALLEST_TILE = {"BR": 4, "BC": 8, "WG": 8}


@pytest.mark.parametrize("kernel_id", ["flash_fwd.blocked", "flash_fwd.blocked_f16"])
@pytest.mark.parametrize("prefix", ["alibi-sinks-causal-br-d64", "alibi-dense-tl-d59"])
def test_the_smallest_tile_matches_reference(native_runtime, kernel_id, prefix):
    kernel = REG.kernel(kernel_id)
    needs_features(native_runtime, kernel)
    assert dict(SMALLEST_TILE, adapter="cpu") in [dict(t) for t in kernel.tiles]
    rows = conformance.run_case(native_runtime, kernel, _case(prefix), overrides=SMALLEST_TILE)
    bad = [r for r in rows if not r["pass"]]
    assert not bad, bad


def test_default_mode_and_switch(monkeypatch):
    from wgattn import native

    monkeypatch.delenv("WGATTN_TRUSTED", raising=False)
    assert native.trusted_default()
    for off in ("0", "false", "off"):
        monkeypatch.setenv("WGATTN_TRUSTED", off)
        assert not native.trusted_default()
