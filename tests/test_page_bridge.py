"""wgattn.page's PageSession (what the page calls under Pyodide) driven from CPython with the
native runtime standing in for the browser: prepare -> run plan -> add_buffer -> finish."""

import json

import pytest

from helpers import browser_stand_in, session_on
from wgattn import wire
from wgattn.interfaces.sdpa_arena import SdpaCase
from wgattn.page import PageSession


def _native_response(case: SdpaCase, runtime):
    from wgattn import registry
    from wgattn.cases import digest

    inputs = case.inputs()
    out = runtime.run(case.plan(registry.load().kernel("sdpa_arena.seed"), inputs, runtime.target))
    return json.dumps(
        {"digest": digest(inputs), "outputs": {k: wire.encode(v) for k, v in out.outputs.items()}, "timings": out.timings}
    )


def test_three_runtimes_agree(native_runtime):
    page = session_on(native_runtime)
    config = {"batch": 2, "heads": 2, "seq_q": 17, "seq_k": 23, "head_dim": 7, "mask": "padding", "seed": 9}
    prepared = json.loads(page.prepare(json.dumps({"kernel": "sdpa_arena.seed", "config": config})))
    assert prepared["plan"]["dispatches"][0]["entry_point"] == "attention"
    browser_stand_in(page, prepared["run"], native_runtime)
    native = _native_response(SdpaCase(**config), native_runtime)
    result = json.loads(page.finish(prepared["run"], json.dumps({"timings": {"wall_ms": 1.0}}), native))
    assert result["pass"] is True
    assert [(p["a"], p["b"]) for p in result["pairs"]] == [("browser", "pyodide"), ("browser", "native"), ("pyodide", "native")]


def test_digest_mismatch_is_reported(native_runtime):
    page = session_on(native_runtime)
    config = {"heads": 1, "seq_q": 4, "seq_k": 4, "head_dim": 4}
    prepared = json.loads(page.prepare(json.dumps({"config": config})))
    native = _native_response(SdpaCase(**dict(config, seed=1)), native_runtime)
    result = json.loads(page.finish(prepared["run"], json.dumps({"skipped": "no WebGPU"}), native))
    assert result["pass"] is False
    assert result["runtimes"]["browser"] == {"ok": False, "skipped": "no WebGPU"}
    assert "digest mismatch" in result["runtimes"]["native"]["error"]
    assert result["pairs"] == []  # nothing left to compare but the reference itself
    assert (result["verdict"]["state"], result["verdict"]["word"]) == ("fail", "FAIL")
    assert {"runtime": "native", "kind": "error", "reason": result["runtimes"]["native"]["error"]} in result["verdict"]["not_run"]


def test_bad_config_raises_value_error():
    page = PageSession()
    with pytest.raises(ValueError, match="head_dim must be an integer"):
        page.prepare(json.dumps({"config": {"head_dim": 0}}))
    with pytest.raises(ValueError, match="unknown kernel"):
        page.prepare(json.dumps({"kernel": "x", "config": {}}))
    assert page.held()["live"] == 0  # a refused request leaves nothing behind


def test_wrong_output_fails_the_pair(native_runtime):
    """A browser result that is off by more than the allowance must be a FAIL, not a pass."""
    page = session_on(native_runtime)
    config = {"heads": 1, "seq_q": 8, "seq_k": 8, "head_dim": 4, "seed": 2}
    prepared = json.loads(page.prepare(json.dumps({"config": config})))
    plan = page.plan(prepared["run"])
    out = plan.outputs[0]
    buf = bytearray(plan.buffers[0].data)  # out region still zero: a kernel that wrote nothing
    page.add_buffer(prepared["run"], out.buffer, bytes(buf))
    native = _native_response(SdpaCase(**config), native_runtime)
    result = json.loads(page.finish(prepared["run"], json.dumps({"timings": {}}), native))
    verdicts = {(p["a"], p["b"]): p["pass"] for p in result["pairs"]}
    assert verdicts == {("browser", "pyodide"): False, ("browser", "native"): False, ("pyodide", "native"): True}
