"""The subgroup-matrix GEMM benchmark's Python: its plans for an adapter, the inputs the GPU makes
and the check of C against float64 that gates every timing (wgattn.gemm), and the page's side of
it (wgattn.page.gemm_jobs). The kernel itself runs where subgroup matrices exist: Chromium on a
GPU (bench/suite.py --gemm) and the lavapipe bed (lab/coopmat-ceiling/bed.py)."""

from dataclasses import replace

import numpy as np
import pytest

from helpers import MATRIX_TARGET
from wgattn import gemm, protocol
from wgattn.plan import Buffer, Plan
from wgattn.target import MatrixConfig

# The H100 in Chromium as its adapter reports itself: three f16 -> f32 fragment shapes, 48 KiB.
H100 = replace(
    MATRIX_TARGET,
    matrix_configs=tuple(MatrixConfig("f16", "f32", m, n, k) for m, n, k in ((16, 16, 16), (16, 8, 16), (16, 8, 8))),
    limits={**MATRIX_TARGET.limits, "max-compute-workgroup-storage-size": 49152, "max-compute-invocations-per-workgroup": 1024,
            "max-storage-buffer-binding-size": 1 << 31, "max-buffer-size": 1 << 33},
    name="an H100",
)  # fmt: skip
SQUARE = gemm.Case(4096, 4096, 4096)


def product(case, bt=False):
    """C of the filled inputs in float64, whole (small cases only)."""
    a = gemm.fill_values("a", np.arange(case.rows * case.depth)).reshape(case.rows, case.depth)
    b = gemm.fill_values("b", np.arange(case.depth * case.cols))
    b = b.reshape(case.cols, case.depth).T if bt else b.reshape(case.depth, case.cols)
    return a @ b


def test_every_configuration_of_the_sweep_fits_the_h100_at_4096():
    configs = gemm.sweep(gemm.matrices_of(H100))
    assert len(configs) >= 3 * 12 and len(set(configs)) == len(configs)
    for c in configs:
        p = gemm.plan(SQUARE, c, H100)
        assert p.unavailable == "", (c.tag(), p.unavailable)
        (d,) = p.dispatches
        bm, bn = c.block
        assert d.workgroups == (4096 // bn, 4096 // bm, 1)
        assert d.invocations == c.sgr * c.sgc * 32
        assert 0 < d.workgroup_storage <= 49152


def test_the_samples_configuration_stages_what_the_sample_does():
    """8 subgroups of 32, a 128 x 128 block 16 deep: A and B staged in 6 KiB each (rows of 16
    halves padded by 8), one 16-byte load of each per invocation a step."""
    base = gemm.sweep([(16, 16, 16)])[0]
    assert (base.sgr, base.sgc, base.tm, base.tn, base.kt, base.block) == (2, 4, 4, 2, 16, (128, 128))
    d = gemm.plan(SQUARE, base, H100).dispatches[0]
    assert d.workgroup_storage == 2 * 128 * 24 * 2
    assert "const APT: u32 = (ALOADS + WG - 1u) / WG;" in d.source and "const KT: u32 = 16u;" in d.source


@pytest.mark.parametrize(
    "case, config, target, why",
    [
        (gemm.Case(4096, 4000, 4096), gemm.Config(), H100, "not a whole number of 128x128 blocks"),
        (SQUARE, gemm.Config(m=8, n=8, k=8, tm=8, tn=4), H100, "offers no f16 x f16 -> f32 subgroup matrices of 8x8x8"),
        (SQUARE, gemm.Config(kt=24), H100, "multiple of K=16 and of 8"),
        (SQUARE, gemm.Config(load16=False), H100, "16-byte workgroup elements need 16-byte loads"),
        (SQUARE, gemm.Config(tm=8, tn=8, kt=64, stages=2), H100, "bytes of workgroup storage"),
        (SQUARE, gemm.Config(), replace(H100, subgroup_sizes=(16, 32)), "one fixed subgroup size"),
    ],
)
def test_a_configuration_the_target_cannot_run_says_why(case, config, target, why):
    p = gemm.plan(case, config, target)
    assert why in p.unavailable


def test_the_fill_values_are_exact_in_f16():
    v = gemm.fill_values("a", np.arange(1 << 16))
    assert np.array_equal(v.astype(np.float16).astype(np.float64), v)
    assert v.min() >= -2 and v.max() < 2 and len(np.unique(v)) == 256


def test_the_gpu_fills_what_fill_values_says(native_runtime):
    """hash_fill.wgsl through the fill plans, read back, against the NumPy formula."""
    case = gemm.Case(16, 24, 40)
    p = Plan([Buffer("a", 2 * 16 * 40, "storage", read=True), Buffer("b", 2 * 40 * 24, "storage", read=True)], [], [])
    for fill in gemm.fill_plans(p):
        (buf,) = fill.buffers
        fill.buffers = [Buffer(buf.name, buf.size, buf.usage, read=True)]
        got = np.frombuffer(native_runtime.run(fill).raw[buf.name], dtype=np.float16).astype(np.float64)
        n = case.rows * case.depth if buf.name == "a" else case.depth * case.cols
        assert np.array_equal(got[:n], gemm.fill_values(buf.name, np.arange(n))), buf.name


@pytest.mark.parametrize("bt", [False, True])
def test_the_check_passes_the_product(bt):
    case = gemm.Case(64, 96, 128)
    verdict = gemm.check(case, product(case, bt).astype(np.float32), bt=bt)
    assert verdict["pass"] and verdict["checked"] == gemm.CHECKED


def _planted(case, c):
    """Bugs a GEMM kernel makes: each must fail the check."""
    k = np.arange(case.depth)
    a = gemm.fill_values("a", np.arange(case.rows * case.depth)).reshape(case.rows, case.depth)
    b = gemm.fill_values("b", np.arange(case.depth * case.cols)).reshape(case.depth, case.cols)
    dropped = a[:, k % 64 >= 16] @ b[k % 64 >= 16]  # one 16-deep fragment of every 64 left out
    shifted = c.copy()
    shifted[16:32, :] = c[:16, :]  # a block's rows written one fragment up
    transposed_b = a @ b.T.reshape(case.depth, case.cols) if case.depth == case.cols else None
    return {"dropped k fragment": dropped, "shifted rows": shifted, "B read transposed": transposed_b, "zeros": 0 * c}


@pytest.mark.parametrize("bug", ["dropped k fragment", "shifted rows", "B read transposed", "zeros"])
def test_a_planted_bug_fails_the_check(bug):
    case = gemm.Case(128, 128, 128)
    wrong = _planted(case, product(case))[bug]
    verdict = gemm.check(case, wrong.astype(np.float32))
    assert not verdict["pass"] and verdict["max_abs_err"] > 100 * verdict["allowed"], verdict


def test_a_nan_fails_the_check():
    case = gemm.Case(32, 32, 32)
    c = product(case).astype(np.float32)
    c[:] = np.nan
    assert not gemm.check(case, c)["pass"]
