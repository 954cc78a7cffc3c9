// @ts-check
// Pyodide in the page: loads the runtime, NumPy and micropip from this server (no request leaves
// the machine), installs the wgattn wheel (built by scripts/build_wheel.sh, shaders included as
// package data) with micropip, as Pyodide users install pure-Python packages, and imports it.

import { $ } from "./dom.js";

const PYODIDE_URL = "/pyodide/";

/** @typedef {(step: number, total: number, text: string) => void} Progress */

/** The loading steps on the page's #py-progress bar and #py-status line (index and self-test pages).
 * @type {Progress} */
export function showProgress(step, total, text) {
  const bar = $("py-progress", HTMLProgressElement);
  bar.value = step;
  bar.max = total;
  $("py-status").textContent = text;
}

/** Load Pyodide, NumPy (and more packages) and wgattn; `progress(step, total, text)` reports.
 * `files` (path -> text) are written to the working directory (the self-test's test files).
 * @param {Progress} progress
 * @param {{ packages?: string[], files?: Record<string, string> | null }} [options]
 * @returns {Promise<{ py: Pyodide, page: WgattnPage, version: string }>} */
export async function loadPython(progress, { packages = ["numpy"], files = null } = {}) {
  const total = 5;
  progress(0, total, "loading the Pyodide runtime script");
  await new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = PYODIDE_URL + "pyodide.js";
    s.onload = resolve;
    s.onerror = () => reject(new Error(`could not load ${PYODIDE_URL}pyodide.js: is Pyodide installed? run make setup`));
    document.head.appendChild(s);
  });
  progress(1, total, "starting Python (Pyodide 0.17, Python 3.8)");
  if (!globalThis.loadPyodide) throw new Error(`${PYODIDE_URL}pyodide.js loaded but defined no loadPyodide: is it Pyodide 0.17?`);
  const py = await globalThis.loadPyodide({ indexURL: PYODIDE_URL });
  progress(2, total, `loading ${packages.join(", ")} and micropip`);
  await py.loadPackage([...packages, "micropip"]);
  progress(3, total, "installing the wgattn wheel with micropip");
  const res = await fetch("/py/wheel.json");
  const info = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`could not find the wgattn wheel: ${info.detail || `HTTP ${res.status}`}`);
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
  progress(4, total, "importing wgattn");
  const version = String(py.runPython(`
import sys, numpy, wgattn.page
'Python %d.%d.%d, numpy %s' % (sys.version_info[:3] + (numpy.__version__,))`));
  progress(5, total, `ready: ${version}`);
  // One session for the page's life: it holds, and frees, every run, grid and benchmark in progress.
  // It comes back as a proxy: types.d.ts declares what the page calls on it.
  const page = /** @type {WgattnPage} */ (py.runPython("import wgattn.page\nwgattn.page.PageSession()"));
  return { py, page, version };
}
