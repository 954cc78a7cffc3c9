"""Adding an interface touches five files of code and nothing else: its module, its WGSL header, a
kernel, the manifest, and its reference function in wgattn.reference (which docs/contract.md
documents). This test adds one (`scale_rows`: out = scale * x) to a copy of the product tree (py/,
app/, shaders/, static/), measures the files the addition changed by comparing the copy with the
tree, and runs every consumer on the copy in a process of its own: `wgattn check`'s grid natively,
the native API (`wgattn.native.scale_rows`), a live run, the catalogue and its live form's fields,
the server's /api/kernels and /api/run, and the page's grid and live check (its Python, with the
native runtime for the browser). Each of the five is needed: without any one of them the interface
is refused, saying what is missing. It is the worked example of docs/kernels.md ("Adding an interface")."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("py/wgattn", "app", "shaders", "static")  # what the copy holds: the package, the server, the page

HEADER = """// The `scale_rows` interface: out = scale * x, one element per invocation.
struct Params {
  n: u32,       // elements of x and out
  scale: f32,
  _pad0: u32,
  _pad1: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
"""

KERNEL = """// scale_rows.seed: one invocation per element.
#include "interfaces/scale_rows.wgsl"
override WG: u32;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x < params.n) {
    out[id.x] = params.scale * x[id.x];
  }
}
"""

MANIFEST = {
    "interface": {
        "summary": "out = scale * x",
        "reference": "scale_rows",
        "passes": [{"name": "main", "entry_point": "main", "uses": [0, 1, 2], "grid": {"items": "n", "per_workgroup": "WG"}}],
    },
    "kernel": {"interface": "scale_rows", "rank": 10, "summary": "one invocation per element", "overrides": {"WG": 64}},
}

REFERENCE = '''

def scale_rows(x: Any, *, scale: float = 1.0, dtype: Any = np.float64) -> np.ndarray:
    """out = scale * x, for x of shape [n]; scale a finite nonzero float32."""
    dt = _check_dtype(dtype)
    a = _float_array(x, "x", 1, "[n]")
    return a.astype(dt) * dt.type(check_scale(scale, 1))
'''

MODULE = '''"""The `scale_rows` interface: out = scale * x (x: [n] float32)."""

from dataclasses import dataclass

import numpy as np

from wgattn import reference
from wgattn.interfaces.base import Case, Interface, Layout, data_buffer, out_buffer
from wgattn.interfaces.config import LiveConfig, knob
from wgattn.plan import Output


@dataclass
class ScaleRowsConfig(LiveConfig):
    n: int = knob(1000, 1, 1 << 20)
    scale: float = knob(2.0, f32="scale")
    seed: int = knob(0, 0, 2**32 - 1)

    @property
    def heads(self):
        return 1

    def tensors(self):
        return {"x": np.random.RandomState(self.seed).standard_normal(self.n).astype(np.float32)}


class ScaleRows(Interface):
    name = "scale_rows"
    OUTPUTS = ("out",)
    Config = ScaleRowsConfig
    GRID = [dict(name="n1", n=1), dict(name="n1000", n=1000, scale=-0.5), dict(name="n70000", n=70000)]

    def layout(self, case):
        x = np.ascontiguousarray(case.inputs["x"], np.float32)
        scale = reference.check_scale(case.options.get("scale", 1.0), 1)
        if x.ndim != 1:
            raise ValueError(f"x must be 1-D with shape [n], got shape {x.shape}")
        buffers = {"x": data_buffer("x", x), "out": out_buffer("out", x.nbytes)}
        return Layout({"n": x.size, "scale": scale}, buffers, [Output("out", "out", 0, x.shape)])

    def reference(self, case, dtype=np.float64):
        return {"out": reference.scale_rows(case.inputs["x"], scale=case.options.get("scale", 1.0), dtype=dtype)}

    def case_from_reference(self, x, *, scale=1.0, name="call"):
        return Case(name, {"x": np.asarray(x)}, {"scale": scale})

    def grid_case(self, rng, name, n, scale=2.0):
        return Case(name, {"x": rng.standard_normal(n).astype(np.float32)}, {"scale": scale})

    def live_case(self, config, tensors, name):
        return self.case_from_reference(tensors["x"], scale=config.scale, name=name)

    def probabilities(self, case, head, max_cells):
        raise ValueError("scale_rows computes no attention probabilities to picture")


INTERFACE = ScaleRows()
'''


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _manifest(root: Path) -> None:
    path = root / "shaders" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["interfaces"]["scale_rows"] = MANIFEST["interface"]
    manifest["kernels"]["scale_rows.seed"] = MANIFEST["kernel"]
    path.write_text(json.dumps(manifest, indent=2) + "\n")


def _reference(root: Path) -> None:
    path = root / "py" / "wgattn" / "reference.py"
    text = path.read_text()
    assert "__all__ = [\n" in text
    path.write_text(text.replace("__all__ = [\n", '__all__ = [\n    "scale_rows",\n', 1) + REFERENCE)


# Each file the addition touches, and the edit that makes it.
EDITS = {
    "py/wgattn/interfaces/scale_rows.py": lambda root: _write(root / "py/wgattn/interfaces/scale_rows.py", MODULE),
    "py/wgattn/reference.py": _reference,
    "shaders/interfaces/scale_rows.wgsl": lambda root: _write(root / "shaders/interfaces/scale_rows.wgsl", HEADER),
    "shaders/scale_rows.seed.wgsl": lambda root: _write(root / "shaders/scale_rows.seed.wgsl", KERNEL),
    "shaders/manifest.json": _manifest,
}

# What refuses the interface when one file is left out.
WITHOUT = {
    "py/wgattn/interfaces/scale_rows.py": "No module named 'wgattn.interfaces.scale_rows'",
    "py/wgattn/reference.py": "name 'scale_rows' as their reference, which is no function of wgattn.reference",
    "shaders/interfaces/scale_rows.wgsl": "interfaces/scale_rows.wgsl",
    "shaders/scale_rows.seed.wgsl": "scale_rows.seed.wgsl",
    "shaders/manifest.json": "unknown kernel 'scale_rows.seed'",
}


def _files(root: Path) -> dict:
    """path relative to `root` -> bytes, of every file of the product's folders (no caches)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for top in PRODUCT
        for p in (root / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _copy_with(tmp: Path, edits) -> Path:
    """A copy of the product tree with `edits` made to it."""
    root = tmp / "tree"
    for top in PRODUCT:
        shutil.copytree(ROOT / top, root / top, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for edit in edits:
        edit(root)
    return root


def _python(root: Path, code: str) -> subprocess.CompletedProcess:
    """`code` run by this venv's Python on the copy: its package and its server, not the tree's."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "py"), str(root)]))
    env.pop("WGATTN_SHADERS", None)
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300)


# Every consumer of the registry, run on the copy; prints one JSON report.
CONSUMERS = r"""
import json
import numpy as np
from fastapi.testclient import TestClient
import wgattn
from wgattn import check, interfaces, live, native, wire
from wgattn.page import PageSession
from app import main

rt = native.runtime()
report = {"package": wgattn.__file__, "interfaces": [i.name for i in interfaces.every()]}
checked = check.check("scale_rows", runtime=rt)
report["check"] = [checked["passed"], checked["failed"]]
x = np.random.RandomState(1).standard_normal(100).astype(np.float32)
report["native_api"] = [native.implementations("scale_rows"), bool((native.scale_rows(x, scale=3.0) == 3 * x).all())]
run = live.build("scale_rows.seed", {"n": 100, "scale": 3.0})
report["live"] = bool((rt.run(run.plan(rt.target)).outputs["out"] == 3.0 * run.tensors["x"]).all())
catalogue = live.catalogue()
report["catalogue"] = [[k["id"] for k in catalogue["kernels"] if k["interface"] == "scale_rows"],
                       [f["name"] for f in catalogue["configs"]["scale_rows"]]]
try:
    live.build("scale_rows.seed", {"scale": 1e-40})
except ValueError as exc:
    report["bad_config"] = str(exc)

client = TestClient(main, base_url="http://localhost")
served = client.get("/api/kernels").json()
report["api_kernels"] = [k["id"] for k in served["kernels"] if k["interface"] == "scale_rows"]
config = {"n": 300, "scale": -1.5}
answer = client.post("/api/run", json={"kernel": "scale_rows.seed", "config": config})
report["api_run"] = answer.status_code

page = PageSession()
page.use_target(json.dumps(rt.target.to_json()))

def browser(run):  # what the page's JS does, on the native runtime
    for name, data in rt.run(page.plan(run)).raw.items():
        page.add_buffer(run, name, data)

start = json.loads(page.grid_start(json.dumps({"interface": "scale_rows"})))
rows = []
for index in range(len(start["items"])):
    run = json.loads(page.grid_prepare(start["job"], index))["run"]
    browser(run)
    rows += json.loads(page.grid_judge(run))
report["page_grid"] = [[i["case"] for i in start["items"]], all(r["pass"] for r in rows)]
prepared = json.loads(page.prepare(json.dumps({"kernel": "scale_rows.seed", "config": config})))
browser(prepared["run"])
finished = json.loads(page.finish(prepared["run"], json.dumps({"timings": {}}), answer.text))
report["page_live"] = [finished["verdict"]["word"], len(finished["pairs"]), finished["config"]]
print(json.dumps(report))
"""


def test_a_new_interface_touches_five_files_and_every_consumer_knows_it(tmp_path, native_runtime):
    root = _copy_with(tmp_path, EDITS.values())
    before, after = _files(ROOT), _files(root)
    touched = {path for path in after if before.get(path) != after[path]}
    assert touched == set(EDITS) and len(touched) == 5

    done = _python(root, CONSUMERS)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert Path(report["package"]).is_relative_to(root)  # the copy's package ran, not the tree's
    assert report["interfaces"][-1] == "scale_rows"
    assert report["check"] == [3, 0]  # its grid, natively
    assert report["native_api"] == [["seed"], True]
    assert report["live"] is True
    assert report["catalogue"] == [["scale_rows.seed"], ["n", "scale", "seed"]]
    assert "scale must be None or a finite nonzero real number" in report["bad_config"]
    assert report["api_kernels"] == ["scale_rows.seed"] and report["api_run"] == 200
    assert report["page_grid"] == [["n1", "n1000", "n70000"], True]
    assert report["page_live"] == ["PASS", 3, {"n": 300, "scale": -1.5, "seed": 0}]


# What the interface is for, at its least: a plan of its kernel, and its op in the native API.
NEEDED = """
from wgattn import live, native
from wgattn.target import Target
plan = live.build("scale_rows.seed", {"n": 8}).plan(Target())
assert not plan.unavailable, plan.unavailable
native.scale_rows
"""


@pytest.mark.parametrize("left_out", sorted(EDITS))
def test_each_of_the_five_is_needed(tmp_path, left_out):
    root = _copy_with(tmp_path, [edit for path, edit in EDITS.items() if path != left_out])
    done = _python(root, NEEDED)
    assert done.returncode != 0 and WITHOUT[left_out] in done.stderr, done.stderr[-3000:]
