"""The subgroup-matrix GEMM benchmark: C = A · B, f16 x f16 -> f32, on shaders/gemm.smx.wgsl, the
ceiling of every kernel that reaches the tensor cores through WGSL subgroup matrices.

* `Config`: one kernel configuration, its knobs as data (the fragment shape the adapter offers,
  subgroups per workgroup, fragments per subgroup, depth a step, staging, load widths, layouts);
  `sweep(target)` the configurations a benchmark run times, each for every fragment shape;
* `plan(case, config, target)`: the plan of one product (A and B made on the GPU by `fill_plans`,
  C read back), or the reason the target cannot run it;
* `check(case, c)`: C against the float64 product of the same inputs (`fill_values`) at sampled
  entries, before anything is timed;
* `record(...)`: a benchmark record, TFLOP/s = 2 M N K over the protocol's median.

Python 3.8 (the page's Pyodide builds these plans).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import protocol, wgsl
from .plan import Buffer, Dispatch, Plan
from .registry import shader_dir
from .target import MATRIX_FEATURE, Target

__all__ = [
    "Case",
    "Config",
    "FRAGMENTS",
    "sweep",
    "matrices_of",
    "plan",
    "fill_plans",
    "fill_values",
    "check",
    "record",
    "flops",
    "KERNEL",
    "SEEDS",
]

KERNEL = "gemm.smx"  # the shader (shaders/gemm.smx.wgsl) and the impl its records name
ENTRY = "gemm"
NEEDS = ("shader-f16", "subgroups", MATRIX_FEATURE)
# The inputs the GPU makes (shaders/hash_fill.wgsl): one hash seed per tensor.
SEEDS = {"a": 0x61616161, "b": 0x62626262}
_FILL_WG = 256  # hash_fill.wgsl's workgroup size
CHECKED = 512  # entries of C checked against float64 (every workgroup's block is as likely)
# The fragment shapes (M, N, K) a sweep may be asked for: the H100's f16 x f16 -> f32 ones and
# lavapipe's.
FRAGMENTS = ((16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 8, 8))


@dataclass(frozen=True)
class Case:
    """C [rows, cols] = A [rows, depth] · B [depth, cols]."""

    rows: int
    cols: int
    depth: int

    @property
    def shape(self) -> List[int]:
        return [self.rows, self.cols, self.depth]


@dataclass(frozen=True)
class Config:
    """One configuration of gemm.smx (the WGSL header says what each knob does)."""

    m: int = 16  # the fragment shape M x N x K: one of the adapter's configurations
    n: int = 16
    k: int = 16
    sgr: int = 2  # subgroups along the rows of a block
    sgc: int = 4  # ... along its columns
    tm: int = 4  # result fragments per subgroup along the rows
    tn: int = 2  # ... along the columns
    kt: int = 16  # depth per step
    stages: int = 1  # copies of the staging: 1 (two barriers a step) or 2 (one)
    prefetch: bool = True  # the next step's blocks loaded into registers before this step's products
    load16: bool = True  # 16-byte storage loads (else 8)
    stage16: bool = True  # 16-byte workgroup elements (else 8)
    frag: bool = True  # staging as one array per fragment (else the sample's padded rows)
    bt: bool = False  # B given transposed, [cols, depth]
    sizes_uniform: bool = False  # sizes read from the uniform (else pipeline constants)

    @property
    def block(self) -> Tuple[int, int]:
        """Rows and columns of C a workgroup computes."""
        return self.sgr * self.tm * self.m, self.sgc * self.tn * self.n

    def tag(self) -> str:
        """A short name: '16x16x16 128x128 k16 2x4 pf s1 w16/16 frag B'."""
        bm, bn = self.block
        parts = [
            f"{self.m}x{self.n}x{self.k}",
            f"{bm}x{bn}",
            f"k{self.kt}",
            f"{self.sgr}x{self.sgc}sg",
            "pf" if self.prefetch else "nopf",
            f"s{self.stages}",
            f"w{16 if self.load16 else 8}/{16 if self.stage16 else 8}",
            "frag" if self.frag else "rows",
            "Bt" if self.bt else "B",
        ]
        if self.sizes_uniform:
            parts.append("uniform")
        return " ".join(parts)

    def defines(self, subgroup: int) -> Dict[str, int]:
        """The preprocessor's defines for a subgroup size."""
        return {
            "SMX_M16": self.m // 16,
            "SMX_N16": self.n // 16,
            "SMX_K16": self.k // 16,
            "SGR": self.sgr,
            "SGC": self.sgc,
            "TM": self.tm,
            "TN": self.tn,
            "KT": self.kt,
            "SG": subgroup,
            "STAGES2": int(self.stages == 2),
            "PREFETCH": int(self.prefetch),
            "LOAD16": int(self.load16),
            "STAGE16": int(self.stage16),
            "SPLIT": int(self.load16 and not self.stage16),
            "FRAG": int(self.frag),
            "BT": int(self.bt),
            "SIZES_UNIFORM": int(self.sizes_uniform),
        }

    def faults(self) -> List[str]:
        """What makes this configuration unbuildable whatever the adapter."""
        out = []
        if not {self.m, self.n, self.k} <= {8, 16}:
            out.append(f"fragment {self.m}x{self.n}x{self.k}: M, N and K are 8 or 16")
        if self.kt % self.k or self.kt % 8:
            out.append(f"depth per step {self.kt} must be a multiple of K={self.k} and of 8")
        if self.stages not in (1, 2):
            out.append(f"stages must be 1 or 2, got {self.stages}")
        if self.stage16 and not self.load16:
            out.append("16-byte workgroup elements need 16-byte loads")
        if min(self.sgr, self.sgc, self.tm, self.tn, self.kt) < 1:
            out.append("subgroups, fragments and depth must be positive")
        return out

    def to_json(self) -> Dict[str, object]:
        return asdict(self)


def _base(m: int, n: int, k: int) -> Config:
    """NVIDIA's sample's shape for a fragment shape: 8 subgroups (2 x 4), a 128 x 128 block, 16 deep."""
    return Config(m=m, n=n, k=k, sgr=2, sgc=4, tm=128 // 2 // m, tn=128 // 4 // n, kt=16)


def sweep(matrices: Sequence[Tuple[int, int, int]]) -> List[Config]:
    """The configurations a benchmark run times, for each fragment shape (M, N, K): the sample's
    (8 subgroups, 128 x 128, 16 deep, prefetch, 16-byte loads), then one knob changed at a time,
    then other block shapes."""
    out: List[Config] = []
    for m, n, k in matrices:
        base = _base(m, n, k)
        out += [
            base,
            replace(base, bt=True),
            replace(base, frag=False),
            replace(base, sizes_uniform=True),
            replace(base, stage16=False),
            replace(base, load16=False, stage16=False),
            replace(base, prefetch=False),
            replace(base, stages=2),
            replace(base, stages=2, prefetch=False),
            replace(base, kt=32),
            replace(base, kt=64),
            replace(base, tn=base.tn * 2),  # 128 x 256
            replace(base, tm=base.tm * 2),  # 256 x 128
            replace(base, sgr=2, sgc=2, tm=64 // m, tn=64 // n, kt=32),  # the first probe's: 4 subgroups of 64 x 64
        ]
    seen = set()
    return [c for c in out if not (c in seen or seen.add(c))]  # type: ignore[func-returns-value]


def matrices_of(target: Target) -> List[Tuple[int, int, int]]:
    """The f16 x f16 -> f32 fragment shapes the target offers, in its order."""
    return [(c.m, c.n, c.k) for c in target.matrix_configs if (c.component, c.result) == ("f16", "f32")]


def _source(config: Config, subgroup: int) -> str:
    path = shader_dir() / f"{KERNEL}.wgsl"
    return wgsl.preprocess(path.read_text(), config.defines(subgroup), wgsl.reader(shader_dir()), path.name)


def plan(case: Case, config: Config, target: Target) -> Plan:
    """The plan of C = A · B for `config` on `target`: buffers a, b (f16, made by `fill_plans`),
    c (f32, read back) and dims; or a plan that says why the target cannot run it."""
    why = _why_not(case, config, target)
    if why:
        return Plan.unrunnable(why)
    sg = target.subgroup_size()
    source = _source(config, sg)
    names = wgsl.scope(source, {})
    bm, bn = config.block
    dims = np.array([case.rows, case.cols, case.depth, 0], dtype=np.uint32)
    p = Plan(
        buffers=[
            Buffer("a", 2 * case.rows * case.depth, "storage"),
            Buffer("b", 2 * case.depth * case.cols, "storage"),
            Buffer("c", 4 * case.rows * case.cols, "storage", read=True),
            Buffer("dims", 16, "uniform", data=dims.tobytes()),
        ],
        dispatches=[
            Dispatch(
                label=KERNEL,
                source=source,
                entry_point=ENTRY,
                constants={"ROWS": case.rows, "COLS": case.cols, "DEPTH": case.depth},
                bindings={0: "a", 1: "b", 2: "c", 3: "dims"},
                layout=[(0, "read-only-storage"), (1, "read-only-storage"), (2, "storage"), (3, "uniform")],
                workgroups=(case.cols // bn, case.rows // bm, 1),
                requires=NEEDS,
                workgroup_storage=wgsl.workgroup_storage(source, ENTRY, {}),
                invocations=names["WG"],
            )
        ],
        outputs=[],
        meta={"config": config.to_json(), "tag": config.tag()},
    )
    p.unavailable = target.why_not(p)
    return p


def _why_not(case: Case, config: Config, target: Target) -> str:
    faults = config.faults()
    if faults:
        return f"{config.tag()}: {'; '.join(faults)}"
    missing = [f for f in NEEDS if f not in target.features]
    if missing:
        return f"{KERNEL} needs adapter features {missing}, which {target.name} lacks"
    if (config.m, config.n, config.k) not in matrices_of(target):
        return f"{target.name} offers no f16 x f16 -> f32 subgroup matrices of {config.m}x{config.n}x{config.k}"
    if not target.subgroup_size():
        return f"{KERNEL} lays its work out by one fixed subgroup size, which {target.name} does not report"
    bm, bn = config.block
    if case.rows % bm or case.cols % bn or case.depth % config.kt:
        return f"{config.tag()}: {case.rows}x{case.cols}x{case.depth} is not a whole number of {bm}x{bn} blocks {config.kt} deep"
    return ""


def fill_values(name: str, index: np.ndarray) -> np.ndarray:
    """The values hash_fill.wgsl writes at element indices `index` of input `name`, float64:
    ((lowbias32(index ^ seed) >> 24) - 128) / 64, exact in f16."""
    x = np.asarray(index, dtype=np.uint32) ^ np.uint32(SEEDS[name])
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return ((x >> np.uint32(24)).astype(np.int64) - 128) / 64.0


def fill_plans(p: Plan) -> List[Plan]:
    """The fills of a plan's inputs a and b, one plan each, binding them by name (the executor
    binds the timed plan's buffer of that name)."""
    source = (shader_dir() / "hash_fill.wgsl").read_text()
    out = []
    for name, seed in SEEDS.items():
        size = next(b.size for b in p.buffers if b.name == name)
        words = size // 4
        groups = -(-words // _FILL_WG)
        x = min(groups, 65535)
        out.append(
            Plan(
                buffers=[Buffer(name, size, "storage")],
                dispatches=[
                    Dispatch(
                        label=f"fill.{name}",
                        source=source,
                        entry_point="fill",
                        constants={"SEED": seed, "HALF": 1},
                        bindings={0: name},
                        layout=[(0, "storage")],
                        workgroups=(x, -(-groups // x), 1),
                        invocations=_FILL_WG,
                    )
                ],
                outputs=[],
            )
        )
    return out


def _picks(case: Case, count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """`count` (row, col) entries of C, the four corners among them."""
    rs = np.random.RandomState(seed)
    rows = np.concatenate([[0, 0, case.rows - 1, case.rows - 1], rs.randint(0, case.rows, count - 4)])
    cols = np.concatenate([[0, case.cols - 1, 0, case.cols - 1], rs.randint(0, case.cols, count - 4)])
    return rows.astype(np.int64), cols.astype(np.int64)


def reference(case: Case, rows: np.ndarray, cols: np.ndarray, bt: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """C at entries (rows[i], cols[i]) in float64, and the error of a naive float32 run there
    (products summed in order in float32): the yardstick of `check`."""
    k = np.arange(case.depth, dtype=np.int64)
    a = fill_values("a", rows[:, None] * case.depth + k[None, :])
    if bt:
        b = fill_values("b", cols[:, None] * case.depth + k[None, :])
    else:
        b = fill_values("b", k[None, :] * case.cols + cols[:, None])
    exact = (a * b).sum(axis=1)
    naive = np.cumsum((a * b).astype(np.float32), axis=1, dtype=np.float32)[:, -1]
    return exact, np.abs(naive.astype(np.float64) - exact)


def check(case: Case, c: np.ndarray, bt: bool = False, seed: int = 0) -> Dict[str, object]:
    """C (f32 [rows, cols], as read back) against float64 at CHECKED entries: pass when the
    largest error is at most twice a naive float32 run's there plus 16 ulps of the largest
    entry (the inputs are multiples of 1/64 and sums of their products are exact in float32 up to
    4096, so both terms are usually all there is)."""
    c = np.asarray(c, dtype=np.float32).reshape(case.rows, case.cols)
    rows, cols = _picks(case, min(CHECKED, case.rows * case.cols), seed)
    exact, naive = reference(case, rows, cols, bt)
    got = c[rows, cols].astype(np.float64)
    err = np.abs(got - exact)
    if not np.all(np.isfinite(got)):
        err = np.full_like(err, np.inf)
    floor = 16 * float(np.spacing(np.float32(max(1.0, float(np.abs(exact).max())))))
    allowed = 2 * float(naive.max()) + floor
    worst = int(np.argmax(err))
    return {
        "pass": bool(err.max() <= allowed),
        "max_abs_err": float(err.max()),
        "allowed": allowed,
        "checked": int(err.size),
        "worst": [int(rows[worst]), int(cols[worst])],
    }


def flops(case: Case) -> float:
    return 2.0 * case.rows * case.cols * case.depth


def record(
    case: Case,
    config: Config,
    measured: protocol.Measured,
    proto: protocol.Protocol,
    timer: str,
    adapter: str,
    info,
    mode: str = "checked",
    repeat: int = 0,
    verified: Optional[Mapping[str, object]] = None,
) -> Dict[str, object]:
    """One GEMM record (the suite's gemm.jsonl): TFLOP/s = 2 M N K over the protocol's median,
    the knobs that ran, the check of C before timing. `info`: wgattn.bench.RunInfo."""
    st = protocol.summarize(proto, measured.samples)
    return {
        "op": "gemm",
        "impl": KERNEL,
        "shape": case.shape,
        "dtype": "f16",
        "config": config.tag(),
        "knobs": config.to_json(),
        "runtime": info.runtime,
        "browser": info.browser,
        "flags": list(info.flags),
        "mode": mode,
        "adapter": adapter,
        "tflops": flops(case) / (st.median_ms * 1e-3) / 1e12,
        **measured.record_fields(proto),
        "timer": timer,
        "timer_resolution_ns": float(measured.resolution_ns),
        "repeat": int(repeat),
        "verified": dict(verified) if verified is not None else None,
        "time": info.time,
        "commit": info.commit,
    }
