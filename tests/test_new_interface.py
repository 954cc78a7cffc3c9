"""Adding an interface touches its module, its WGSL and the manifest, and nothing else: this test
adds one (`scale_rows`: out = scale * x) in a copy of the shaders folder and a module beside the
package's, and every consumer knows it (wgattn check's grid, natively; a live run; the catalogue
and its live form's fields; the page's grid). It is the worked example of wgattn.interfaces.base."""

import json
import shutil
import sys

import pytest

from helpers import browser_stand_in, failures, session_on
from wgattn import check, interfaces, live, registry, wire

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

    def _checked(self, case):
        x = np.asarray(case.inputs["x"])
        if x.ndim != 1 or x.dtype.kind != "f":
            raise ValueError(f"x must be a 1-D float array, got {x.dtype} of shape {x.shape}")
        return np.ascontiguousarray(x, np.float32), reference.check_scale(case.options.get("scale", 1.0), 1)

    def layout(self, case):
        x, scale = self._checked(case)
        buffers = {"x": data_buffer("x", x), "out": out_buffer("out", x.nbytes)}
        return Layout({"n": x.size, "scale": scale}, buffers, [Output("out", "out", 0, x.shape)])

    def reference(self, case, dtype=np.float64):
        x, scale = self._checked(case)
        return {"out": x.astype(dtype) * np.dtype(dtype).type(scale)}

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


@pytest.fixture
def scale_rows(tmp_path, monkeypatch):
    """The interface added: a copy of shaders/ with its header, kernel and manifest entries, and its
    module on wgattn.interfaces' path."""
    shaders = tmp_path / "shaders"
    shutil.copytree(registry.shader_dir(), shaders)
    (shaders / "interfaces" / "scale_rows.wgsl").write_text(HEADER)
    (shaders / "scale_rows.seed.wgsl").write_text(KERNEL)
    manifest = json.loads((shaders / "manifest.json").read_text())
    manifest["interfaces"]["scale_rows"] = MANIFEST["interface"]
    manifest["kernels"]["scale_rows.seed"] = MANIFEST["kernel"]
    (shaders / "manifest.json").write_text(json.dumps(manifest))
    package = tmp_path / "package"
    package.mkdir()
    (package / "scale_rows.py").write_text(MODULE)
    monkeypatch.setenv("WGATTN_SHADERS", str(shaders))
    monkeypatch.setattr(interfaces, "__path__", [*interfaces.__path__, str(package)])
    yield interfaces.get("scale_rows")
    interfaces._LOADED.pop("scale_rows", None)
    sys.modules.pop("wgattn.interfaces.scale_rows", None)


def test_the_new_interface_is_known_everywhere(scale_rows):
    assert [i.name for i in interfaces.every()][-1] == "scale_rows"
    assert [(p.name, p.type) for p in scale_rows.abi.params] == [
        ("n", "u32"),
        ("scale", "f32"),
        ("_pad0", "u32"),
        ("_pad1", "u32"),
    ]
    catalogue = live.catalogue()
    assert "scale_rows" in catalogue["interfaces"] and "scale_rows.seed" in [k["id"] for k in catalogue["kernels"]]
    assert [f["name"] for f in catalogue["configs"]["scale_rows"]] == ["n", "scale", "seed"]
    with pytest.raises(ValueError, match="scale must be None or a finite nonzero real number"):
        live.build("scale_rows.seed", {"scale": 1e-40})


def test_the_new_interface_runs_its_grid_and_a_live_check(scale_rows, native_runtime):
    report = check.check("scale_rows", runtime=native_runtime)
    assert report["passed"] == len(scale_rows.GRID) and report["failed"] == 0, report
    run = live.build("scale_rows.seed", {"n": 100, "scale": 3.0})
    got = native_runtime.run(run.plan(native_runtime.target)).outputs["out"]
    assert (got == 3.0 * run.tensors["x"]).all()


def test_the_page_runs_its_grid_and_a_live_check(scale_rows, native_runtime):
    """The page's Python (PageSession) with the native runtime standing in for the browser."""
    page = session_on(native_runtime)
    start = json.loads(page.grid_start(json.dumps({"interface": "scale_rows"})))
    assert [i["case"] for i in start["items"]] == [c["name"] for c in scale_rows.GRID] and start["skipped"] == []
    for index in range(len(start["items"])):
        run = json.loads(page.grid_prepare(start["job"], index))["run"]
        browser_stand_in(page, run, native_runtime)
        rows = json.loads(page.grid_judge(run))
        assert [r["output"] for r in rows] == ["out"] and not failures(rows), rows
    config = {"n": 300, "scale": -1.5}
    prepared = json.loads(page.prepare(json.dumps({"kernel": "scale_rows.seed", "config": config})))
    browser_stand_in(page, prepared["run"], native_runtime)
    server = live.build("scale_rows.seed", config)  # what POST /api/run answers
    out = native_runtime.run(server.plan(native_runtime.target))
    native = {"digest": server.digest, "outputs": {k: wire.encode(v) for k, v in out.outputs.items()}, "timings": out.timings}
    finished = json.loads(page.finish(prepared["run"], json.dumps({"timings": {"wall_ms": 1.0}}), json.dumps(native)))
    assert finished["pass"] and len(finished["pairs"]) == 3 and finished["config"] == dict(config, seed=0), finished
