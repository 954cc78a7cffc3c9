"""The subgroup-matrix GEMM benchmark's Python (wgattn.gemm): its tiles' plans for an adapter, the
inputs the GPU fills and the check of C against float64 that gates every timing, and its op as an
ordinary benchmark case of the page's jobs (wgattn.page.bench_jobs: op "gemm", its config, the
shared fill and check). The kernel itself runs where subgroup matrices exist: Chromium on a GPU
(bench/suite.py --gemm) and the lavapipe test bed (lab/coopmat_ceiling/bed.py)."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from helpers import MATRIX_TARGET
from wgattn import bandwidth, gemm, wgsl
from wgattn.page import bench_jobs
from wgattn.plan import Buffer, Output, Plan
from wgattn.target import MatrixConfig

# The H100 in Chromium as its adapter reports itself: three f16 -> f32 fragment shapes, 48 KiB.
H100 = replace(
    MATRIX_TARGET,
    matrix_configs=tuple(MatrixConfig("f16", "f32", m, n, k) for m, n, k in ((16, 16, 16), (16, 8, 16), (16, 8, 8))),
    limits={**MATRIX_TARGET.limits, "max-compute-workgroup-storage-size": 49152, "max-compute-invocations-per-workgroup": 1024,
            "max-storage-buffer-binding-size": 1 << 31, "max-buffer-size": 1 << 33},
    name="an H100",
)  # fmt: skip
SQUARE = gemm.case(gemm.GemmConfig())
MEASURED = {"samples": [1.0] * 5, "reps": 1, "warmup_s": 0.1, "warmed": True, "timer": "gpu", "adapter": "an H100"}


def product(config: gemm.GemmConfig) -> np.ndarray:
    """C of the filled inputs in float64, whole (small configurations only)."""
    a = bandwidth.fill_values("a", np.arange(config.rows * config.depth)).reshape(config.rows, config.depth)
    b = bandwidth.fill_values("b", np.arange(config.depth * config.cols)).reshape(config.depth, config.cols)
    return a @ b


def test_every_tile_of_the_sweep_fits_the_h100_at_4096():
    tiles = gemm.sweep(gemm.matrices_of(H100))
    assert len(tiles) >= 3 * 8 and len({t.tag() for t in tiles}) == len(tiles)
    for t in tiles:
        p = gemm.plan(SQUARE, t, H100)
        assert p.unavailable == "", (t.tag(), p.unavailable)
        (d,) = p.dispatches
        bm, bn = t.block
        assert d.workgroups == (4096 // bn, 4096 // bm, 1) and d.invocations == t.sgr * t.sgc * 32
        assert 0 < d.workgroup_storage <= 49152
        assert not [line for line in d.source.splitlines() if line.lstrip().startswith("#")]


def test_the_samples_shape_stages_a_step_in_48_kib():
    """8 subgroups of 32, a 128 x 128 block 64 deep: A and B staged in 24 KiB each (rows of 16
    halves padded to 24), four 16-byte loads of each per invocation a step."""
    base = gemm.sweep([(16, 16, 16)])[0]
    assert (base.sgr, base.sgc, base.tm, base.tn, base.kt, base.block, base.unroll, base.split) == (
        2, 4, 4, 2, 64, (128, 128), True, True
    )  # fmt: skip
    assert base.loads(32) == (4, 4)
    d = gemm.plan(SQUARE, base, H100).dispatches[0]
    assert d.workgroup_storage == 2 * 128 * 64 * 3 // 2 * 2


def test_written_out_products_index_the_staging_by_constants_but_the_subgroups_part():
    """The products' matrix loads: with `split`, a constant fragment index behind the subgroup's
    (robustness clamps the one runtime index, the same for the whole kernel); without `unroll`,
    loops over arrays."""

    def loads(tile):
        src = gemm.plan(SQUARE, tile, H100).dispatches[0].source
        return [line.split("&", 1)[1].split(",", 1)[0] for line in src.splitlines() if "subgroupMatrixLoad" in line]

    base = gemm.sweep([(16, 16, 16)])[0]
    got = loads(base)
    assert len(got) == 4 * (4 + 2) and got[0] == "ta[0][sr][0 * KF + 0]" and got[-1] == "tb[0][sc][3 * TN + 1]"
    assert loads(replace(base, split=False))[0] == "ta[0][(sr * TM + 0) * KF + 0]"
    assert loads(replace(base, unroll=False)) == ["ta[0][sr][i * KF + kk]", "tb[0][sc][kk * TN + j]"]
    two = loads(replace(base, kt=32, stages=2))
    assert {g[:5] for g in two} == {"ta[0]", "tb[0]", "ta[1]", "tb[1]"}  # a constant stage in each copy of the step


@pytest.mark.parametrize(
    "config, tile, target, why",
    [
        (gemm.GemmConfig(cols=4000), gemm.Tile(), H100, "not a whole number of 128x128 blocks 64 deep"),
        (gemm.GemmConfig(), gemm.Tile(m=8, n=8, k=8, tm=8, tn=4), H100, "offers no f16 x f16 -> f32 subgroup matrices of 8x8x8"),
        (gemm.GemmConfig(), gemm.Tile(kt=128, stages=2), H100, "bytes of workgroup storage"),
        (
            gemm.GemmConfig(),
            gemm.Tile(n=8, k=8, sgr=1, sgc=1, tm=1, tn=1, kt=16),
            H100,
            "not whole 16-byte loads of 32 invocations",
        ),
        (gemm.GemmConfig(), gemm.Tile(), replace(H100, subgroup_sizes=(16, 32)), "one fixed subgroup size"),
    ],
)
def test_a_tile_the_target_cannot_run_says_why(config, tile, target, why):
    assert why in gemm.plan(gemm.case(config), tile, target).unavailable


@pytest.mark.parametrize(
    "knobs, message",
    [({"m": 12}, "fragment dimensions are 8 or 16"), ({"kt": 24}, "multiple of k (16)"), ({"stages": 3}, "stages must be")],
)
def test_a_bad_tile_says_what_is_wrong(knobs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        gemm.Tile(**knobs)


def test_the_kernel_expands_for_every_knob():
    for tile in [gemm.Tile(unroll=u, split=s, stages=st, kt=32) for u in (False, True) for s in (False, True) for st in (1, 2)]:
        src = gemm.plan(SQUARE, tile, H100).dispatches[0].source
        assert wgsl.workgroup_storage(src, "gemm", {}) > 0 and not re.search(r"\{[A-Za-z_]\w*\}", src), tile.tag()


def test_the_gpu_fills_what_fill_values_says(native_runtime):
    """A and B made by hash_fill.wgsl through the shared fill plans, read back."""
    config = gemm.GemmConfig(rows=16, cols=24, depth=40)
    c = gemm.case(config)
    buffers = [Buffer("a", 2 * 16 * 40, "storage", read=True), Buffer("b", 2 * 40 * 24, "storage", read=True)]
    for fill in bandwidth.fill_plans(Plan(buffers, [], []), c.inputs):
        (buf,) = fill.buffers
        fill = replace(
            fill, buffers=[replace(buf, read=True)], outputs=[Output(buf.name, buf.name, 0, (buf.size // 2,), "float16")]
        )
        got = native_runtime.run(fill).outputs[buf.name].astype(np.float64)
        assert np.array_equal(got, bandwidth.fill_values(buf.name, np.arange(got.size))), buf.name


def test_the_check_passes_the_product_and_names_what_it_compared():
    config = gemm.GemmConfig(rows=64, cols=96, depth=128)
    verdict = gemm.check_filled(gemm.case(config), {"c": product(config).astype(np.float32)})
    assert verdict["ok"] and len(verdict["pairs"]) == gemm.CHECKED and [0, 95] in verdict["pairs"]


def _planted(config, c):
    """Bugs a GEMM kernel makes: each must fail the check."""
    k = np.arange(config.depth)
    a = bandwidth.fill_values("a", np.arange(config.rows * config.depth)).reshape(config.rows, config.depth)
    b = bandwidth.fill_values("b", np.arange(config.depth * config.cols)).reshape(config.depth, config.cols)
    dropped = a[:, k % 64 >= 16] @ b[k % 64 >= 16]  # one 16-deep fragment of every 64 left out
    shifted = c.copy()
    shifted[16:32, :] = c[:16, :]  # a block's rows written one fragment up
    return {"dropped k fragment": dropped, "shifted rows": shifted, "B read transposed": a @ b.T, "zeros": 0 * c}


@pytest.mark.parametrize("bug", ["dropped k fragment", "shifted rows", "B read transposed", "zeros"])
def test_a_planted_bug_fails_the_check(bug):
    config = gemm.GemmConfig(rows=128, cols=128, depth=128)
    wrong = _planted(config, product(config))[bug]
    verdict = gemm.check_filled(gemm.case(config), {"c": wrong.astype(np.float32)})
    assert not verdict["ok"] and verdict["max_abs_err"] > 100 * verdict["allowed"], verdict


def test_a_nan_fails_the_check():
    config = gemm.GemmConfig(rows=32, cols=32, depth=32)
    assert not gemm.check_filled(gemm.case(config), {"c": np.full((32, 32), np.nan, np.float32)})["ok"]


# --- An ordinary benchmark case of the page's jobs -------------------------------------------------


def start(request, target=H100):
    return bench_jobs.start(json.dumps({"op": "gemm", **request}), target, 7)


def test_a_gemm_request_times_the_sweep_of_each_fragment_shape_in_series():
    job, reply = start({"config": {"fragment": "16x8x8"}})
    n = len(gemm.sweep([(16, 8, 8)]))
    assert len(reply["jobs"]) == n and not reply["skipped"] and reply["op"] == "gemm"
    assert [len(s["jobs"]) for s in reply["series"]] == [8] * (n // 8) + ([n % 8] if n % 8 else [])
    assert all(j["config"].startswith("16x8x8 ") and j["check"] == "c" and j["impl"] == gemm.KERNEL for j in reply["jobs"])
    assert reply["jobs"][0]["flops"] == 2 * 4096**3 and reply["jobs"][0]["shape"] == [4096, 4096, 4096]
    _, every = start({})
    assert len(every["jobs"]) == len(gemm.sweep(gemm.matrices_of(H100)))


def test_a_fragment_shape_or_tile_the_adapter_lacks_is_skipped_with_why():
    _, reply = start({"config": {"fragment": "8x8x8"}})
    assert reply["jobs"] == [] and len(reply["skipped"]) == 1 and "8x8x8" in reply["skipped"][0]["reason"]
    _, reply = start({}, MATRIX_TARGET.__class__(features=frozenset(), name="no matrices"))
    assert reply["jobs"] == [] and "no f16 x f16 -> f32 subgroup matrices" in reply["skipped"][0]["reason"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"config": {"rows": 9000}}, "rows must be an integer in 16..8192"),
        ({"config": {"heads": 4}}, r"unknown config field\(s\) \['heads'\] for the GEMM"),
        ({"config": {"fragment": "32x8x8"}}, "fragment must be one of"),
        ({"tiles": [{"tm": 4, "depth": 3}]}, r"tiles\[0\] has unknown knobs \['depth'\]"),
        ({"tiles": [{"unroll": 1}]}, r"tiles\[0\]: unroll must be true or false"),
        ({"tiles": []}, "tiles must be a list of 1 to"),
        ({"rounds": 2}, "rounds must be an integer in 5..100"),
    ],
)
def test_a_bad_request_says_what_is_wrong(request_, message):
    with pytest.raises(ValueError, match=message):
        start(request_)


def test_a_job_is_recorded_only_after_its_c_passed_the_shared_check():
    config = gemm.GemmConfig(rows=128, cols=256, depth=64)
    tiles = [{"kt": 32}, {"kt": 32, "unroll": False}]
    job, reply = start({"config": config.to_dict(), "tiles": tiles, "name": "small", "user_agent": "HeadlessChrome/156.0.0.0"})
    assert [j["config"] for j in reply["jobs"]] == [gemm.Tile(**t).tag() for t in tiles]
    for index in (0, 1):
        (plan,) = bench_jobs.job_plans(job, index, H100)
        assert [f.dispatches[0].entry_point for f in bench_jobs.fills(job, index)] == ["fill", "fill"]
        with pytest.raises(ValueError, match="not checked against the reference"):
            bench_jobs.record(job, index, json.dumps(MEASURED))
    bad = bench_jobs.check(job, 0, np.zeros(128 * 256, np.float32).tobytes())
    assert not bad["ok"]
    with pytest.raises(ValueError, match="not checked against the reference"):
        bench_jobs.record(job, 0, json.dumps(MEASURED))
    good = bench_jobs.check(job, 1, product(config).astype(np.float32).tobytes())
    assert good["ok"], good
    rec, last = bench_jobs.record(job, 1, json.dumps(MEASURED))
    assert last and rec["op"] == "gemm" and rec["case"] == "small" and rec["config"] == reply["jobs"][1]["config"]
    assert rec["knobs"]["unroll"] is False and rec["shape"] == [128, 256, 64] and rec["runtime"] == "chromium"
    assert rec["tflops"] == pytest.approx(2 * 128 * 256 * 64 / 1e-3 / 1e12) and rec["verified"]["ok"]
    assert "pairs" not in rec["verified"]  # the verdict, not the entries it compared
