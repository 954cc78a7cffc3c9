"""`wgattn check` must pass the project's kernels and catch planted bugs. Each planted kernel is
the project's own WGSL with one edit (so no kernel text is duplicated here)."""

import json
import math

import pytest

from helpers import MATRIX_TARGET, WIDE
from wgattn import cli, interfaces, registry
from wgattn.check import check, render_table

REG = registry.load()


def _run(capsys, *args):
    rc = cli.main(["check", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _ratio(case) -> float:
    """A JSON report case's worst error over its allowance (inf for NaN or infinite errors)."""
    err = float(case["max_abs_err"])  # the JSON writes inf and nan as strings
    return math.inf if not math.isfinite(err) else err / case["allowance"]


def _planted(tmp_path, kernel_id, old, new, name="planted.wgsl"):
    src = REG.kernel(kernel_id).source()
    assert src.count(old) == 1, f"planting needs exactly one {old!r} in {kernel_id}"
    path = tmp_path / name
    path.write_text(src.replace(old, new))
    return str(path)


def test_project_kernels_pass_with_json(native_runtime, capsys):
    rc, out, _ = _run(capsys, "--interface", "sdpa_arena", "--json")
    report = json.loads(out)
    assert rc == 0 and report["failed"] == 0 and report["passed"] == len(report["cases"]) > 5
    case = report["cases"][0]
    assert {"name", "pass", "max_abs_err", "allowance", "failed_outputs"} <= set(case)


def test_user_wgsl_identical_to_ours_passes(native_runtime, capsys, tmp_path):
    path = tmp_path / "mine.wgsl"
    path.write_text(REG.kernel("sdpa_arena.seed").source())
    rc, out, _ = _run(capsys, "--interface", "sdpa_arena", "--wgsl", str(path), "--set", "WG=32")
    assert rc == 0, out
    assert "user.sdpa_arena" in out


@pytest.mark.parametrize(
    "old, new, caught_in",
    [
        # causal edge: the diagonal key dropped (j < i instead of j <= i)
        ("hi = min(i + 1u, p.seq_k);", "hi = min(i, p.seq_k);", "causal"),
        # sliding window one key too wide on the left
        ("lo = i - p.window;", "lo = i - p.window - 1u;", "window7"),
        # padding mask threshold inverted
        ("return arena[m] >= 0.5;", "return arena[m] < 0.5;", "padding"),
        # empty rows divide by zero instead of giving 0
        ("select(0.0, 1.0 / l, l > 0.0)", "1.0 / l", "empty-rows"),
    ],
)
def test_planted_mask_bugs_are_caught(native_runtime, capsys, tmp_path, old, new, caught_in):
    path = _planted(tmp_path, "sdpa_arena.seed", old, new)
    rc, out, _ = _run(capsys, "--interface", "sdpa_arena", "--wgsl", path, "--json")
    report = json.loads(out)
    failed = [c["name"] for c in report["cases"] if not c["pass"]]
    assert rc == 1 and failed, "planted bug not caught"
    wide = [c["name"] for c in report["cases"] if _ratio(c) >= WIDE]
    assert any(caught_in in name for name in wide), (failed, wide)
    assert all(c["failed_outputs"] == ["out"] for c in report["cases"] if not c["pass"])


def test_wgsl_that_does_not_compile_is_a_clear_message(native_runtime, capsys, tmp_path):
    path = _planted(tmp_path, "sdpa_arena.seed", "let s = dot * p.scale;", "let s = dot * ;")
    rc, out, err = _run(capsys, "--interface", "sdpa_arena", "--wgsl", path)
    assert rc == 2 and out == ""
    assert "does not compile" in err and "Traceback" not in err


def test_wgsl_that_does_not_match_the_interface_is_a_clear_message(native_runtime, capsys, tmp_path):
    path = _planted(tmp_path, "sdpa_arena.seed", "var<uniform> p: Params;", "var<storage, read> p: Params;")
    rc, out, err = _run(capsys, "--interface", "sdpa_arena", "--wgsl", path)
    assert rc == 2 and "Traceback" not in err
    assert "sdpa_arena" in err


def test_wrong_entry_point_is_a_clear_message(native_runtime, capsys, tmp_path):
    path = tmp_path / "k.wgsl"
    path.write_text(REG.kernel("sdpa_arena.seed").source())
    rc, _, err = _run(capsys, "--interface", "sdpa_arena", "--wgsl", str(path), "--entry", "nope")
    assert rc == 2 and "nope" in err


def test_usage_errors(capsys, tmp_path):
    assert _run(capsys, "--interface", "nope")[0] == 2
    rc, _, err = _run(capsys, "--interface", "sdpa_arena", "--wgsl", str(tmp_path / "missing.wgsl"))
    assert rc == 2 and "no such WGSL file" in err
    with pytest.raises(SystemExit, match="--set takes KEY=VALUE"):
        cli.main(["check", "--interface", "sdpa_arena", "--set", "WG"])


@pytest.mark.parametrize(
    "old, new",
    [
        # lse in log2 units instead of natural log: out stays right, only lse is wrong
        ("lse[t * H + h] = m + log(l);", "lse[t * H + h] = m + log2(l);"),
        # the original varlen_fwd kernel's empty-row lse (log of a clamped sum) instead of the contract's -inf
        ("lse[t * H + h] = neg_inf();", "lse[t * H + h] = log(1e-10);"),
    ],
)
def test_planted_lse_bugs_are_caught(native_runtime, capsys, tmp_path, old, new):
    path = _planted(tmp_path, "varlen_fwd.seed", old, new)
    rc, out, _ = _run(capsys, "--interface", "varlen_fwd", "--wgsl", path, "--json")
    report = json.loads(out)
    failed = [c for c in report["cases"] if not c["pass"]]
    assert rc == 1 and failed
    assert all(c["failed_outputs"] == ["lse"] for c in failed), [c["failed_outputs"] for c in failed]
    assert max(map(_ratio, failed)) >= WIDE, [(c["name"], _ratio(c)) for c in failed]


def test_a_case_the_kernel_cannot_take_is_skipped_never_passed():
    """flash_fwd.smx takes head dims up to 256 (its manifest limits): on an adapter with subgroup
    matrices, every grid case past that is skipped with that reason, counted apart from passes and
    failures (a stand-in runtime that runs nothing fails every other case)."""

    class StandIn:
        target = MATRIX_TARGET
        info = {"device": "a stand-in that runs nothing"}

        def run(self, plan):
            raise ValueError("the stand-in runs nothing")

    report = check("flash_fwd", kernel_ids=["flash_fwd.smx"], runtime=StandIn())
    rows = report["kernels"][0]["cases"]
    wide = {c.name for c in interfaces.get("flash_fwd").conformance_cases() if c.inputs["q"].shape[2] > 256}
    skipped = {r["name"]: r["skipped"] for r in rows if r["skipped"]}
    assert wide and wide <= set(skipped)
    assert all("flash_fwd.smx supports head_dim <= 256" in skipped[n] for n in wide)
    assert report["passed"] == 0 and report["skipped"] == len(skipped) and report["failed"] == len(rows) - len(skipped)
    assert not any(r["pass"] for r in rows if r["skipped"])
    table = render_table(report)
    assert "SKIPPED: flash_fwd.smx supports head_dim <= 256" in table and f"{len(skipped)} skipped" in table
