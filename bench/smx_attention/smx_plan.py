"""flash_fwd.smx as a wgattn Kernel (not yet in shaders/manifest.json): which subgroup-matrix
configuration it takes from an adapter and its tile candidates, so that the flash_fwd interface's
plan() lays cases out for it exactly as for the registered kernels (the workgroup storage of each
candidate is read from the WGSL, as for every kernel).

The configuration (M, N, K) is a property of the adapter (GPUAdapterInfo.subgroupMatrixConfigs),
chosen here at plan time from what it lists; WGSL needs the dimensions as constants, so they
reach the shader as the defines SMX_M16 / SMX_N16 / SMX_K16 (16 when set, else 8).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from wgattn import interfaces
from wgattn.plan import Buffer, Plan
from wgattn.registry import Kernel, load
from wgattn.target import Target

__all__ = ["PREFERRED", "Config", "choose_config", "kernel", "f16_plan", "KINDS", "TILES", "HEAD_DIM_MAX"]

Config = Tuple[int, int, int]  # (M, N, K)
# Where K and V fragments come from: tiles staged in workgroup memory from the f32 inputs, tiles
# staged from f16 copies (a pass before makes them), fragments loaded straight from those copies.
# "+pf": the next tile's K and V are loaded into registers while this one is computed (PREFETCH).
KINDS = ("staged", "staged16+pf", "direct", "staged+pf", "staged16")  # most telling first: a page may run out of time

# f16 x f16 -> f32 configurations the kernel is written for, best first (fewest instructions per
# multiply-add first; the benchmark measures each an adapter offers).
PREFERRED: Tuple[Config, ...] = ((16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 16, 16), (8, 8, 16), (8, 8, 8))
HEAD_DIM_MAX = 256

# Tile candidates, best first (RB row blocks of M rows, BC keys a tile); the first whose workgroup
# storage fits the adapter is taken. WG = RB * the subgroup size (TPR = subgroup size / M), so
# subgroup s < RB owns row block s. Order from the H100 (docs/performance.md): 8 row blocks of
# 16 keys led at both timed shapes in every staged kind (44-45 TFLOP/s staged with prefetch).
TILES: Tuple[Dict[str, int], ...] = (
    {"RB": 8, "BC": 16},
    {"RB": 4, "BC": 64},
    {"RB": 8, "BC": 32},
    {"RB": 4, "BC": 32},
    {"RB": 2, "BC": 32},
    {"RB": 2, "BC": 16},
    {"RB": 1, "BC": 16},
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


def kernel(
    cfg: Config,
    subgroup_size: int,
    tiles: Optional[Sequence[Mapping[str, int]]] = None,
    template: str = "",
    kind: str = "staged",
) -> Kernel:
    """flash_fwd.smx for configuration `cfg` on an adapter whose (largest) subgroup size is
    `subgroup_size`; `tiles` replaces the candidates (one to measure a shape); `template`, a path
    without .wgsl relative to shaders/, replaces the kernel's file (an experiment, a planted bug);
    `kind`: "staged" (K, V tiles staged from the f32 inputs), "staged16" (staged from f16
    copies made by a pass before: KV_F16) or "direct" (fragments loaded from those copies:
    KV_DIRECT); the last two are planned with f16_plan; "+pf" adds PREFETCH to a staged kind."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    m, n, k = cfg
    if any(x not in (8, 16) for x in cfg):
        raise ValueError(f"flash_fwd.smx supports M, N, K in {{8, 16}}, got {m}x{n}x{k}")
    if subgroup_size % m or subgroup_size // m not in (1, 2, 4):
        raise ValueError(
            f"flash_fwd.smx spreads a row over subgroup_size / M = 1, 2 or 4 invocations; "
            f"subgroup size {subgroup_size} with M = {m} does not fit"
        )
    overrides: Dict[str, object] = {
        "SM": m,
        "SN": n,
        "SK": k,
        "SG": subgroup_size,
        # invocations per query row in the softmax: a subgroup per row block (more, e.g. to test
        # the shuffles on an adapter whose subgroup holds one fragment row per invocation)
        "TPR": "SG // SM",
        "WG": "RB * SM * TPR",
        # head_dim padded to a multiple of 16 (N and K divide it): zeros past head_dim
        "DP": "ceil_div(head_dim, 16) * 16",
    }
    return Kernel(
        id="flash_fwd.smx",
        template=template,
        interface="flash_fwd",
        abi=load().abi("flash_fwd"),
        summary="FlashAttention-2 forward on subgroup matrices (f16 operands, f32 accumulation and softmax)",
        overrides=overrides,  # type: ignore[arg-type]
        requires=("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"),
        limits={"head_dim": HEAD_DIM_MAX},
        precision="f16",
        defines={
            "SMX_M16": int(m == 16),
            "SMX_N16": int(n == 16),
            "SMX_K16": int(k == 16),
            "VEC4": "1 - min(1, head_dim % 4)",
            "KV_F16": int(kind.startswith(("staged16", "direct"))),
            "KV_DIRECT": int(kind == "direct"),
            "PREFETCH": int(kind.endswith("+pf")),
        },
        tiles=tuple(dict(t) for t in (tiles or TILES)),
        # TPR <= 4; BC a multiple of 16 and of 4 * TPR; BC / TPR <= 64 and, prefetching, K/V vec4
        # per invocation <= 32 (the WGSL's private arrays)
        constraints=("max(0, TPR - 4)", "BC % 16", "BC // TPR % 4", "max(0, BC // TPR - 64)")
        + (("max(0, ceil_div(BC * DP // 4, WG) - 32)",) if kind.endswith("+pf") else ()),
        grids={"main": {"items": "ceil_div(max_seqlen_q, RB * SM) * batch_size * heads_q", "per_workgroup": "1"}},
    )


def f16_plan(k: Kernel, case, target: Target, overrides: Optional[Mapping[str, int]] = None) -> Plan:
    """The flash_fwd plan on `target` for the KV_F16 variants, plus what the interface has no
    place for yet: the f16 copies kh, vh (BC rows of zeros past the last key) and the pass to_f16
    that fills them, run before the attention pass. A plan the target cannot run comes back as
    it is (`unavailable` says why)."""
    plan = interfaces.get("flash_fwd").plan(k, case, target, overrides=overrides)
    if not plan.dispatches:
        return plan
    (main,) = plan.dispatches
    q = case.inputs["k"]
    total_k, hkv, d = q.shape
    bc, dp = int(main.constants["BC"]), int(main.constants["DP"])
    size = (total_k + bc) * hkv * dp * 2
    plan.buffers += [Buffer("kh", size, "storage"), Buffer("vh", size, "storage")]
    extra = {8: "kh", 9: "vh"}
    k_v = {1: main.bindings[1], 2: main.bindings[2]}
    # the attention pass reads kh, vh instead of k, v: 7 storage buffers (WebGPU's default is 8)
    main.bindings = {**{i: b for i, b in main.bindings.items() if i not in k_v}, **extra}
    main.layout = [(i, t) for i, t in main.layout if i not in k_v] + [(8, "storage"), (9, "storage")]
    groups = -(-total_k * hkv * (dp // 4) // 64)
    wg = (min(groups, 65535), -(-groups // 65535), 1) if groups else (1, 1, 1)
    conv = replace(
        main,
        label="flash_fwd.smx.to_f16",
        entry_point="to_f16",
        bindings={**k_v, 7: main.bindings[7], **extra},
        layout=[(1, "read-only-storage"), (2, "read-only-storage"), (7, "uniform"), (8, "storage"), (9, "storage")],
        workgroups=wg,
        workgroup_storage=0,
        invocations=64,
    )
    plan.dispatches = [conv, main]
    plan.unavailable = target.why_not(plan)
    return plan


def describe(k: Kernel) -> List[str]:
    """The kernel's configuration as short words (for logs)."""
    o = k.overrides
    return [f"{o['SM']}x{o['SN']}x{o['SK']}", f"subgroup {o['SG']}"]
