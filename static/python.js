// Pyodide in the page: loads the runtime and NumPy from this server (no request leaves the
// machine), installs the wgattn package and shaders into its file system, and imports it.

const PYODIDE_URL = "/pyodide/";

/** Load Pyodide, NumPy (and more packages) and wgattn; `progress(step, total, text)` reports. */
export async function loadPython(progress, { packages = ["numpy"], tests = false } = {}) {
  const total = 4;
  progress(0, total, "loading the Pyodide runtime script");
  await new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = PYODIDE_URL + "pyodide.js";
    s.onload = resolve;
    s.onerror = () => reject(new Error(`could not load ${PYODIDE_URL}pyodide.js: is Pyodide installed? run make setup`));
    document.head.appendChild(s);
  });
  progress(1, total, "starting Python (Pyodide 0.17, Python 3.8)");
  const py = await globalThis.loadPyodide({ indexURL: PYODIDE_URL });
  progress(2, total, `loading ${packages.join(", ")}`);
  await py.loadPackage(packages);
  progress(3, total, "installing wgattn");
  const res = await fetch(`/py/bundle.json?tests=${tests}`);
  if (!res.ok) throw new Error(`could not fetch the wgattn Python bundle: HTTP ${res.status}`);
  py.globals.set("_bundle_json", await res.text());
  py.runPython(`
import json, os, sys
os.makedirs("/wgattn", exist_ok=True)
os.chdir("/wgattn")
for _path, _text in json.loads(_bundle_json)["files"].items():
    os.makedirs(os.path.dirname(_path), exist_ok=True)
    with open(_path, "w") as _f:
        _f.write(_text)
sys.path.insert(0, "/wgattn/py")
import wgattn.page
`);
  py.globals.delete("_bundle_json");
  const version = py.runPython("import sys, numpy; 'Python %d.%d.%d, numpy %s' % (sys.version_info[:3] + (numpy.__version__,))");
  progress(4, total, `ready: ${version}`);
  return { py, page: py.runPython("import wgattn.page\nwgattn.page"), version };
}
