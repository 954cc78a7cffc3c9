"""The subgroup-matrix GEMM benchmark: C = A · B, f16 x f16 -> f32, on shaders/gemm.smx.wgsl, the
ceiling of every kernel that reaches the tensor cores through WGSL subgroup matrices. Its op,
"gemm", is an ordinary benchmark case (wgattn.page.bench_jobs): a configuration (`GemmConfig`:
M, N, K), the kernel configurations timed on it (`Tile`s: `sweep` by default), the inputs the GPU
fills (wgattn.bandwidth.fill_plans: shaders/hash_fill.wgsl), C checked against float64 before
anything is timed.

* `Tile`: one kernel configuration, its knobs as data (the fragment shape the adapter offers,
  subgroups per workgroup, fragments per subgroup, depth a step, staging copies, the products
  written out or looped, the staging's subgroup index split off);
* `case(config)`: the case (A and B left for the GPU to fill); `plan(case, tile, target)` its
  plan, or the reason the target cannot run it;
* `check_filled(case, outputs)`: C against the float64 product at sampled entries;
* `record(...)`: a benchmark record, TFLOP/s = 2 M N K over the protocol's median.

Python 3.8 (the page's Pyodide builds these plans).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import protocol, tolerance, wgsl
from .bandwidth import device_filled, fill_values
from .interfaces.base import Case, FilledCheck
from .interfaces.config import LiveConfig, knob
from .plan import Buffer, Dispatch, Output, Plan
from .registry import shader_dir
from .target import MATRIX_FEATURE, Target

__all__ = [
    "OP",
    "KERNEL",
    "GemmConfig",
    "Tile",
    "FRAGMENTS",
    "sweep",
    "matrices_of",
    "case",
    "sizes",
    "plan",
    "reference",
    "check_filled",
    "record",
    "flops",
]

OP = "gemm"  # the benchmark op (wgattn.page.bench_jobs)
KERNEL = "gemm.smx"  # the shader (shaders/gemm.smx.wgsl) and the impl its records name
ENTRY = "gemm"
NEEDS = ("shader-f16", "subgroups", MATRIX_FEATURE)
CHECKED = 256  # entries of C checked against float64, the four corners among them
# The fragment shapes (M, N, K) a sweep may be asked for: the H100's f16 x f16 -> f32 ones and
# lavapipe's.
FRAGMENTS = ((16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 8, 8))
_MOST_SIZE = 8192


@dataclass
class GemmConfig(LiveConfig):
    """The product timed: C [rows, cols] = A [rows, depth] · B [depth, cols]; `fragment` picks the
    sweep's fragment shape ("" every f16 x f16 -> f32 one the adapter offers)."""

    rows: int = knob(4096, 16, _MOST_SIZE, hint="M: rows of A and C")
    cols: int = knob(4096, 16, _MOST_SIZE, hint="N: columns of B and C")
    depth: int = knob(4096, 16, _MOST_SIZE, hint="K: columns of A, rows of B")
    fragment: str = knob("", choices=["", *("x".join(map(str, f)) for f in FRAGMENTS)], hint="the sweep's M x N x K")


@dataclass
class Tile(LiveConfig):
    """One configuration of gemm.smx (its WGSL header says what each knob does)."""

    m: int = knob(16, 8, 16, hint="fragment rows: one of the adapter's configurations")
    n: int = knob(16, 8, 16, hint="fragment columns")
    k: int = knob(16, 8, 16, hint="fragment depth")
    sgr: int = knob(2, 1, 8, hint="subgroups along the rows of a block")
    sgc: int = knob(4, 1, 8, hint="... along its columns")
    tm: int = knob(4, 1, 16, hint="result fragments per subgroup along the rows")
    tn: int = knob(2, 1, 16, hint="... along the columns")
    kt: int = knob(64, 8, 128, hint="depth a step")
    stages: int = knob(1, 1, 2, hint="copies of the staging: 1 (two barriers a step) or 2 (one)")
    unroll: bool = knob(True, hint="the products written out (else loops over register arrays)")
    split: bool = knob(True, hint="the staging indexed [subgroup][fragment] (else [fragment])")

    def check(self) -> None:
        bad = [f"{x}={getattr(self, x)}" for x in ("m", "n", "k") if getattr(self, x) not in (8, 16)]
        if bad:
            raise ValueError(f"fragment dimensions are 8 or 16, got {', '.join(bad)}")
        if self.kt % self.k or self.kt % 8:
            raise ValueError(f"kt (depth per step, {self.kt}) must be a multiple of k ({self.k}) and of 8")

    @property
    def block(self) -> Tuple[int, int]:
        """Rows and columns of C a workgroup computes."""
        return self.sgr * self.tm * self.m, self.sgc * self.tn * self.n

    def tag(self) -> str:
        """A short name: '16x16x16 128x128 k64 2x4sg s1 unrolled split'."""
        bm, bn = self.block
        return " ".join(
            [
                f"{self.m}x{self.n}x{self.k}",
                f"{bm}x{bn}",
                f"k{self.kt}",
                f"{self.sgr}x{self.sgc}sg",
                f"s{self.stages}",
                "unrolled" if self.unroll else "loops",
                "split" if self.split else "flat",
            ]
        )

    def loads(self, subgroup: int) -> Tuple[int, int]:
        """16-byte storage loads of A and of B per invocation a step (0 when not whole)."""
        bm, bn = self.block
        wg = self.sgr * self.sgc * subgroup
        a, b = bm * self.kt // 8, self.kt * bn // 8
        return (a // wg if a % wg == 0 else 0), (b // wg if b % wg == 0 else 0)

    def defines(self, subgroup: int) -> Dict[str, int]:
        """The preprocessor's defines for a subgroup size."""
        apt, bpt = self.loads(subgroup)
        return {
            "SMX_M16": self.m // 16,
            "SMX_N16": self.n // 16,
            "SMX_K16": self.k // 16,
            "SGR": self.sgr,
            "SGC": self.sgc,
            "TM": self.tm,
            "TN": self.tn,
            "KT": self.kt,
            "KF": self.kt // self.k,
            "SG": subgroup,
            "STAGES": self.stages,
            "STAGES2": int(self.stages == 2),
            "APT": apt,
            "BPT": bpt,
            "UNROLL": int(self.unroll),
            "SPLIT": int(self.split),
        }

    def faults(self, subgroup: int) -> List[str]:
        """What keeps this configuration from being laid out for a subgroup size."""
        bm, bn = self.block
        wg = self.sgr * self.sgc * subgroup
        apt, bpt = self.loads(subgroup)
        out = []
        if not apt or not bpt or wg % (self.kt // 8) or wg % (bn // 8):
            out.append(f"a {bm}x{self.kt} and a {self.kt}x{bn} block are not whole 16-byte loads of {wg} invocations")
        return out


def _base(m: int, n: int, k: int) -> Tile:
    """NVIDIA's sample's shape for a fragment shape: 8 subgroups (2 x 4), a 128 x 128 block, 64 deep
    (the deepest that fits 48 KiB)."""
    return Tile(m=m, n=n, k=k, sgr=2, sgc=4, tm=128 // 2 // m, tn=128 // 4 // n, kt=64)


def sweep(matrices: Sequence[Tuple[int, int, int]]) -> List[Tile]:
    """The tiles a benchmark times by default, for each fragment shape (M, N, K): the best layout
    (the products written out, the staging split by subgroup, 64 deep), then each of those knobs
    taken back alone, then other depths, staging and block shapes."""
    out: List[Tile] = []
    for m, n, k in matrices:
        base = _base(m, n, k)
        out += [
            base,
            replace(base, unroll=False),
            replace(base, split=False),
            replace(base, unroll=False, split=False),
            replace(base, kt=32),
            replace(base, kt=32, stages=2),
            replace(base, kt=16, stages=2),
            replace(base, kt=32, tn=base.tn * 2),  # 128 x 256
            replace(base, kt=32, tm=base.tm * 2),  # 256 x 128
        ]
    seen = set()
    return [t for t in out if not (t.tag() in seen or seen.add(t.tag()))]  # type: ignore[func-returns-value]


MOST_TILES = 64  # tiles one request may time


def tiles_of(raw: object) -> List[Tile]:
    """Tiles from a request's list of objects of Tile's fields (ValueError naming a bad one)."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MOST_TILES:
        raise ValueError(f"tiles must be a list of 1 to {MOST_TILES} objects of {[f.name for f in fields(Tile)]}")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise ValueError(f"tiles[{i}] must be an object of {[f.name for f in fields(Tile)]}, got {t!r}")
        unknown = sorted(set(t) - {f.name for f in fields(Tile)})
        if unknown:
            raise ValueError(f"tiles[{i}] has unknown knobs {unknown}; knobs: {[f.name for f in fields(Tile)]}")
        try:
            out.append(Tile(**t))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"tiles[{i}]: {exc}") from None
    return out


def matrices_of(target: Target) -> List[Tuple[int, int, int]]:
    """The f16 x f16 -> f32 fragment shapes the target offers, in its order."""
    return [(c.m, c.n, c.k) for c in target.matrix_configs if (c.component, c.result) == ("f16", "f32")]


def tiles_for(config: GemmConfig, target: Target) -> List[Tile]:
    """The default tiles of a configuration: the sweep of its fragment shape, or of every one the
    target offers."""
    if config.fragment:
        return sweep([tuple(int(x) for x in config.fragment.split("x"))])  # type: ignore[list-item]
    return sweep(matrices_of(target))


def case(config: GemmConfig, name: str = OP) -> Case:
    """The product of `config` with A and B left for the GPU to fill (wgattn.bandwidth)."""
    a = device_filled((config.rows, config.depth), np.float16)
    b = device_filled((config.depth, config.cols), np.float16)
    return Case(name, {"a": a, "b": b})


def sizes(c: Case) -> Tuple[int, int, int]:
    """(rows, cols, depth) of a GEMM case."""
    rows, depth = c.inputs["a"].shape
    return int(rows), int(c.inputs["b"].shape[1]), int(depth)


def _source(tile: Tile, subgroup: int) -> str:
    path = shader_dir() / f"{KERNEL}.wgsl"
    return wgsl.preprocess(path.read_text(), tile.defines(subgroup), wgsl.reader(shader_dir()), path.name)


def plan(c: Case, tile: Tile, target: Target) -> Plan:
    """The plan of C = A · B for `tile` on `target`: buffers a, b (f16, for the GPU to fill) and
    c (f32, read back as the output "c"); or a plan that says why the target cannot run it."""
    why = _why_not(c, tile, target)
    if why:
        return Plan.unrunnable(why)
    rows, cols, depth = sizes(c)
    sg = target.subgroup_size()
    source = _source(tile, sg)
    bm, bn = tile.block
    p = Plan(
        buffers=[
            Buffer("a", 2 * rows * depth, "storage"),
            Buffer("b", 2 * depth * cols, "storage"),
            Buffer("c", 4 * rows * cols, "storage", read=True),
        ],
        dispatches=[
            Dispatch(
                label=KERNEL,
                source=source,
                entry_point=ENTRY,
                constants={"ROWS": rows, "COLS": cols, "DEPTH": depth},
                bindings={0: "a", 1: "b", 2: "c"},
                layout=[(0, "read-only-storage"), (1, "read-only-storage"), (2, "storage")],
                workgroups=(cols // bn, rows // bm, 1),
                requires=NEEDS,
                workgroup_storage=wgsl.workgroup_storage(source, ENTRY, {}),
                invocations=wgsl.scope(source, {})["WG"],
            )
        ],
        outputs=[Output("c", "c", 0, (rows, cols))],
        meta={"config": {"tile": tile.tag()}},
    )
    p.unavailable = target.why_not(p)
    return p


def _why_not(c: Case, tile: Tile, target: Target) -> str:
    missing = [f for f in NEEDS if f not in target.features]
    if missing:
        return f"{KERNEL} needs adapter features {missing}, which {target.name} lacks"
    if (tile.m, tile.n, tile.k) not in matrices_of(target):
        return f"{target.name} offers no f16 x f16 -> f32 subgroup matrices of {tile.m}x{tile.n}x{tile.k}"
    sg = target.subgroup_size()
    if not sg:
        return f"{KERNEL} lays its work out by one fixed subgroup size, which {target.name} does not report"
    faults = tile.faults(sg)
    if faults:
        return f"{tile.tag()}: {'; '.join(faults)}"
    rows, cols, depth = sizes(c)
    bm, bn = tile.block
    if rows % bm or cols % bn or depth % (tile.kt * tile.stages):
        return f"{tile.tag()}: {rows}x{cols}x{depth} is not a whole number of {bm}x{bn} blocks {tile.kt * tile.stages} deep"
    return ""


def _picks(rows: int, cols: int, count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """`count` (row, col) entries of C, the four corners among them."""
    rs = np.random.RandomState(seed)
    r = np.concatenate([[0, 0, rows - 1, rows - 1], rs.randint(0, rows, count - 4)])
    c = np.concatenate([[0, cols - 1, 0, cols - 1], rs.randint(0, cols, count - 4)])
    return r.astype(np.int64), c.astype(np.int64)


def reference(c: Case, rows: np.ndarray, cols: np.ndarray, dtype=np.float64) -> np.ndarray:
    """C at entries (rows[i], cols[i]) of the filled inputs: float64, or (float32) a naive float32
    run's (the products summed in order in float32)."""
    _, n, depth = sizes(c)
    k = np.arange(depth, dtype=np.int64)
    a = fill_values("a", rows[:, None] * depth + k[None, :])
    b = fill_values("b", k[None, :] * n + cols[:, None])
    if dtype == np.float64:
        return (a * b).sum(axis=1)
    return np.cumsum((a * b).astype(np.float32), axis=1, dtype=np.float32)[:, -1].astype(np.float64)


def check_filled(c: Case, outputs: Mapping[str, np.ndarray], seed: int = 0) -> FilledCheck:
    """C (f32 [rows, cols]) of a run on the filled inputs against float64 at CHECKED entries, by
    the tolerance rule (the naive float32 run's error there; the inputs are multiples of 1/64 and
    their products' sums exact in float32 below 4096 in magnitude, so it is mostly the floor)."""
    rows, cols, _ = sizes(c)
    got_c = np.asarray(outputs["c"], dtype=np.float32).reshape(rows, cols)
    r, k = _picks(rows, cols, min(CHECKED, rows * cols), seed)
    exact = reference(c, r, k)
    naive = tolerance.max_abs_err(reference(c, r, k, np.float32), exact)
    err = tolerance.max_abs_err(got_c[r, k].astype(np.float64), exact)
    allowed = tolerance.allowance(naive, exact)
    return {"ok": bool(err <= allowed), "max_abs_err": err, "allowed": allowed, "pairs": [[int(x), int(y)] for x, y in zip(r, k)]}


def flops(c: Case) -> float:
    rows, cols, depth = sizes(c)
    return 2.0 * rows * cols * depth


def record(
    c: Case,
    tile: Tile,
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
    the tile that ran (its tag and knobs), the check of C before timing (its verdict, not the entries).
    `info`: wgattn.bench.RunInfo."""
    st = protocol.summarize(proto, measured.samples)
    check = None if verified is None else {k: v for k, v in verified.items() if k != "pairs"}
    return {
        "op": OP,
        "case": c.name,
        "impl": KERNEL,
        "shape": list(sizes(c)),
        "config": tile.tag(),
        "dtype": "f16",
        "runtime": info.runtime,
        "browser": info.browser,
        "flags": list(info.flags),
        "mode": mode,
        "adapter": adapter,
        "tflops": flops(c) / (st.median_ms * 1e-3) / 1e12,
        **measured.record_fields(proto),
        "timer": timer,
        "timer_resolution_ns": float(measured.resolution_ns),
        "repeat": int(repeat),
        "verified": check,
        "knobs": tile.to_dict(),
        "time": info.time,
        "commit": info.commit,
    }
