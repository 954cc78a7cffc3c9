"""The suite's --prefill (bench/suite.py) on this machine's software adapter (SwiftShader in headless
Chromium): the page fills a shrunk prefill case's q and cache on the GPU, checks the kernel's
output on its first and last new tokens against the float64 reference, then times it beside
flash_fwd on the same work unpaged (its yardstick) in one series, in both browser passes
(robustness on and off), through the same benchmark jobs as every op (wgattn.page.bench_jobs).
The kernels on subgroup matrices are skipped here, saying why; the records' shape is checked,
never their timings."""

import json
import os
import subprocess
import sys

import pytest

from bench.demo import CHROMIUM, ROOT
from bench.prefill import cases, smoke
from wgattn.interfaces import _paged
from wgattn.interfaces.paged_prefill import PrefillConfig

CASES = {"target": "paged_prefill.smx_f16", "target-tiled": "paged_prefill.tiled"}  # shrunk


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make setup installs Debian's chromium)")
    if not (ROOT / ".cache" / "pyodide").is_dir():
        pytest.skip("the page needs Pyodide in .cache/pyodide: run `make setup`")
    out = tmp_path_factory.mktemp("suite")
    argv = ["--runtimes=chromium", "--kernels=", f"--prefill={','.join(CASES)}", "--prefill-smoke", "--no-live"]
    history = tmp_path_factory.mktemp("history")  # none to compare with
    argv += ["--rounds=5", "--warmup-s=0.1", "--repeat=1", "--gpu=software", f"--out={out}", f"--history={history}"]
    # In its own process: the suite drives Chromium with asyncio.run(), which cannot start inside
    # the event loop Playwright's sync API leaves in this one.
    done = subprocess.run([sys.executable, "-m", "bench.suite", *argv], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    report = json.loads((out / "report.json").read_text())
    records = [json.loads(line) for line in (out / "prefill.jsonl").read_text().splitlines()]
    return out, report, records


def test_each_pass_times_the_kernel_it_can_run_beside_its_yardstick(run):
    out, report, records = run
    assert {n: k for n, (k, _) in cases().items() if n in CASES} == CASES
    for mode in ("checked", "trusted"):
        p = report[f"chromium_{mode}"]
        assert "error" not in p, p
        for b in p["bench"]:
            assert not b["failed"], b
        skipped = {s["impl"] for b in p["bench"] for s in b["skipped"]}
        assert "paged_prefill.smx_f16" in skipped  # no subgroup matrices (nor f16) on SwiftShader
        mine = [r for r in records if r["mode"] == mode]
        assert {(r["case"], r["impl"]) for r in mine if not r["yardstick"]} == {("target-tiled", "paged_prefill.tiled")}
        # flash_fwd on the same work, in every series: the best flash_fwd kernel SwiftShader runs
        assert {(r["case"], r["impl"]) for r in mine if r["yardstick"]} == {(n, "flash_fwd.blocked") for n in CASES}


def test_records_carry_flops_the_check_and_the_share_of_the_yardstick(run):
    out, report, records = run
    for r in records:
        assert r["kind"] == "prefill" and r["runtime"] == "chromium" and r["browser"].startswith("Chromium ") and r["flags"]
        assert r["rounds"] == 5 and r["reps"] >= 1 and r["timer"] in ("gpu", "wall")
        assert 0 < r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
        config = PrefillConfig(**r["shape"])  # the case's configuration, as a live check takes it
        assert config == smoke(cases()[r["case"]][1])
        pairs = _paged.visible_keys([config.seq_len] * config.batch, -1, config.new_tokens)
        assert r["flops"] == 4.0 * config.head_dim * config.heads * pairs and r["tflops"] > 0
        if r["yardstick"]:
            assert r["verified"] is None
        else:
            v = r["verified"]
            assert v["ok"] and v["max_abs_err"] <= v["allowed"] and v["pairs"], v
            assert r["pct_of_yardstick"] > 0 and "BS=16" in r["config"]
    table = (out / "table.txt").read_text()
    assert "prefill target-tiled: TFLOP/s" in table and "chromium checked" in table and "chromium trusted" in table
