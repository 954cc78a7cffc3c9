// @ts-check
// Pyodide in the page: loads the runtime, NumPy and micropip from this server (no request leaves
// the machine), installs the wgattn wheel (built by scripts/build_wheel.sh, shaders included as
// package data) with micropip, as Pyodide users install pure-Python packages, and imports it. The
// server says where Pyodide is and what loading it fetches, with each file's size
// (GET /py/wheel.json): progress is told in bytes as the files arrive (the browser's resource
// timing entries), then by step while Python starts.

import { $ } from "./dom.js";

/** @typedef {(text: string, loaded: number, total: number) => void} Progress bytes loaded of the total */

/** What loading Python fetches, from the server.
 * @typedef {{ url: string, name: string, pyodide: string, files: Array<{ url: string, bytes: number }> }} Runtime */

/** The loading on the page's #py-progress bar and #py-status line (index and self-test pages).
 * @type {Progress} */
export function showProgress(text, loaded, total) {
  const bar = $("py-progress", HTMLProgressElement);
  bar.max = total || 1;
  bar.value = Math.min(loaded, total);
  $("py-status").textContent = total ? `${text} (${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB)` : text;
}

/** Count the bytes of `files` as they arrive (the browser's resource timing: a file counts once
 * whole, with the size it came with, or with its listed size from the cache); `report(loaded)`
 * hears each change. Returns a function that stops counting.
 * @param {Runtime["files"]} files
 * @param {(loaded: number) => void} report */
function countArrivals(files, report) {
  const size = new Map(files.map((f) => [new URL(f.url, location.href).href, f.bytes]));
  const seen = new Set();
  let loaded = 0;
  /** @param {PerformanceEntryList} entries */
  const take = (entries) => {
    let changed = false;
    for (const e of /** @type {PerformanceResourceTiming[]} */ (entries)) {
      const listed = size.get(e.name);
      if (listed === undefined || seen.has(e.name)) continue;
      seen.add(e.name);
      loaded += e.encodedBodySize || listed;
      changed = true;
    }
    if (changed) report(loaded);
  };
  const observer = new PerformanceObserver((list) => take(list.getEntries()));
  observer.observe({ type: "resource", buffered: true });
  return () => {
    take(performance.getEntriesByType("resource"));
    observer.disconnect();
  };
}

/** Load Pyodide, NumPy (and more packages) and wgattn; `progress(text, loaded, total)` reports.
 * `files` (path -> text) are written to the working directory (the self-test's test files).
 * @param {Progress} progress
 * @param {{ packages?: string[], files?: Record<string, string> | null }} [options]
 * @returns {Promise<{ py: Pyodide, page: WgattnPage, version: string }>} */
export async function loadPython(progress, { packages = ["numpy"], files = null } = {}) {
  const wanted = [...packages, "micropip"];
  progress("Python for the float64 reference: asking the server what to load", 0, 0);
  const res = await fetch(`/py/wheel.json?packages=${encodeURIComponent(wanted.join(","))}`);
  /** @type {Runtime & { detail?: string }} */
  const info = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`could not load Python: ${info.detail || `HTTP ${res.status}`}`);
  const total = info.files.reduce((sum, f) => sum + f.bytes, 0);
  let loaded = 0;
  let step = "Python for the float64 reference: downloading Pyodide 0.17 (Python 3.8)";
  const stop = countArrivals(info.files, (n) => { loaded = n; progress(step, loaded, total); });
  /** @param {string} text */
  const say = (text) => { step = text; progress(step, loaded, total); };
  try {
    say(step);
    await new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = info.pyodide + "pyodide.js";
      s.onload = resolve;
      s.onerror = () => reject(new Error(`could not load ${info.pyodide}pyodide.js: is Pyodide installed? run make setup`));
      document.head.appendChild(s);
    });
    if (!globalThis.loadPyodide) throw new Error(`${info.pyodide}pyodide.js loaded but defined no loadPyodide: is it Pyodide 0.17?`);
    say("Python for the float64 reference: starting Pyodide 0.17 (Python 3.8)");
    const py = await globalThis.loadPyodide({ indexURL: info.pyodide });
    say(`Python for the float64 reference: loading ${wanted.join(", ")}`);
    await py.loadPackage(wanted);
    say("Python for the float64 reference: installing the wgattn wheel with micropip");
    // micropip 0.17 takes a URL ending in .whl and names the package from it: give it the absolute one.
    py.globals.set("_wheel_url", new URL(info.url, location.href).href);
    await py.runPythonAsync("import micropip\nawait micropip.install(_wheel_url)");
    py.globals.delete("_wheel_url");
    if (files) {
      py.globals.set("_files_json", JSON.stringify(files));
      py.runPython(`
import json, os
os.makedirs("/wgattn", exist_ok=True)
os.chdir("/wgattn")
for _path, _text in json.loads(_files_json).items():
    os.makedirs(os.path.dirname(_path) or ".", exist_ok=True)
    with open(_path, "w") as _f:
        _f.write(_text)
`);
      py.globals.delete("_files_json");
    }
    say("Python for the float64 reference: importing wgattn");
    await new Promise((resolve) => setTimeout(resolve, 0));  // the step shows before the import takes the thread
    const version = String(py.runPython(`
import sys, numpy, wgattn.page
'Python %d.%d.%d, numpy %s' % (sys.version_info[:3] + (numpy.__version__,))`));
    stop();
    loaded = Math.max(loaded, total);
    say(`ready: ${version}`);
    // One session for the page's life: it holds, and frees, every run, grid and benchmark in progress.
    // It comes back as a proxy: types.d.ts declares what the page calls on it.
    const page = /** @type {WgattnPage} */ (py.runPython("import wgattn.page\nwgattn.page.PageSession()"));
    return { py, page, version };
  } finally {
    stop();
  }
}
