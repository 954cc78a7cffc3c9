"""The registry: the manifest says what WGSL cannot, and reads the rest from the WGSL. An
interface's Params and bindings come from its header (shaders/interfaces/<name>.wgsl), which every
kernel must #include; the manifest's passes name entry points and knobs the kernels declare."""

import re
import shutil
import struct

import pytest

from helpers import MATRIX_TARGET, chosen_knobs
from wgattn import registry, wgsl
from wgattn.errors import InterfaceMismatch

REG = registry.load()
KERNELS = sorted(REG.kernels)
# Tool shaders with no registry entry (probes; the bandwidth benchmark's copy and fill: wgattn.bandwidth;
# the subgroup-matrix GEMM benchmark: wgattn.gemm).
NOT_KERNELS = {"loop_probe", "precision_probe", "stream", "hash_fill", "gemm.smx"}
TEMPLATES = {k.template for k in REG.kernels.values() if k.template}


def test_every_shader_file_is_registered():
    files = {p.stem for p in registry.shader_dir().glob("*.wgsl")}
    assert files - NOT_KERNELS <= set(KERNELS) | TEMPLATES


def test_kernel_files_exist():
    assert [k for k in KERNELS if not REG.kernel(k).path.exists()] == []


def _copy(tmp_path):
    """A copy of the shaders folder, to edit."""
    shutil.copytree(registry.shader_dir(), tmp_path / "shaders")
    return tmp_path / "shaders"


def test_params_and_bindings_come_from_the_header(tmp_path):
    shaders = _copy(tmp_path)
    header = shaders / "interfaces" / "attn_probs.wgsl"
    header.write_text(header.read_text().replace("  _pad: u32,", "  extra: f32,"))
    abi = registry.load(shaders / "manifest.json").abi("attn_probs")
    assert [(p.name, p.type, p.offset) for p in abi.params][-2:] == [("window", "u32", 24), ("extra", "f32", 28)]
    assert [(b.binding, b.name, b.kind, b.access, b.element or b.struct) for b in abi.bindings] == [
        (0, "params", "uniform", "read", "Params"),
        (1, "q", "storage", "read", "f32"),
        (2, "k_hist", "storage", "read", "f32"),
        (3, "probs", "storage", "read_write", "f32"),
    ]


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("  _pad: u32,", "  _pad: u32,\n  more: u32,", "must be a multiple of 16 bytes"),
        ("  _pad: u32,", "  _pad: f64,", r"Params._pad must be one of \['u32', 'i32', 'f32'\]"),
        ("var<uniform> params: Params;", "var<uniform> params: Nope;", "the uniform's struct Nope is not declared"),
        ("var<storage, read> q: array<f32>;", "var<storage, read> q: f32;", "must be a uniform struct or a storage array"),
    ],
)
def test_a_bad_header_is_refused_by_name(tmp_path, old, new, message):
    shaders = _copy(tmp_path)
    header = shaders / "interfaces" / "attn_probs.wgsl"
    assert old in header.read_text()
    header.write_text(header.read_text().replace(old, new))
    with pytest.raises(ValueError, match=message):
        registry.load(shaders / "manifest.json")


def test_a_kernel_must_include_its_header(tmp_path):
    shaders = _copy(tmp_path)
    kernel = shaders / "attn_probs.seed.wgsl"
    kernel.write_text(kernel.read_text().replace('#include "interfaces/attn_probs.wgsl"', ""))
    with pytest.raises(InterfaceMismatch, match=r'does not #include "interfaces/attn_probs.wgsl"'):
        registry.load(shaders / "manifest.json").kernel("attn_probs.seed").source()


def test_the_manifest_restates_nothing_the_wgsl_declares(tmp_path):
    import json

    raw = json.loads((registry.shader_dir() / "manifest.json").read_text())
    raw["interfaces"]["attn_probs"]["params"] = [["head_dim", "u32"]]
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(raw))
    shutil.copytree(registry.shader_dir() / "interfaces", tmp_path / "interfaces")
    shutil.copytree(registry.shader_dir() / "lib", tmp_path / "lib")
    with pytest.raises(ValueError, match=r"unknown keys \['params'\] \(bindings and params are the header's"):
        registry.load(path)


@pytest.mark.parametrize("kid", KERNELS)
def test_entry_points_and_knobs_are_the_wgsl_s(kid):
    """The passes' entry points are functions of the kernel, every registered knob is one of its
    override constants or named by a define (a knob neither uses would be dropped silently), every
    override it must be given is a knob, and each grid expression names only params and knobs."""
    k = REG.kernel(kid)
    chosen = chosen_knobs(k)  # an interface that chooses its kernels' knobs per target
    sizes = {"head_dim": 64}
    src = k.source(sizes, MATRIX_TARGET, chosen or k.knobs(sizes, MATRIX_TARGET))  # defines may name knobs
    for p in k.abi.passes:
        assert p.entry_point in wgsl.functions(src), p.entry_point
        ones = {p.name: 1 for p in k.abi.params}
        grid = registry.Pass(p.name, p.entry_point, p.uses, k.grids.get(p.name, p.grid))
        assert grid.workgroups(ones, chosen or k.knobs(ones, MATRIX_TARGET)) == (1, 1, 1)
    # Every override without an initializer is a knob; one with (`override BR: u32 = WG;`) may be.
    # A tile knob may be only a budget that other knobs are computed from (varlen_bwd's SMEM).
    in_defines = {name for v in k.defines.values() if isinstance(v, str) for name in re.findall(r"[A-Za-z_]\w*", v)}
    assert set(k.overrides) <= wgsl.overrides(src) | in_defines
    assert wgsl.overrides(src, defaulted=False) <= set(k.overrides) | {name for tile in k.tiles for name in tile} | set(chosen)


def test_pack_params_layout():
    abi = REG.abi("sdpa_arena")
    full = {name: 1 for name in _fields(abi)}
    raw = abi.pack_params(dict(full, batch=2, scale=0.5))
    assert len(raw) == 144
    assert raw[:4] == (2).to_bytes(4, "little")
    offsets = {p.name: p.offset for p in abi.params}
    assert [p.offset for p in abi.params] == [4 * i for i in range(len(abi.params))]  # 4-byte scalars, in order
    assert struct.unpack_from("<f", raw, offsets["scale"])[0] == 0.5
    assert raw[offsets["_o_pad"] : offsets["_o_pad"] + 4] == bytes(4)  # padding is 0
    with pytest.raises(ValueError, match="unknown params"):
        abi.pack_params(dict(full, nope=1))
    with pytest.raises(ValueError, match="does not fit in u32"):
        abi.pack_params(dict(full, batch=-1))
    with pytest.raises(ValueError, match=r"\['_o_pad'\] are padding"):
        abi.pack_params(dict(full, _o_pad=7))
    for big in (3.5e38, 1e308, float("inf"), float("nan")):  # struct.pack would raise OverflowError or pack inf
        with pytest.raises(ValueError, match="param scale=.* does not fit in f32"):
            abi.pack_params(dict(full, scale=big))


def _fields(abi):
    return [p.name for p in abi.params if not p.padding]


@pytest.mark.parametrize("name", sorted(REG.abis))
def test_pack_params_refuses_a_missing_field(name):
    """A field missing from a plan's values was packed silently as 0."""
    abi = REG.abi(name)
    assert all(p.startswith("_") for p in abi.padding)
    for missing in _fields(abi):
        values = {n: 1 for n in _fields(abi) if n != missing}
        with pytest.raises(ValueError, match=rf"\['{missing}'\] are missing"):
            abi.pack_params(values)


def test_workgroups_fold_past_65535():
    (main,) = REG.abi("sdpa_arena").passes
    wg = {"WG": 64}
    assert main.workgroups({"batch": 1, "heads": 1, "seq_q": 64}, wg) == (1, 1, 1)
    x, y, z = main.workgroups({"batch": 64, "heads": 64, "seq_q": 4096}, wg)
    assert (x, z) == (65535, 1) and x * y * 64 >= 64 * 64 * 4096


def test_unknown_kernel_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kernel 'nope'; registered"):
        REG.kernel("nope")
