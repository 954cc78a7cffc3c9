"""The reference's own tests (tests/test_reference*.py) run inside the page's Pyodide, Python 3.8
with numpy 1.17, under its pytest, and pass there as they do in CPython: the same tests, every one
of them (counted against CPython's collection of the same files), only the JAX oracle's skipped."""

import json
import os
import re
import subprocess
import sys

from pagetools import ROOT, wait_for_status


def _collected(*paths):
    """How many tests CPython's pytest collects from `paths`."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "py")},
    )
    found = re.search(r"(\d+) tests? collected", proc.stdout)
    assert proc.returncode == 0 and found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(found.group(1))


def test_reference_tests_pass_under_pyodide(page, server, console_errors):
    page.goto(server + "/selftest")
    assert wait_for_status(page, timeout_s=300) == "done", page.inner_text("body")[-2000:]
    result = page.evaluate("window.wgattnSelftest")
    counts = result["counts"]
    assert result["python"] == "Python 3.8.2, numpy 1.17.5"
    assert result["rc"] == 0, result["output"][-4000:]
    assert counts["failed"] == 0 and counts["error"] == 0
    # The suite really ran there: every test CPython collects from the same files ran, and only
    # the oracle's comparisons (no JAX in Pyodide) skipped, saying why.
    files = sorted((ROOT / "tests").glob("test_reference*.py"))
    assert counts["passed"] + counts["skipped"] == _collected(*files), counts
    assert counts["skipped"] <= _collected(ROOT / "tests" / "test_reference_oracle.py"), counts
    assert counts["skipped"] == 0 or "jax" in result["output"]
    report = os.environ.get("WGATTN_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"metric": "pyodide_reference_tests", **counts, "seconds": result["seconds"]}) + "\n")
    assert console_errors == []
