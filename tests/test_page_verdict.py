"""The live check's verdict, decided in Python (wgattn.page.verdict) and only shown by the page: each
state the page shows (PASS, PASS where it ran, NOT CHECKED HERE, FAIL) from the runtimes and pairs
of a run, the reasons a runtime did not run as data, and the verdict of a run of every kernel."""

import json
import math

import pytest

from wgattn import wire
from wgattn.page import PageSession
from wgattn.page.verdict import judge, summarise

OK = {"ok": True, "timings": {}}
NO_F16 = {"ok": False, "skipped": "flash_fwd.tiled_f16.main needs adapter features shader-f16, which this device lacks"}


def _pair(a, b, err=1e-7, allowance=1e-6, output="out"):
    return {"a": a, "b": b, "output": output, "max_abs_err": err, "allowance": allowance, "pass": bool(err <= allowance)}


ALL_PAIRS = [_pair("browser", "pyodide", 2e-7), _pair("browser", "native", 5e-7), _pair("pyodide", "native", 1e-7)]


def test_every_runtime_ran_and_agrees_is_a_pass():
    v = judge({"browser": OK, "pyodide": OK, "native": OK}, ALL_PAIRS, ["out"])
    assert (v["state"], v["word"], v["unchecked"], v["not_run"], v["notes"]) == ("pass", "PASS", False, [], [])
    assert v["ran"] == ["browser", "pyodide", "native"] and v["worst"] == pytest.approx(0.5)
    assert v["text"].startswith("your browser's WebGPU, the float64 reference (NumPy in this page) and native wgpu-py")
    assert "agree on out: the worst error is 0.50× its allowance" in v["text"]


def test_a_runtime_that_cannot_run_the_kernel_makes_it_pass_where_it_ran_never_a_pass():
    v = judge({"browser": NO_F16, "pyodide": OK, "native": OK}, [_pair("pyodide", "native")], ["out", "lse"])
    assert (v["state"], v["word"], v["unchecked"]) == ("partial", "PASS where it ran", False)
    assert v["not_run"] == [{"runtime": "browser", "kind": "skipped", "reason": NO_F16["skipped"]}]
    assert v["notes"] == [f"Not run in your browser's WebGPU: {NO_F16['skipped']}. It does not count as passing in this browser."]
    assert "agree on out and lse" in v["text"]


def test_one_runtime_alone_is_not_checked_here_neither_pass_nor_fail():
    lacks = {"ok": False, "skipped": "wgpu-py has no subgroup matrices"}
    v = judge({"browser": NO_F16, "pyodide": OK, "native": lacks}, [], ["out"])
    assert (v["state"], v["word"], v["unchecked"]) == ("partial", "NOT CHECKED HERE", True)
    assert [x["runtime"] for x in v["not_run"]] == ["browser", "native"] and v["worst"] == 0.0
    assert v["text"] == "only the float64 reference (NumPy in this page) ran: nothing to compare."


def test_a_disagreeing_pair_fails_and_names_the_pair():
    pairs = [_pair("browser", "pyodide", 3e-3), _pair("browser", "native", 3e-3), _pair("pyodide", "native")]
    v = judge({"browser": OK, "pyodide": OK, "native": OK}, pairs, ["out"])
    assert (v["state"], v["word"]) == ("fail", "FAIL") and v["worst"] == pytest.approx(3000)
    assert v["text"] == (
        "browser and reference disagree on out (max |error| 3.00e-03, allowed 1.00e-06) and "
        "browser and native disagree on out (max |error| 3.00e-03, allowed 1.00e-06)."
    )


def test_a_runtime_that_failed_fails_the_run_with_its_error_as_the_reason():
    broken = {"ok": False, "error": "HTTP 500: the server's adapter was lost"}
    v = judge({"browser": OK, "pyodide": OK, "native": broken}, [_pair("browser", "pyodide")], ["out"])
    assert v["state"] == "fail" and v["not_run"] == [{"runtime": "native", "kind": "error", "reason": broken["error"]}]
    assert v["notes"] == [f"Not run in native wgpu-py on the server: {broken['error']}."]  # no "counts as passing"


def test_a_nan_error_is_an_infinite_ratio_and_travels_as_json():
    v = judge({"browser": OK, "pyodide": OK, "native": OK}, [_pair("browser", "pyodide", math.nan)], ["out"])
    assert v["state"] == "fail" and v["worst"] == math.inf
    assert json.loads(json.dumps(wire.jsonable(v)))["worst"] == "inf"


def _runs(**states):
    word = {"pass": ("pass", False), "native": ("partial", False), "unchecked": ("partial", True), "fail": ("fail", False)}
    return [{"kernel": k, "verdict": {"state": word[s][0], "unchecked": word[s][1]}} for k, s in states.items()]


def test_every_kernel_passing_is_a_pass():
    s = summarise(_runs(a="pass", b="pass"))
    assert (s["state"], s["word"], s["text"], s["notes"]) == ("pass", "PASS", "2 of 2 kernels pass in all three runtimes.", [])


def test_kernels_run_only_natively_or_nowhere_make_a_partial_naming_them():
    s = summarise(_runs(a="pass", b="native", c="unchecked", d="unchecked"))
    assert (s["state"], s["word"]) == ("partial", "PASS where it ran")
    assert (s["passed"], s["native_only"], s["unchecked"], s["failed"]) == (["a"], ["b"], ["c", "d"], [])
    assert s["text"] == "1 of 4 kernels pass in all three runtimes."
    assert s["notes"][0].startswith("1 not run in this browser, checked only between the reference and native wgpu-py")
    assert s["notes"][1].startswith("2 not checked here: neither this browser nor the server's adapter can run them")
    assert s["notes"][1].endswith(": c, d.")


def test_one_failing_kernel_fails_the_whole_run():
    s = summarise(_runs(a="pass", b="native", c="fail"))
    assert (s["state"], s["word"], s["failed"]) == ("fail", "FAIL", ["c"])
    assert s["text"] == "1 of 3 kernels pass in all three runtimes; failing: c."


@pytest.mark.parametrize(
    "runs, message",
    [
        ('{"kernel": "a"}', "live_summary takes a list"),
        ('[{"kernel": "a"}]', "run 0 must be {kernel, verdict}"),
        ('[{"kernel": "a", "verdict": {"state": "great"}}]', "run 0 must be {kernel, verdict}"),
        ("[3]", "run 0 must be {kernel, verdict}"),
    ],
)
def test_the_page_s_summary_refuses_what_is_no_list_of_verdicts(runs, message):
    with pytest.raises(ValueError, match=message):
        PageSession().live_summary(runs)


def test_the_page_s_summary_of_finished_runs():
    """PageSession.finish's verdicts, as the page hands them back after running every kernel."""
    page = PageSession()
    done = []
    for kernel in ("sdpa_arena.seed", "flash_fwd.tiled"):
        run = json.loads(page.prepare(json.dumps({"kernel": kernel, "config": {"heads": 1, "head_dim": 4}})))["run"]
        result = json.loads(page.finish(run, json.dumps({"skipped": "no WebGPU here"}), json.dumps({"skipped": "no adapter"})))
        assert result["verdict"]["word"] == "NOT CHECKED HERE"
        done.append({"kernel": result["kernel"], "verdict": result["verdict"]})
    summary = json.loads(page.live_summary(json.dumps(done)))
    assert summary["state"] == "partial" and summary["unchecked"] == ["sdpa_arena.seed", "flash_fwd.tiled"]
