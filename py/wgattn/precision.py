"""The precision probe: how far an adapter's floating-point built-ins are from float64, on the
arguments the kernels feed them (lavapipe's tanh is off by 1e-7 absolute near 0,
thousands of ulps, which WGSL allows and which moved soft-capped scores by 3e-6).

`plan()` builds one dispatch of shaders/precision_probe.wgsl (any executor runs it: wgpu-py
through `wgattn.native`, the page's WebGPU through static/precision.js); `judge()` turns the
read-back results into the report (ProbeReport), one row per function (FunctionReport),
where ulps are |got - exact| / ulp32(exact), ulp32(v) the float32 spacing at |v|, and
within_wgsl says whether every sample met WGSL's accuracy rule (None where the rule is "inherited"
from other functions rather than a number). Runs on
Python 3.8 with numpy 1.17 (the page) as well as on current CPython.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Callable, Dict, List, NamedTuple, Optional, TypedDict

import numpy as np

from . import wire
from .plan import Buffer, Dispatch, Output, Plan
from .registry import shader_dir
from .wgsl import preprocess, reader

__all__ = ["Function", "FUNCTIONS", "SAMPLES", "plan", "judge", "probe", "render_table", "worst_ulps"]

SAMPLES = 8192  # arguments per function (one dispatch of 12 x 128 workgroups)
WG = 64  # precision_probe.wgsl's workgroup size
SEED = 11
CAPS = (5.0, 30.0, 50.0)  # softcaps the probe draws (30 is Gemma 2's, the issue's)


class Function(NamedTuple):
    name: str
    expr: str  # the WGSL evaluated, in a, b, c: case f of the probe's switch (evaluate_wgsl)
    domain: str  # the arguments, in words: where the kernels use the function
    wgsl_allows: str  # WGSL's accuracy requirement (Vulkan's is the same)
    args: Callable[[np.random.RandomState, int], np.ndarray]  # -> [n, 3] float32
    exact: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]  # float64 a, b, c -> float64
    # WGSL's bound as an absolute error per sample (a, exact) -> float64, where it is a number
    allowed: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None


class Worst(TypedDict):
    args: List[float]
    got: float
    exact: float


class FunctionReport(TypedDict):
    """One built-in's row: its worst error in float32 ulps and absolute, and whether that is
    within what WGSL allows (None where WGSL states no bound)."""

    name: str
    expr: str
    domain: str
    wgsl_allows: str
    samples: int
    max_ulps: float
    max_abs: float
    within_wgsl: Optional[bool]
    worst: Worst


class ProbeReport(TypedDict):
    adapter: Dict[str, Any]  # the runtime's adapter description (wgattn.native's info)
    functions: List[FunctionReport]


def _ulps(k) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """WGSL's "k ulps" (k a number or a function of the argument) as an absolute bound."""
    return lambda a, exact: (k(a) if callable(k) else k) * _ulp32(exact)


def _log_rule(a: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """3 ulps outside [0.5, 2]; an absolute 2^-21 inside."""
    return np.where((a >= 0.5) & (a <= 2.0), 2.0**-21, 3.0 * _ulp32(exact))


def _spread(rs: np.random.RandomState, n: int, lo: float, hi: float, near0: float = 0.0) -> np.ndarray:
    """n arguments in [lo, hi]: uniform, plus (near0 > 0) a quarter of magnitudes spread
    geometrically over [near0, 1] of both signs, where an absolute error is worst in ulps."""
    k = n // 4 if near0 else 0
    x = rs.uniform(lo, hi, n - k)
    if k:
        mag = np.exp(rs.uniform(math.log(near0), 0.0, k))
        x = np.concatenate([x, mag * rs.choice([-1.0, 1.0], k)])
    return x


def _geometric(rs: np.random.RandomState, n: int, lo: float, hi: float) -> np.ndarray:
    return np.exp(rs.uniform(math.log(lo), math.log(hi), n))


def _args(*cols) -> np.ndarray:
    n = len(cols[0])
    out = np.zeros((n, 3), dtype=np.float32)
    for i, c in enumerate(cols):
        out[:, i] = np.broadcast_to(np.asarray(c, dtype=np.float32), (n,))
    return out


def _caps(rs: np.random.RandomState, n: int) -> np.ndarray:
    return rs.choice(np.array(CAPS), n)


FUNCTIONS = (
    Function(
        "exp",
        "exp(a)",
        "a in [-30, 10]: exp(s - max), exp of lse differences",
        "3 + 2|a| ulps",
        lambda rs, n: _args(_spread(rs, n, -30.0, 10.0, 1e-6)),
        lambda a, b, c: np.exp(a),
        _ulps(lambda a: 3.0 + 2.0 * np.abs(a)),
    ),
    Function(
        "exp2",
        "exp2(a)",
        "a in [-40, 14]: exp2((s - max) * log2 e), the kernels' softmax",
        "3 + 2|a| ulps",
        lambda rs, n: _args(_spread(rs, n, -40.0, 14.0, 1e-6)),
        lambda a, b, c: np.exp2(a),
        _ulps(lambda a: 3.0 + 2.0 * np.abs(a)),
    ),
    Function(
        "log",
        "log(a)",
        "a in [1e-3, 1e6], half near 1: lse = max + log(row sum)",
        "3 ulps; absolute 2^-21 for a in [0.5, 2]",
        lambda rs, n: _args(np.concatenate([_geometric(rs, n - n // 2, 1e-3, 1e6), rs.uniform(0.5, 2.0, n // 2)])),
        lambda a, b, c: np.log(a),
        _log_rule,
    ),
    Function(
        "log2",
        "log2(a)",
        "a in [1e-3, 1e6], half near 1: lse in base 2",
        "3 ulps; absolute 2^-21 for a in [0.5, 2]",
        lambda rs, n: _args(np.concatenate([_geometric(rs, n - n // 2, 1e-3, 1e6), rs.uniform(0.5, 2.0, n // 2)])),
        lambda a, b, c: np.log2(a),
        _log_rule,
    ),
    Function(
        "tanh",
        "tanh(a)",
        "a in [-10, 10], a quarter near 0: softcap's s / cap",
        "from exp: an absolute error",
        lambda rs, n: _args(_spread(rs, n, -10.0, 10.0, 1e-6)),
        lambda a, b, c: np.tanh(a),
    ),
    Function(
        "division",
        "a / b",
        "a in [-1e3, 1e3], b in [1e-3, 1e4]: out / l, s / cap",
        "2.5 ulps",
        lambda rs, n: _args(rs.uniform(-1e3, 1e3, n), _geometric(rs, n, 1e-3, 1e4)),
        lambda a, b, c: a / b,
        _ulps(2.5),
    ),
    Function(
        "inverseSqrt",
        "inverseSqrt(a)",
        "a in [1e-4, 1e6]: a score scale 1 / sqrt(D)",
        "2 ulps",
        lambda rs, n: _args(_geometric(rs, n, 1e-4, 1e6)),
        lambda a, b, c: 1.0 / np.sqrt(a),
        _ulps(2.0),
    ),
    Function(
        "sqrt",
        "sqrt(a)",
        "a in [1e-4, 1e6]",
        "from 1 / inverseSqrt",
        lambda rs, n: _args(_geometric(rs, n, 1e-4, 1e6)),
        lambda a, b, c: np.sqrt(a),
    ),
    Function(
        "fma",
        "fma(a, b, c)",
        "a, b, c in [-2, 2]: the kernels' multiply-adds",
        "as a * b + c (fusing optional)",
        lambda rs, n: _args(rs.uniform(-2, 2, n), rs.uniform(-2, 2, n), rs.uniform(-2, 2, n)),
        lambda a, b, c: a * b + c,
    ),
    Function(
        "softcap_builtin_tanh",
        "b * tanh(a / b)",
        "a in [-300, 300], a quarter near 0, b in {5, 30, 50}: softcap as the kernels had it",
        "from tanh: absolute",
        lambda rs, n: _args(_spread(rs, n, -300.0, 300.0, 1e-4), _caps(rs, n)),
        lambda a, b, c: b * np.tanh(a / b),
    ),
    Function(
        "softcap_apply",
        "softcap_apply(a, b)",
        "as softcap_builtin_tanh: the kernels' softcap (shaders/lib/softcap.wgsl)",
        "(ours: from exp2, division)",
        lambda rs, n: _args(_spread(rs, n, -300.0, 300.0, 1e-4), _caps(rs, n)),
        lambda a, b, c: b * np.tanh(a / b),
    ),
    Function(
        "softcap_slope",
        "softcap_slope(a, b)",
        "as softcap_apply: the backward's 1 - tanh(a / b)^2 (tiny for large |a / b|, where exp2's own allowance grows)",
        "(ours: from exp2, division)",
        lambda rs, n: _args(_spread(rs, n, -300.0, 300.0, 1e-4), _caps(rs, n)),
        lambda a, b, c: 1.0 / np.cosh(a / b) ** 2,
    ),
)


def _arguments(n: int) -> np.ndarray:
    """[functions, n, 3] float32 arguments, the same on every runtime (a fixed seed)."""
    rs = np.random.RandomState(SEED)
    return np.stack([f.args(rs, n) for f in FUNCTIONS])


def evaluate_wgsl() -> str:
    """precision_probe.wgsl's `evaluate(f, a, b, c)`: case f returns FUNCTIONS[f].expr."""
    cases = "".join(f"    case {i}u: {{ return {f.expr}; }}  // {f.name}\n" for i, f in enumerate(FUNCTIONS))
    head = "fn evaluate(f: u32, a: f32, b: f32, c: f32) -> f32 {\n  switch f {\n"
    return head + cases + "    default: { return 0.0; }\n  }\n}\n"


def plan(n: int = SAMPLES) -> Plan:
    """One dispatch of precision_probe.wgsl over n arguments per function; output "got" [F, n]."""
    if not 1 <= n <= 1 << 20:
        raise ValueError(f"samples per function must be in 1..{1 << 20}, got {n}")
    args = _arguments(n)
    count = len(FUNCTIONS)
    path = shader_dir() / "precision_probe.wgsl"
    source = preprocess(path.read_text(), {}, reader(shader_dir()), path.name) + "\n" + evaluate_wgsl()
    return Plan(
        buffers=[
            Buffer("args", args.nbytes, "storage", args.tobytes()),
            Buffer("got", 4 * count * n, "storage", read=True),
            Buffer("probe", 16, "uniform", struct.pack("<4I", n, count, 0, 0)),
        ],
        dispatches=[
            Dispatch(
                "precision_probe",
                source,
                "main",
                {},
                {0: "args", 1: "got", 2: "probe"},
                [(0, "read-only-storage"), (1, "storage"), (2, "uniform")],
                (-(-n // WG), count, 1),
            )
        ],
        outputs=[Output("got", "got", 0, (count, n))],
        meta={"samples": n},
    )


def _ulp32(x: np.ndarray) -> np.ndarray:
    """float32 spacing at |x| (the smallest normal's spacing below it)."""
    mag = np.minimum(np.abs(x), float(np.finfo(np.float32).max)).astype(np.float32)
    # Below the smallest normal WGSL lets a result flush to 0: count such errors in units of it.
    return np.maximum(np.spacing(mag).astype(np.float64), float(np.finfo(np.float32).tiny))


def judge(got: np.ndarray, n: int = SAMPLES) -> List[FunctionReport]:
    """Rows of the report from the results [F, n] of `plan(n)`."""
    got = np.asarray(got, dtype=np.float64).reshape(len(FUNCTIONS), n)
    args = _arguments(n).astype(np.float64)
    rows: List[FunctionReport] = []
    with np.errstate(over="ignore", under="ignore"):
        for f, fn, a, g in zip(range(len(FUNCTIONS)), FUNCTIONS, args, got):
            exact = fn.exact(a[:, 0], a[:, 1], a[:, 2])
            finite = np.isfinite(g)
            err = np.where(finite, np.abs(np.where(finite, g, 0.0) - exact), np.inf)
            ulps = err / _ulp32(exact)
            i = int(np.argmax(ulps))
            within = None
            if fn.allowed is not None:
                over = err / fn.allowed(a[:, 0], exact)
                within = bool(over.max() <= 1.0)
            rows.append(
                {
                    "name": fn.name,
                    "expr": fn.expr,
                    "domain": fn.domain,
                    "wgsl_allows": fn.wgsl_allows,
                    "samples": n,
                    "max_ulps": float(ulps[i]),
                    "max_abs": float(err.max()),
                    "within_wgsl": within,
                    "worst": {"args": [float(x) for x in a[i]], "got": float(g[i]), "exact": float(exact[i])},
                }
            )
    return rows


def probe(runtime, n: int = SAMPLES) -> ProbeReport:
    """Run the probe on a native runtime (`wgattn.native.NativeRuntime`): {adapter, functions}."""
    p = plan(n)
    got = runtime.run(p).outputs["got"]
    return {"adapter": runtime.info, "functions": judge(got, n)}


def worst_ulps(report: ProbeReport) -> Dict[str, float]:
    """{function: max ulps}, the short form the adapter's description carries."""
    return {r["name"]: r["max_ulps"] for r in report["functions"]}


def render_table(report: ProbeReport) -> str:
    a = report.get("adapter") or {}
    lines = [
        f"precision of built-ins on {a.get('device') or a.get('vendor') or '?'} ({a.get('backend') or a.get('runtime', '')})",
        f"  {'function':22s} {'max ulps':>10s} {'max abs':>10s}  {'worst at':28s} {'WGSL allows':40s} within",
    ]
    for r in report["functions"]:
        at = ", ".join(f"{x:.4g}" for x in r["worst"]["args"][: 2 if r["name"] != "fma" else 3])
        within = {True: "yes", False: "NO", None: "-"}[r["within_wgsl"]]
        lines.append(f"  {r['name']:22s} {r['max_ulps']:10.1f} {r['max_abs']:10.2e}  {at:28s} {r['wgsl_allows']:40s} {within}")
    return "\n".join(lines)


def to_json(report: ProbeReport) -> str:
    return json.dumps(wire.jsonable(report), indent=1)
