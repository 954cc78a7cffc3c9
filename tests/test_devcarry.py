"""The lent-GPU-machine path of the benchmark suite, end to end on this machine: pack what travels
into parts (bench/devcarry.py), "stash" them into a folder standing in for the device's /tmp from
a copy of the working tree (what a device call sees), unpack and run the suite (bench/suite.py) with a bare
Python 3.12 (the device's version), the carried wheels, the carried Chromium on SwiftShader and
lavapipe, tiny shapes and few rounds. Records come back for every runtime; PyTorch is skipped with
its reason (no CUDA here)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import devcarry

ROOT = devcarry.ROOT

PY312 = Path.home() / ".pyenv" / "versions" / "3.12.1" / "bin" / "python3"
KERNELS = ["flash_fwd.tiled", "flash_fwd.blocked", "varlen_bwd.tiled"]
EXTRA = ["numpy", "aiohttp"]  # on the device's image, not in a bare Python 3.12


def _skip_unless_it_can_run_here():
    """Skip, saying why, where this machine cannot run the carried path (no test downloads:
    `python -m bench.devcarry fetch` does, once)."""
    if not PY312.exists():
        pytest.skip(f"no bare Python 3.12 at {PY312} (the device's version) to run the carried path with")
    for tool in ("zstd", "dpkg"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed here")
    if not Path("/usr/lib/chromium/chromium").exists():
        pytest.skip("Debian's chromium is not installed (make setup)")
    left = devcarry.missing(EXTRA)
    if left:
        fetch = f"python -m bench.devcarry fetch --extra {','.join(EXTRA)}"
        pytest.skip(f"the wheels and .deb that travel are not fetched ({left[:3]}...): {fetch}")


def _working_tree_copy(dest: Path) -> None:
    """What a device call sees: tracked files and untracked ones git does not ignore."""
    for name in devcarry.working_tree(ROOT):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)


def test_pack_stash_unpack_and_run_the_suite(tmp_path):
    _skip_unless_it_can_run_here()
    parts_dir, repo, device_tmp, out = tmp_path / "devcarry", tmp_path / "repo", tmp_path / "device-tmp", tmp_path / "out"
    pack = [
        sys.executable,
        "-m",
        "bench.devcarry",
        "pack",
        "--offline",
        "--dest",
        str(parts_dir),
        "--part-mib",
        "40",
        "--level",
        "3",
    ]
    (parts_dir / "p9").mkdir(parents=True)  # an older pack's part: replaced
    (parts_dir / "lab").mkdir()  # a lab's carried folder made before packing: kept
    (parts_dir / "lab" / "runner").write_text("kept\n")
    packed = subprocess.run([*pack, "--extra", ",".join(EXTRA)], cwd=ROOT, capture_output=True, text=True)
    assert packed.returncode == 0, packed.stdout[-3000:] + packed.stderr[-3000:]
    assert (parts_dir / "lab" / "runner").read_text() == "kept\n" and not (parts_dir / "p9").exists()
    parts = sorted(parts_dir.glob("p[0-9]*"), key=lambda p: int(p.name[1:]))
    assert len(parts) >= 3  # Chromium alone is over 100 MiB compressed: several calls
    assert all(sum(f.stat().st_size for f in p.rglob("*")) <= 40 * 2**20 + 2 * 2**20 for p in parts)
    # The printed calls name each part in the carry list, the last runs the suite.
    assert packed.stdout.count("run(command=") == len(parts) + 1 and f"carry=['{parts[0]}']" in packed.stdout
    manifest = json.loads((parts[-1] / "manifest.json").read_text())
    wheels = " ".join(manifest["wheels"])
    for name in ("wgpu-", "cffi-", "fastapi-", "starlette-", "pydantic_core-", "uvicorn-", "h11-", "anyio-", "numpy-"):
        assert name in wheels, name

    repo.mkdir()
    _working_tree_copy(repo)
    assert not (repo / ".cache").exists()  # the device gets no set-up: Pyodide and the wheel travel
    device = [str(PY312), "-m", "bench.devcarry"]
    for part in parts[:-1]:
        stashed = subprocess.run(
            [*device, "stash", str(part), "--root", str(device_tmp)], cwd=repo, capture_output=True, text=True
        )
        assert stashed.returncode == 0, stashed.stdout + stashed.stderr
    # Without every part the call bringing the last refuses, saying why.
    check = [*device, "run", str(parts[-1]), "--root", str(device_tmp), "--repo", str(repo), "--"]
    missing = tmp_path / "device-tmp-missing"
    (missing / "parts").mkdir(parents=True)
    refused = subprocess.run([*check[:5], "--root", str(missing), *check[7:], "true"], cwd=repo, capture_output=True, text=True)
    assert refused.returncode != 0 and f"1 of {len(parts)} parts" in refused.stderr + refused.stdout
    # With every part it unpacks, and what it runs finds the carried wheels.
    imports = [str(PY312), "-c", "import wgpu, fastapi, uvicorn, aiohttp, numpy"]
    unpacked = subprocess.run([*check, *imports], cwd=repo, capture_output=True, text=True, timeout=600)
    assert unpacked.returncode == 0, unpacked.stdout[-3000:] + unpacked.stderr[-3000:]

    # The last call carries no part: it runs in what the earlier calls unpacked (on another
    # machine it says to start again).
    suite = [str(PY312), "-m", "bench.suite", "--kernels", ",".join(KERNELS), "--shapes", "1,2,64,16", "--rounds", "5"]
    suite += ["--warmup-s", "0.2", "--repeat", "2", "--out", str(out), "--driver", "cdp", "--history", str(tmp_path)]
    elsewhere = subprocess.run([*device, "run", "--root", str(missing), "--", "true"], cwd=repo, capture_output=True, text=True)
    assert elsewhere.returncode != 0 and "from the first" in elsewhere.stderr + elsewhere.stdout
    run = [*device, "run", "--root", str(device_tmp), "--repo", str(repo), "--", *suite]
    done = subprocess.run(run, cwd=repo, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    records = json.loads((out / "records.json").read_text())
    report = json.loads((out / "report.json").read_text())
    got = {(r["runtime"], r["mode"], r["impl"], r["repeat"]) for r in records}
    for impl in KERNELS:
        for runtime, mode in (("native", "trusted"), ("native", "checked"), ("chromium", "checked"), ("chromium", "trusted")):
            for repeat in (0, 1):
                assert (runtime, mode, impl, repeat) in got, (runtime, mode, impl, repeat)
    assert report["torch"] == "skipped: no PyTorch with CUDA here"
    assert report["chromium_checked"]["version"]
    # The live check: every kernel that two runtimes ran passes; a kernel that needs what neither
    # adapter here has (subgroup matrices) is not checked, and says so, rather than failing.
    live = report["chromium_checked"]["live_check"]["results"]
    ran = [r for r in live if sum(v == "ok" for v in r["runtimes"].values()) >= 2]
    assert ran and all(r["pass"] for r in ran), [r for r in ran if not r["pass"]]
    for r in live:
        if r not in ran:
            assert not r["failed"] and all(v == "ok" or "lacks" in v for v in r["runtimes"].values()), r
    trusted = [r for r in records if r["runtime"] == "chromium" and r["mode"] == "trusted"]
    assert all("--enable-dawn-features=disable_robustness" in r["flags"] for r in trusted)
    assert all(r["commit"] == manifest["commit"] and r["browser"].startswith("Chromium 1") for r in trusted)
    assert all("swiftshader" in r["adapter"].lower() for r in records if r["runtime"] == "chromium")
    assert "repeats agree within 5%" in (out / "table.txt").read_text()


def test_the_printed_calls_fit_the_device_tool():
    """Every printed call is one the device tool accepts (a command of at most 2000 characters,
    at most 8 carried paths, at most 600 s); the parts go one a call, the last with the small
    check of every runtime, and the long call carries nothing (it has its ten minutes to itself)."""
    parts = [devcarry.ROOT / ".devcarry" / f"p{n}" for n in (1, 2, 3)]
    text = devcarry.calls(parts, "--rounds 30")
    made = [line.strip() for line in text.splitlines() if "run(command=" in line]
    assert len(made) == 4
    for n, line in enumerate(made[:2], 1):
        assert f"stash .devcarry/p{n}'" in line and f"carry=['.devcarry/p{n}']" in line
    assert "run .devcarry/p3 -- python3 -m bench.suite --out $OUT --shapes" in made[2] and "carry=['.devcarry/p3']" in made[2]
    assert "run -- python3 -m bench.suite --out $OUT --rounds 30'" in made[3] and "carry=[]" in made[3]
    assert made[3].endswith("timeout_s=600)")
    for line in made:
        command = line.split("command=", 1)[1].rsplit(", carry=", 1)[0]
        assert len(ast.literal_eval(command)) <= 2000  # the printed repr of the command string
        assert int(line.rsplit("timeout_s=", 1)[1].rstrip(")")) <= 600
    assert "-m bench.history add" in text
