// @ts-check
// Runs the reference's own pytest suite inside Pyodide. The wgattn package comes from its wheel
// (micropip); the tests, which are not part of it, are written into the working directory.
// Publishes window.wgattnSelftest = {rc, counts: {passed, failed, skipped}, python, output}.
import { $, el, runPage } from "./dom.js";
import { loadPython, showProgress } from "./python.js";

/**
 * What RUN_TESTS returns, with the Python version and the seconds it took.
 * @typedef {{ rc: number, counts: { passed: number, failed: number, skipped: number, error: number },
 *   pytest: string, output: string, python: string, seconds: number }} SelftestResult
 */

const RUN_TESTS = `
import io, json, sys
import pytest

class _Tally:
    """Counts outcomes the way pytest's summary line does."""
    def __init__(self):
        self.counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            key = "error" if report.failed and report.when != "call" else report.outcome
            self.counts[key] += 1

_tally, _buf, _stdout = _Tally(), io.StringIO(), sys.stdout
sys.stdout = _buf
try:
    _rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "tests"], plugins=[_tally])
finally:
    sys.stdout = _stdout
json.dumps({"rc": int(_rc), "counts": _tally.counts, "pytest": pytest.__version__, "output": _buf.getvalue()})
`;

async function main() {
  const res = await fetch("/py/selftest.json");
  if (!res.ok) throw new Error(`could not fetch the reference tests: HTTP ${res.status}`);
  const { files } = await res.json();
  const python = await loadPython(showProgress, { packages: ["numpy", "pytest"], files });
  $("py-status").textContent = `running the reference tests (${python.version})…`;
  const t0 = performance.now();
  /** @type {SelftestResult} */
  const result = JSON.parse(String(python.py.runPython(RUN_TESTS)));
  result.python = python.version;
  result.seconds = (performance.now() - t0) / 1000;
  window.wgattnSelftest = result;
  const c = result.counts;
  const ok = result.rc === 0;
  $("summary").replaceChildren(el("span", { class: ok ? "pass" : "fail" }, ok ? "PASS" : "FAIL"),
    ` ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped, ${c.error} errors in ${result.seconds.toFixed(1)} s` +
    ` (${python.version}, pytest ${result.pytest})`);
  $("output").textContent = result.output;
  $("py-status").textContent = "finished";
}

runPage(main, (why) => {
  const box = $("message");
  box.hidden = false;
  box.textContent = `The self-test stopped: ${why}`;
});
