// Runs the reference's own pytest suite inside Pyodide. The wgattn package comes from its wheel
// (micropip); the tests, which are not part of it, are written into the working directory.
// Publishes window.wgattnSelftest = {rc, counts: {passed, failed, skipped}, python, output}.
import { loadPython } from "./python.js";

const $ = (id) => document.getElementById(id);

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
  const python = await loadPython((step, total, text) => {
    $("py-progress").value = step;
    $("py-progress").max = total;
    $("py-status").textContent = text;
  }, { packages: ["numpy", "pytest"], files });
  $("py-status").textContent = `running the reference tests (${python.version})…`;
  const t0 = performance.now();
  const result = JSON.parse(python.py.runPython(RUN_TESTS));
  result.python = python.version;
  result.seconds = (performance.now() - t0) / 1000;
  window.wgattnSelftest = result;
  const c = result.counts;
  $("summary").innerHTML = `<span class="${result.rc === 0 ? "pass" : "fail"}">${result.rc === 0 ? "PASS" : "FAIL"}</span>
    ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped, ${c.error} errors in ${result.seconds.toFixed(1)} s
    (${python.version}, pytest ${result.pytest})`;
  $("output").textContent = result.output;
  $("py-status").textContent = "finished";
}

main().then(
  () => { document.body.dataset.status = "done"; },
  (e) => {
    const box = $("message");
    box.hidden = false;
    box.textContent = `The self-test stopped: ${e.message}`;
    document.body.dataset.status = "error";
  },
);
