"""The demo page in headless Chromium: browser WebGPU (SwiftShader), NumPy under Pyodide and the
server's native wgpu-py must all agree, with no console error."""

import pytest

from pagetools import wait_for_status


def _run(page, url):
    page.goto(url)
    status = wait_for_status(page)
    results = page.evaluate("window.wgattn.results")
    return status, results


def test_default_demo_all_pairs_pass(page, server, console_errors):
    status, results = _run(page, server + "/")
    message = page.inner_text("main")
    assert status == "done", message
    assert console_errors == []
    assert results["adapter"] and results["adapter"]["runtime"] == "browser"
    assert results["native_adapter"]["runtime"] == "native"
    assert results["python"] == "Python 3.8.2, numpy 1.17.5"
    (run,) = results["runs"]
    assert run["kernel"] == "sdpa_arena.seed"
    assert {(p["a"], p["b"]) for p in run["pairs"]} == {("browser", "pyodide"), ("browser", "native"), ("pyodide", "native")}
    assert all(p["pass"] and p["max_abs_err"] <= p["allowance"] for p in run["pairs"]), run["pairs"]
    assert page.locator("#results td.pass").count() == 3
    assert page.get_attribute("#pictures", "data-status") == "drawn"
    assert results["first_result_ms"] > 0
    print(f"time to first verified result (default page): {results['first_result_ms']:.0f} ms")


@pytest.mark.parametrize(
    "query",
    [
        "seq_q=113&seq_k=203&head_dim=59&mask=none&layout=bshd",
        "heads=2&seq_q=64&seq_k=600&head_dim=64&mask=causal",
        "batch=3&heads=2&seq_q=33&seq_k=47&head_dim=16&mask=padding&seed=3",
        "heads=2&seq_q=100&seq_k=80&head_dim=130&mask=window&window=7",
    ],
)
def test_awkward_configs_agree(page, server, console_errors, query):
    status, results = _run(page, f"{server}/?{query}")
    assert status == "done"
    (run,) = results["runs"]
    assert len(run["pairs"]) == 3 and all(p["pass"] for p in run["pairs"]), run["pairs"]
    assert console_errors == []


def test_bad_configuration_shows_a_message(page, server):
    _run(page, server + "/?heads=1&seq_q=8&seq_k=8&head_dim=4")
    page.fill("input[name=seq_q]", "70000")  # the form's own checks allow it; the case does not
    page.click("#run")
    page.wait_for_function("document.body.dataset.status === 'error'")
    assert page.is_visible("#run-error")  # beside Run, the field marked, the old result greyed
    assert "seq_q must be an integer in 1..65536" in page.inner_text("#run-error")
    assert page.get_attribute("input[name=seq_q]", "aria-invalid") == "true"
    assert page.get_attribute("input[name=seq_k]", "aria-invalid") is None
    assert page.get_attribute("#verdict", "data-state") == "notrun"
    assert "stale" in page.get_attribute("#verdict-previous", "class")
    assert len(page.evaluate("window.wgattn.results.runs")) == 1  # nothing half-run was recorded


def test_without_webgpu_the_reference_still_runs(page, server, console_errors):
    page.add_init_script("Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });")
    status, results = _run(page, server + "/?heads=1&seq_q=16&seq_k=16&head_dim=8")
    assert status == "done"
    assert results["adapter"] is None
    assert "WebGPU is not available here" in page.inner_text("#message")
    (run,) = results["runs"]
    assert run["runtimes"]["browser"]["skipped"].startswith("no WebGPU")
    assert [(p["a"], p["b"], p["pass"]) for p in run["pairs"]] == [("pyodide", "native", True)]
    assert console_errors == []
