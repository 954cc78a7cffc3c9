"""The registry (shaders/manifest.json) must describe the WGSL exactly: a drift fails here."""

import re
import struct

import pytest

from wgattn import registry

REG = registry.load()
# Kernels whose WGSL exists (a registered kernel without its file fails test_kernel_files_exist).
KERNELS = sorted(REG.kernels)
# Tool shaders with no registry entry, and the decode kernels: wgattn.decode_plan builds their plans
# until an interface registers them (tests/test_native_decode.py holds them to their WGSL meanwhile).
NOT_KERNELS = {"loop_probe", "precision_probe", "decode.split"}
# Sizes a kernel's source is expanded for (a define may follow head_dim): one that moves rows as
# scalars and one that moves them as vec4.
SIZES = ({"head_dim": 59}, {"head_dim": 64})


def _struct_fields(src: str, name: str):
    body = re.search(r"struct\s+%s\s*\{(.*?)\}" % name, src, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    return [(f, t) for f, t in re.findall(r"(\w+)\s*:\s*(\w+)\s*,?", body)]


def _bindings(src: str):
    found = re.findall(r"@group\(0\)\s*@binding\((\d+)\)\s*var<(\w+)(?:,\s*(\w+))?>\s*(\w+)\s*:\s*([^;]+);", src)
    return {int(b): (kind, access or "read", name, typ.strip()) for b, kind, access, name, typ in found}


def test_every_shader_file_is_registered():
    files = {p.stem for p in registry.shader_dir().glob("*.wgsl")}
    assert files - NOT_KERNELS <= set(KERNELS)


@pytest.mark.parametrize("sizes", SIZES, ids=str)
@pytest.mark.parametrize("kid", KERNELS)
def test_params_struct_matches_manifest(kid, sizes):
    k = REG.kernel(kid)
    assert _struct_fields(k.source(sizes), "Params") == [(p.name, p.type) for p in k.interface.params]
    assert k.interface.params_size % 16 == 0  # uniform structs are 16-byte aligned


@pytest.mark.parametrize("sizes", SIZES, ids=str)
@pytest.mark.parametrize("kid", KERNELS)
def test_bindings_match_manifest(kid, sizes):
    k = REG.kernel(kid)
    found = _bindings(k.source(sizes))
    for b in k.interface.bindings:
        # A storage array may be read as vec4 of its element (same bytes) where head_dim % 4 == 0.
        typ = {f"array<{b.element}>", f"array<vec4<{b.element}>>"} if b.kind == "storage" else {b.struct}
        got_kind, got_access, got_name, got_typ = found.pop(b.binding)
        assert (got_kind, got_access, got_name) == (b.kind, b.access, b.name)
        assert got_typ in typ
    assert not found, f"bindings the manifest does not list: {found}"


@pytest.mark.parametrize("kid", KERNELS)
def test_entry_point_and_overrides_match_manifest(kid):
    k = REG.kernel(kid)
    src = k.source(SIZES[0])
    for p in k.interface.passes:
        assert re.search(r"@compute[^;{]*fn\s+%s\s*\(" % p.entry_point, src), p.entry_point
        # The grid expression (the kernel's own, where it has one) may only name params and knobs.
        ones = {p.name: 1 for p in k.interface.params}
        grid = registry.Pass(p.name, p.entry_point, p.uses, k.grids.get(p.name, p.grid))
        assert grid.workgroups(ones, k.knobs(ones, limits=registry.DEFAULT_LIMITS)) == (1, 1, 1)
    declared = set(re.findall(r"^override\s+(\w+)\s*:", src, re.M))
    # A tile knob may be only a budget that other knobs are computed from (varlen_bwd's SMEM).
    assert set(k.overrides) <= declared <= set(k.overrides) | {name for tile in k.tiles for name in tile}


@pytest.mark.parametrize("name", sorted(REG.interfaces))
def test_each_pass_fits_webgpu_default_storage_limit(name):
    """WebGPU guarantees 8 storage buffers per shader stage; each pass stays within that."""
    iface = REG.interface(name)
    for p in iface.passes:
        assert sum(t != "uniform" for _, t in iface.layout(p.uses)) <= 8, p.name


def test_pack_params_layout():
    iface = REG.interface("sdpa_arena")
    full = {name: 1 for name in _fields(iface)}
    raw = iface.pack_params(dict(full, batch=2, scale=0.5))
    assert len(raw) == 144
    assert raw[:4] == (2).to_bytes(4, "little")
    offsets = {p.name: p.offset for p in iface.params}
    assert [p.offset for p in iface.params] == [4 * i for i in range(len(iface.params))]  # 4-byte scalars, in order
    assert struct.unpack_from("<f", raw, offsets["scale"])[0] == 0.5
    assert raw[offsets["_o_pad"] : offsets["_o_pad"] + 4] == bytes(4)  # padding is 0
    with pytest.raises(ValueError, match="unknown params"):
        iface.pack_params(dict(full, nope=1))
    with pytest.raises(ValueError, match="does not fit in u32"):
        iface.pack_params(dict(full, batch=-1))
    with pytest.raises(ValueError, match=r"\['_o_pad'\] are padding"):
        iface.pack_params(dict(full, _o_pad=7))


def _fields(iface):
    return [p.name for p in iface.params if not p.padding]


@pytest.mark.parametrize("name", sorted(REG.interfaces))
def test_pack_params_refuses_a_missing_field(name):
    """Issue 14: a field missing from a plan's values was packed silently as 0."""
    iface = REG.interface(name)
    assert all(p.startswith("_") for p in iface.padding)
    for missing in _fields(iface):
        values = {n: 1 for n in _fields(iface) if n != missing}
        with pytest.raises(ValueError, match=rf"\['{missing}'\] are missing"):
            iface.pack_params(values)


def test_workgroups_fold_past_65535():
    (main,) = REG.interface("sdpa_arena").passes
    wg = {"WG": 64}
    assert main.workgroups({"batch": 1, "heads": 1, "seq_q": 64}, wg) == (1, 1, 1)
    x, y, z = main.workgroups({"batch": 64, "heads": 64, "seq_q": 4096}, wg)
    assert (x, z) == (65535, 1) and x * y * 64 >= 64 * 64 * 4096


def test_unknown_kernel_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kernel 'nope'; registered"):
        REG.kernel("nope")


def test_kernel_files_exist():
    missing = [k for k in KERNELS if not REG.kernel(k).path.exists()]
    assert missing == []
