"""The benchmark's kernels: a registered kernel (shaders/manifest.json; flash_fwd.smx by default)
with the adapter's names pinned to one subgroup-matrix configuration and subgroup size, so that
every configuration an adapter lists can be measured, and flash_fwd.smx's other kinds (where K and
V come from).

A registered kernel with a "matrix" entry takes its configuration from the target at plan time (the
first f16 x f16 -> f32 one the adapter lists) and its subgroup size from the adapter's (fixed) one;
WGSL needs the dimensions as constants, so they reach the shader as the defines SMX_M16 / SMX_N16 /
SMX_K16 (16 when set, else 8). A kernel without one (varlen_bwd.tiled) is taken as registered: the
harness's plumbing checked on a kernel that needs no subgroup matrices.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

from wgattn import interfaces
from wgattn.plan import Buffer, Plan
from wgattn.registry import Kernel, Knob, load
from wgattn.target import Target

__all__ = [
    "PREFERRED",
    "Config",
    "choose_config",
    "kernel",
    "kinds_of",
    "f16_plan",
    "KINDS",
    "TILES",
    "HEAD_DIM_MAX",
    "REGISTERED",
    "DEFAULT_KERNEL",
]

Config = Tuple[int, int, int]  # (M, N, K)
# Where K and V fragments come from: tiles staged in workgroup memory from the f32 inputs, tiles
# staged from f16 copies (a pass before makes them), fragments loaded straight from those copies.
# "+pf": the next tile's K and V are loaded into registers while this one is computed (PREFETCH).
KINDS = ("staged", "staged16+pf", "direct", "staged+pf", "staged16")  # most telling first: a page may run out of time
# The defines that make the kinds (flash_fwd.smx's); a kernel without them has one kind, "staged":
# the kernel as registered.
_KIND_DEFINES = ("KV_F16", "KV_DIRECT", "PREFETCH")

# f16 x f16 -> f32 configurations the kernel is written for, best first (fewest instructions per
# multiply-add first; the benchmark measures each an adapter offers).
PREFERRED: Tuple[Config, ...] = ((16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 16, 16), (8, 8, 16), (8, 8, 8))

DEFAULT_KERNEL = "flash_fwd.smx"
REGISTERED = load().kernel(DEFAULT_KERNEL)
HEAD_DIM_MAX = REGISTERED.limits["head_dim"]
# flash_fwd.smx's tile candidates, best first (RB row blocks of M rows, BC keys a tile).
TILES: Tuple[Dict[str, Knob], ...] = tuple(dict(t) for t in REGISTERED.tiles)
# The constraint only flash_fwd.smx's prefetching kinds need (the WGSL's private prefetch arrays).
_PREFETCH_ONLY = "max(0, ceil_div(BC * DP // 4, WG) - 32)"


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


def kinds_of(kernel_id: str = DEFAULT_KERNEL) -> Tuple[str, ...]:
    """The kinds registered kernel `kernel_id` can be built in: KINDS for one with flash_fwd.smx's
    kind defines (KV_F16, KV_DIRECT, PREFETCH), else ("staged",), the kernel as registered."""
    k = load().kernel(kernel_id)
    return KINDS if all(name in k.defines for name in _KIND_DEFINES) else ("staged",)


def kernel(
    cfg: Config,
    subgroup_size: int,
    tiles: Optional[Sequence[Mapping[str, int]]] = None,
    template: str = "",
    kind: Optional[str] = None,
    kernel_id: str = DEFAULT_KERNEL,
) -> Kernel:
    """Registered kernel `kernel_id` (flash_fwd.smx by default) for configuration `cfg` on an
    adapter whose subgroup size is `subgroup_size`: SGM_M, SGM_N, SGM_K and SUBGROUP_SIZE pinned
    to them in its overrides, defines, tiles, constraints and grids (a kernel without "matrix" is
    taken as registered: `cfg` and `subgroup_size` do not apply); `tiles` replaces the
    candidates (one to measure a shape); `template`, a path without .wgsl relative to shaders/,
    replaces the kernel's file (an experiment, a planted bug); `kind` (kinds_of; None: the
    registered one) for flash_fwd.smx: "staged" (K, V tiles staged from the f32 inputs),
    "staged16" (staged from f16 copies made by a pass before: KV_F16) or "direct" (fragments
    loaded from those copies: KV_DIRECT); the last two are planned with f16_plan; "+pf" adds
    PREFETCH to a staged kind (the registered kind is "staged+pf"). Any other kernel has the one
    kind "staged", as registered."""
    base = load().kernel(kernel_id)
    kinds = kinds_of(kernel_id)
    if kind is not None and kind not in kinds:
        raise ValueError(f"{kernel_id}: kind must be one of {kinds}, got {kind!r}")
    chosen = tuple(dict(t) for t in tiles) if tiles else None
    if base.matrix is None:  # nothing to pin
        return replace(base, template=template or base.template, tiles=chosen or base.tiles)
    if base.matrix != ("f16", "f32"):
        raise ValueError(
            f"{kernel_id} needs {base.matrix[0]} -> {base.matrix[1]} subgroup matrices; the harness pins f16 -> f32 ones"
        )
    m, n, k = cfg
    if any(x not in (8, 16) for x in cfg):
        raise ValueError(f"{kernel_id} supports M, N, K in {{8, 16}}, got {m}x{n}x{k}")
    if kinds == KINDS and (subgroup_size % m or subgroup_size // m not in (1, 2, 4)):
        raise ValueError(
            f"{kernel_id} spreads a row over subgroup_size / M = 1, 2 or 4 invocations; "
            f"subgroup size {subgroup_size} with M = {m} does not fit"
        )
    names = {"SGM_M": m, "SGM_N": n, "SGM_K": k, "SUBGROUP_SIZE": subgroup_size}

    def pin(value: object) -> object:
        if not isinstance(value, str):
            return value
        return re.sub(r"\b(SGM_[MNK]|SUBGROUP_SIZE)\b", lambda g: str(names[g.group(1)]), value)

    defines = {name: pin(v) for name, v in base.defines.items()}
    constraints = base.constraints
    if kinds == KINDS:
        kind = kind or "staged+pf"
        prefetch = kind.endswith("+pf")
        defines.update(
            KV_F16=int(kind.startswith(("staged16", "direct"))), KV_DIRECT=int(kind == "direct"), PREFETCH=int(prefetch)
        )
        constraints = tuple(c for c in constraints if prefetch or c != _PREFETCH_ONLY)
    return replace(
        base,
        template=template or base.template,
        overrides={name: pin(v) for name, v in base.overrides.items()},  # type: ignore[misc]
        defines=defines,  # type: ignore[arg-type]
        tiles=tuple({name: pin(v) for name, v in t.items()} for t in (chosen or base.tiles)),  # type: ignore[misc]
        constraints=tuple(str(pin(c)) for c in constraints),
        grids={p: {key: str(pin(v)) for key, v in g.items()} for p, g in base.grids.items()},
        matrix=None,  # the configuration is pinned: any target offering the feature plans it
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
