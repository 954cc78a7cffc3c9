"""flash_fwd.smx as a wgattn Kernel (not yet in shaders/manifest.json): which subgroup-matrix
configuration it takes from an adapter, its tile candidates and their workgroup storage, so that
wgattn.interfaces.flash_fwd.plan() lays cases out for it exactly as for the registered kernels.

The configuration (M, N, K) is a property of the adapter (GPUAdapterInfo.subgroupMatrixConfigs),
chosen here at plan time from what it lists; WGSL needs the dimensions as constants, so they
reach the shader as the defines SMX_M16 / SMX_N16 / SMX_K16 (16 when set, else 8).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from wgattn.registry import Kernel, load

__all__ = ["PREFERRED", "Config", "choose_config", "kernel", "TILES", "STORAGE", "HEAD_DIM_MAX"]

Config = Tuple[int, int, int]  # (M, N, K)

# f16 x f16 -> f32 configurations the kernel is written for, best first (fewest instructions per
# multiply-add first; the benchmark measures each an adapter offers).
PREFERRED: Tuple[Config, ...] = ((16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 16, 16), (8, 8, 16), (8, 8, 8))
HEAD_DIM_MAX = 256

# Tile candidates, best first (RB row blocks of M rows, BC keys a tile); the first whose workgroup
# storage fits the adapter is taken. WG = RB * the subgroup size, so subgroup s < RB owns row block s.
TILES: Tuple[Dict[str, int], ...] = (
    {"RB": 4, "BC": 64},
    {"RB": 8, "BC": 32},
    {"RB": 4, "BC": 32},
    {"RB": 2, "BC": 32},
    {"RB": 2, "BC": 16},
    {"RB": 1, "BC": 16},
)

# Workgroup bytes of the shader's var<workgroup> arrays (kf, vf, sf, pf, the flag), in the
# registry's expression language; KP4 = (K + 8) / 4, NP4 = (N + 8) / 4, SP4 = (N + 4) / 4.
STORAGE = (
    "BC // SN * (DP // SK) * SN * ((SK + 8) // 4) * 8"
    " + BC // SK * (DP // SN) * SK * ((SN + 8) // 4) * 8"
    " + RB * (BC // SN) * SM * ((SN + 4) // 4) * 16"
    " + RB * (BC // SK) * SM * ((SK + 8) // 4) * 8 + 4"
)


def choose_config(offered: Iterable[Mapping[str, object]]) -> Config:
    """The first of PREFERRED that the adapter lists as f16 x f16 -> f32 (GPUSubgroupMatrixConfig
    dicts: componentType, resultComponentType, M, N, K); ValueError naming what it lists when
    none fits."""
    have = {
        (int(c["M"]), int(c["N"]), int(c["K"]))  # type: ignore[call-overload]
        for c in offered
        if c.get("componentType") == "f16" and c.get("resultComponentType") == "f32"
    }
    for cfg in PREFERRED:
        if cfg in have:
            return cfg
    listed = ", ".join(
        f"{c.get('componentType')}->{c.get('resultComponentType')} {c.get('M')}x{c.get('N')}x{c.get('K')}" for c in offered
    )
    raise ValueError(
        "flash_fwd.smx needs an f16 x f16 -> f32 subgroup-matrix configuration with M, N, K in {8, 16}; "
        f"the adapter lists {listed or 'none'}"
    )


def kernel(cfg: Config, subgroup_size: int, tiles: Optional[Sequence[Mapping[str, int]]] = None) -> Kernel:
    """flash_fwd.smx for configuration `cfg` on an adapter whose (largest) subgroup size is
    `subgroup_size`; `tiles` replaces the candidates (one to measure a shape)."""
    m, n, k = cfg
    if any(x not in (8, 16) for x in cfg):
        raise ValueError(f"flash_fwd.smx supports M, N, K in {{8, 16}}, got {m}x{n}x{k}")
    if subgroup_size % m or subgroup_size // m not in (1, 2, 4):
        raise ValueError(
            f"flash_fwd.smx spreads a row over subgroup_size / M = 1, 2 or 4 invocations; "
            f"subgroup size {subgroup_size} with M = {m} does not fit"
        )
    iface = load().interface("flash_fwd")
    overrides: Dict[str, object] = {
        "SM": m,
        "SN": n,
        "SK": k,
        "SG": subgroup_size,
        "WG": "RB * SG",
        "TPR": "SG // SM",
        # head_dim padded to a multiple of 16 (N and K divide it): zeros past head_dim
        "DP": "ceil_div(head_dim, 16) * 16",
    }
    return Kernel(
        id="flash_fwd.smx",
        interface=iface,
        summary="FlashAttention-2 forward on subgroup matrices (f16 operands, f32 accumulation and softmax)",
        overrides=overrides,  # type: ignore[arg-type]
        requires=("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"),
        limits={"head_dim": HEAD_DIM_MAX},
        precision="f16",
        defines={"SMX_M16": int(m == 16), "SMX_N16": int(n == 16), "SMX_K16": int(k == 16), "VEC4": "1 - min(1, head_dim % 4)"},
        tiles=tuple(dict(t) for t in (tiles or TILES)),
        storage=STORAGE,
        caps={"TPR": 4},
        constraints=("BC % 16", "BC // TPR % 4", "max(0, BC // TPR - 64)"),
        grids={"main": {"items": "ceil_div(max_seqlen_q, RB * SM) * batch_size * heads_q", "per_workgroup": "1"}},
    )


def describe(k: Kernel) -> List[str]:
    """The kernel's configuration as short words (for logs)."""
    o = k.overrides
    return [f"{o['SM']}x{o['SN']}x{o['SK']}", f"subgroup {o['SG']}"]
