"""The wheel the page installs with micropip: scripts/build_wheel.sh builds it offline with the
project's build backend, it carries every shader as package data, and an installed copy finds
them (wgattn.registry.shader_dir) away from the repository."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_the_package_and_every_shader(tmp_path):
    out = tmp_path / "wheels"
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_wheel.sh")],
        check=True,
        cwd=ROOT,
        env={"WGATTN_WHEELS": str(out), "PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    (wheel,) = out.glob("wgattn-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shaders = {
        p.relative_to(ROOT / "shaders").as_posix() for p in (ROOT / "shaders").rglob("*") if p.suffix in (".wgsl", ".json")
    }
    assert shaders and {f"wgattn/shaders/{s}" for s in shaders} <= names
    py = {p.relative_to(ROOT / "py").as_posix() for p in (ROOT / "py" / "wgattn").rglob("*.py")}
    assert py <= names
    assert not any(n.startswith(("tests/", "app/", "static/")) for n in names)

    # Installed elsewhere (as micropip installs it in Pyodide), it reads its own shaders.
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    probe = (
        "import wgattn.registry as r; reg = r.load(); "
        "print(r.shader_dir()); print(len(reg.kernels)); print(reg.kernel('sdpa_arena.seed').source()[:60])"
    )
    got = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert got[0] == str(target / "wgattn" / "shaders")
    assert int(got[1]) == len(__import__("wgattn.registry").registry.load().kernels)
    assert (ROOT / "shaders" / "sdpa_arena.seed.wgsl").read_text().startswith(got[2])

    # Unchanged sources: the script does nothing the second time.
    before = wheel.stat().st_mtime_ns
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_wheel.sh")],
        check=True,
        cwd=ROOT,
        env={"WGATTN_WHEELS": str(out), "PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert wheel.stat().st_mtime_ns == before
