"""The reference's own tests (tests/test_reference*.py) run inside the page's Pyodide, Python 3.8
with numpy 1.17, under its pytest, and pass there as they do in CPython."""
import json
import os

from conftest import ROOT, wait_for_status


def test_reference_tests_pass_under_pyodide(page, server, console_errors):
    page.goto(server + "/selftest")
    assert wait_for_status(page, timeout_s=300) == "done", page.inner_text("body")[-2000:]
    result = page.evaluate("window.wgattnSelftest")
    counts = result["counts"]
    assert result["python"] == "Python 3.8.2, numpy 1.17.5"
    assert result["rc"] == 0, result["output"][-4000:]
    assert counts["failed"] == 0 and counts["error"] == 0
    assert counts["passed"] >= 200, counts  # the suite really ran here
    # Only the PyTorch comparisons may skip (no torch in Pyodide), and they must say why.
    assert "torch" in result["output"] or counts["skipped"] == 0
    report = os.environ.get("WGATTN_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"metric": "pyodide_reference_tests", **counts, "seconds": result["seconds"]}) + "\n")
    assert console_errors == []
    assert (ROOT / "tests" / "test_reference.py").exists()
