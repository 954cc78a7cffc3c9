"""The page's JavaScript is type-checked: TypeScript (package.json, installed by
scripts/setup.sh) checks static/*.js from their JSDoc under tsconfig.json's strict settings, with
WebGPU's types and static/types.d.ts's declarations of Pyodide and wgattn.page. The second test
shows the checker is real: errors planted in a copy of static/ fail it, each named by file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TSC = ROOT / "node_modules" / ".bin" / "tsc"

pytestmark = pytest.mark.skipif(not TSC.exists(), reason="node_modules is not installed: run make setup (npm ci)")

# (file, text there, what it becomes, what tsc must say about that file)
PLANTED = [
    # a misspelled member of a WebGPU object (@webgpu/types)
    ("webgpu.js", "dev.queue.submit(", "dev.queu.submit(", "Property 'queu' does not exist on type 'GPUDevice'"),
    # an argument of the wrong type to the page's own function
    ("form.js", "kernelInfo(opt.value)", "kernelInfo(opt.index)", "'number' is not assignable to parameter of type 'string'"),
    # a call into Python that wgattn.page does not have (wire.d.ts declares what it has, from PageSession)
    ("conformance.js", "page.grid_judge(", "page.grid_judged(", "Property 'grid_judged' does not exist on type 'WgattnPage'"),
    # a key of Python's JSON that its declaration (wire.d.ts, generated from the TypedDict) lacks
    (
        "run.js",
        "pass: result.pass, verdict",
        "pass: result.passed, verdict",
        "Property 'passed' does not exist on type 'LiveResult'",
    ),
    ("bench.js", "r.mode ? ` [${r.mode}]`", "r.modes ? ` [${r.mode}]`", "Property 'modes' does not exist on type 'BenchRecord'"),
    # an element used as another class than the one $ was asked for
    ("pictures.js", '$("errmap", HTMLCanvasElement).width', '$("errmap").width', "'width' does not exist on type 'HTMLElement'"),
]


def _tsc(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(TSC), "-p", "."], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_page_javascript_type_checks():
    r = _tsc(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_planted_type_errors_fail_the_check(tmp_path):
    shutil.copytree(ROOT / "static", tmp_path / "static")
    shutil.copy(ROOT / "tsconfig.json", tmp_path / "tsconfig.json")
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")
    assert _tsc(tmp_path).returncode == 0, "the copy must check clean before anything is planted"
    for name, old, new, _ in PLANTED:
        path = tmp_path / "static" / name
        text = path.read_text()
        assert old in text, f"{old!r} is no longer in static/{name}: plant the error elsewhere"
        path.write_text(text.replace(old, new, 1))
    r = _tsc(tmp_path)
    assert r.returncode != 0
    lines = r.stdout.splitlines()
    for name, _, _, message in PLANTED:
        assert any(line.startswith(f"static/{name}(") and message in line for line in lines), (name, r.stdout)
