"""The subgroup-matrix test bed's Python half (bench/smx_testbed/jobs.py) without its Node half:
jobs are planned for the device the test bed reports, and the judge reads every output of the
kernel's interface from its place in the bytes that come back: the reference's own numbers pass,
an output moved by a little more than its allowance fails, and only that output. (The whole loop
on lavapipe's subgroup matrices needs a Debian trixie root: bench/smx_testbed/README.md.)"""

import base64

import numpy as np
import pytest

from bench.smx_testbed import jobs
from wgattn.conformance import expected, judged_case

LAVAPIPE = {  # what testbed.mjs reports of Mesa 26.1's lavapipe through Dawn (as the page would)
    "name": "this browser's adapter (mesa llvmpipe)",
    "words": ["mesa", "llvmpipe"],
    "features": ["shader-f16", "subgroups", "timestamp-query", "chromium-experimental-subgroup-matrix"],
    "limits": {"max-compute-workgroup-storage-size": 32768, "max-compute-invocations-per-workgroup": 1024},
    "subgroup_matrix_configs": [
        {"componentType": "f16", "resultComponentType": "f16", "M": 8, "N": 8, "K": 8},
        {"componentType": "f16", "resultComponentType": "f32", "M": 8, "N": 8, "K": 8},
    ],
    "subgroup_min_size": 8,
    "subgroup_max_size": 8,
}
CASE = "window-0-0-tl-d64-empty-rows"


def test_jobs_are_planned_for_the_reported_device():
    built = jobs.build(LAVAPIPE, "flash_fwd.smx", "quick", tpr=2)
    assert [j["name"] for j in built["jobs"]] == [c.name for c in jobs.cases(jobs.interfaces.get("flash_fwd"), "quick")]
    (main,) = built["jobs"][0]["plan"]["dispatches"]
    assert "const SM: u32 = 8u;" in main["source"] and main["constants"]["TPR"] == 2  # 8x8x8; rows over 2 invocations
    assert main["constants"]["WG"] == main["constants"]["BR"] * 2
    with pytest.raises(ValueError, match="varlen_bwd.smx has no TPR"):
        jobs.build(LAVAPIPE, "varlen_bwd.smx", "quick", tpr=2)


@pytest.mark.parametrize("interface", ["flash_fwd", "varlen_bwd"])
def test_cases_by_name_prefix_and_the_quick_ones_reach_alibi_and_sinks(interface):
    iface = jobs.interfaces.get(interface)
    every = jobs.cases(iface)
    picked = jobs.cases(iface, "alibi-,sinks-")
    assert picked and [c.name for c in picked] == [c.name for c in every if c.name.startswith(("alibi-", "sinks-"))]
    quick = jobs.cases(iface, "quick")
    assert any("alibi_slopes" in c.inputs for c in quick) and any("sinks" in c.inputs for c in quick)
    with pytest.raises(ValueError, match="no case of"):
        jobs.cases(iface, "no-such-case")


def test_a_template_replaces_the_kernels_wgsl(tmp_path):
    source = jobs.kernel("flash_fwd.smx").path.read_text()
    planted = tmp_path / "planted.wgsl"
    planted.write_text(source.replace("override TAU: f32", "const UNUSED_IN_THE_KERNEL: f32 = 0.0;\noverride TAU: f32", 1))
    assert planted.read_text() != source
    (job,) = [
        j for j in jobs.build(LAVAPIPE, "flash_fwd.smx", "quick", template=str(planted))["jobs"] if j["name"].startswith(CASE)
    ]
    assert "UNUSED_IN_THE_KERNEL" in job["plan"]["dispatches"][0]["source"]
    with pytest.raises(ValueError, match="no such file"):
        jobs.kernel("flash_fwd.smx", str(tmp_path / "missing.wgsl"))


def test_judge_reads_every_output_at_its_offset():
    """varlen_bwd: dk and dv share one buffer (dv at an offset)."""
    built = jobs.build(LAVAPIPE, "varlen_bwd.tiled", "quick")
    built["jobs"] = [j for j in built["jobs"] if j["name"].startswith(CASE)]
    (job,) = built["jobs"]
    k = jobs.kernel("varlen_bwd.tiled")
    case = judged_case(k, {c.name: c for c in jobs.cases(jobs.interfaces.get("varlen_bwd"))}[job["name"]])
    ref, _ = expected(k, case)
    assert {b["name"] for b in job["plan"]["buffers"] if b["read"]} == {"dq", "dkv", "dsinks"}

    def results(shift_dv: float) -> dict:
        raw = {"dq": ref["dq"], "dkv": np.concatenate([ref["dk"], ref["dv"] + shift_dv]), "dsinks": ref["dsinks"]}
        encoded = {b: base64.b64encode(a.astype(np.float32).tobytes()).decode() for b, a in raw.items()}
        return {"results": {job["name"]: {"raw": encoded}}}

    rows = jobs.judge_results(built, results(0.0))
    assert [(r["output"], r["pass"]) for r in rows] == [("dq", True), ("dk", True), ("dv", True), ("dsinks", True)]
    rows = jobs.judge_results(built, results(1.5 * max(r["allowance"] for r in rows)))
    assert [(r["output"], r["pass"]) for r in rows] == [("dq", True), ("dk", True), ("dv", False), ("dsinks", True)]
    (missing,) = jobs.judge_results(built, {"results": {}})
    assert "no result" in missing["error"]
