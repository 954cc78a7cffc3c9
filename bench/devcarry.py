"""Carry what the benchmark suite needs to a lent GPU machine that reaches no package registry,
and run it there: the suite (bench/suite.py) with Chromium on the GPU beside wgpu-py and PyTorch.
Every command runs from the repository root.

    here:   .venv/bin/python -m bench.devcarry pack   # fetch what is missing, pack .devcarry/p1..p3, print the calls
    here:   .venv/bin/python -m bench.devcarry calls  # print them again
    there:  python3 -m bench.devcarry stash .devcarry/p1                     (calls 1, 2: a part each)
    there:  python3 -m bench.devcarry run .devcarry/p3 -- python3 -m bench.suite <small>   (call 3: unpack, check)
    there:  python3 -m bench.devcarry run -- python3 -m bench.suite --out $OUT             (call 4: the run)

`run` runs any command in that environment: `-- python3 -m bench.decode_bandwidth --json
$OUT/decode.jsonl` (the decode benchmark), `-- python3 -m wgattn.cli probe --json`, a lab script.

What travels (one tar, zstd-compressed, split into parts of at most --part-mib): Debian's Chromium
with the libraries `ldd` finds for it, three fonts (Skia aborts without one), the libvulkan1 .deb
(the machine has an NVIDIA driver but no Vulkan loader), the wheels the server and wgpu-py need
for Python 3.12 (the closure of wgpu, fastapi and uvicorn's requirements, at the versions
installed in .venv; numpy and aiohttp are there already), the unpacked Pyodide and the wgattn
wheel the page installs. zstd itself travels uncompressed in the last part (the machine has none).

Why so: a call carries at most 64 MiB with the working tree, its carried folders are gone in the
next call, and /tmp survives only while the machine is warm (30 s after a call). So the parts are
stashed into /tmp by short calls to one warm machine, made back to back. The call that brings the
last part unpacks (once per machine), installs the wheels into its own folder and runs the suite
small, every kernel in every runtime: a machine where something is missing says so in a minute.
The last call carries nothing and has its whole ten minutes for the suite. `run` sets up the
environment: the Vulkan loader, NVIDIA's ICD through libEGL_nvidia (the stock one needs a
display), the carried Chromium (its own libvulkan.so.1 beside the binary: ANGLE and Dawn load it
from there) with its libraries and the font configuration.
`pack --extra numpy,aiohttp` adds wheels for a machine without them (the tests' bare Python 3.12).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_DIR = Path("/usr/lib/chromium")
CHROMIUM_FILES = [
    "chromium",
    "chrome_crashpad_handler",
    "icudtl.dat",
    "resources.pak",
    "v8_context_snapshot.bin",
    "snapshot_blob.bin",
    "chrome_100_percent.pak",
    "libEGL.so",
    "libGLESv2.so",
    "libvk_swiftshader.so",
    "vk_swiftshader_icd.json",
    "libvulkan.so.1",  # Chromium's own Vulkan loader: with Debian's 1.3.239 beside it, SwiftShader's GPU process crashes
    "locales/en-US.pak",
]
FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSansMono.ttf"]
WHEEL_ROOTS = ["wgpu", "fastapi", "uvicorn"]  # what the server and wgpu-py need; their closure travels
THERE_ALREADY = {"numpy", "aiohttp"}  # on the lent machine's image (KINDS.md): carrying another numpy would shadow torch's
PYTHON_THERE = "3.12"
PLATFORMS = [
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux1_x86_64",
]
CACHE = ROOT / ".cache" / "devcarry"
ARCHIVE = "carry.tar.zst"
CALL_MIB = 64  # what one device call may carry, the working tree included
MOST_COMMAND = 2000  # characters in one device call's command
DEVICE_ROOT = "/tmp/wgattn-carry"  # where the parts and the unpacked tree live there
# Call 3's small run: every kernel in every runtime and both browser passes, at a shape that
# takes seconds, so that a missing piece shows before the long call.
SMOKE = "--shapes 1,4,256,64 --rounds 5 --warmup-s 0.3 --repeat 1 --no-live"


def say(*parts: object) -> None:
    print("devcarry:", *parts, flush=True)


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def wheel_closure(roots: Sequence[str], skip: Sequence[str] = ()) -> Dict[str, str]:
    """{name: version} of `roots` and everything their Requires-Dist needs on CPython 3.12 on
    Linux (extras left out), at the versions installed here."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    env = {
        "python_version": PYTHON_THERE,
        "python_full_version": PYTHON_THERE + ".3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    found: Dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = _canon(todo.pop())
        if name in found or name in {_canon(s) for s in skip}:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SystemExit(
                f"devcarry: {name} is not installed in {sys.executable}: pack with .venv/bin/python (after `make setup`)"
            ) from None
        found[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return found


def _wheel_args() -> List[str]:
    args = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", PYTHON_THERE]
    args += ["--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none"]
    for p in PLATFORMS:
        args += ["--platform", p]
    return args


def _cached(name: str, version: str) -> List[Path]:
    return sorted((CACHE / "wheels-cp312").glob(_canon(name).replace("-", "_") + "-" + version + "-*.whl"))


def _extra_dir(extra: Sequence[str]) -> Path:
    return CACHE / "wheels-cp312" / ("extra-" + "-".join(sorted(extra)))


def missing(extra: Sequence[str] = ()) -> List[str]:
    """What `pack` would have to download first (nothing: it packs offline)."""
    pins = wheel_closure(WHEEL_ROOTS, skip=sorted(THERE_ALREADY - {_canon(e) for e in extra}))
    out = [f"{n}=={v}" for n, v in pins.items() if not _cached(n, v)]
    if extra and not _extra_dir(extra).is_dir():
        out.append("+".join(extra))
    if not list(CACHE.glob("libvulkan1_*.deb")):
        out.append("libvulkan1 (.deb)")
    return out


def fetch(extra: Sequence[str] = ()) -> None:
    """Download into .cache/devcarry what travels and is not on this machine: the wheels for
    Python 3.12 on manylinux x86_64 (the closure of the server's and wgpu-py's requirements at
    .venv's versions, and `extra` with what they need) and libvulkan1's .deb (apt-get download)."""
    (CACHE / "wheels-cp312").mkdir(parents=True, exist_ok=True)
    pins = wheel_closure(WHEEL_ROOTS, skip=sorted(THERE_ALREADY - {_canon(e) for e in extra}))
    need = [f"{n}=={v}" for n, v in pins.items() if not _cached(n, v)]
    if need:
        say(f"downloading {len(need)} wheels for Python {PYTHON_THERE}")
        subprocess.run([*_wheel_args(), "--no-deps", "-d", str(CACHE / "wheels-cp312"), *need], check=True)
    if extra and not _extra_dir(extra).is_dir():
        subprocess.run([*_wheel_args(), "-d", str(_extra_dir(extra)), *extra], check=True)
    if not list(CACHE.glob("libvulkan1_*.deb")):
        subprocess.run(["apt-get", "download", "libvulkan1"], cwd=CACHE, check=True, capture_output=True)
    left = missing(extra)
    if left:
        raise SystemExit(f"devcarry: still missing after the download: {left}")


def collect_wheels(extra: Sequence[str], dest: Path) -> List[Path]:
    """Copy the fetched wheels into `dest`: the pinned closure, then `extra`'s (one version of
    each: the closure's wins)."""
    pins = wheel_closure(WHEEL_ROOTS, skip=sorted(THERE_ALREADY - {_canon(e) for e in extra}))
    out = []
    for name, version in pins.items():
        hits = _cached(name, version)
        if not hits:
            raise SystemExit(
                f"devcarry: no wheel of {name}=={version} for Python {PYTHON_THERE}: run `python -m bench.devcarry fetch`"
            )
        out.append(hits[0])
    if extra:
        have = {_canon(p.name.split("-")[0]) for p in out}
        out += [p for p in sorted(_extra_dir(extra).glob("*.whl")) if _canon(p.name.split("-")[0]) not in have]
    dest.mkdir(parents=True, exist_ok=True)
    for p in out:
        shutil.copy2(p, dest / p.name)
    return out


def libvulkan_deb() -> Path:
    """libvulkan1's .deb, fetched."""
    debs = sorted(CACHE.glob("libvulkan1_*.deb"))
    if not debs:
        raise SystemExit("devcarry: no libvulkan1 .deb in .cache/devcarry: run `python -m bench.devcarry fetch`")
    return debs[-1]


def _chromium_libs() -> List[Path]:
    """The shared libraries Chromium loads, as ldd finds them (the C library's own left out)."""
    out = subprocess.run(["ldd", str(CHROMIUM_DIR / "chromium")], capture_output=True, text=True, check=True).stdout
    skip = ("libc.so", "libm.so", "libdl.so", "libpthread", "librt.so", "ld-linux", "linux-vdso")
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/") and not any(s in parts[0] for s in skip):
            libs.append(Path(parts[2]))
    return libs


def stage(dest: Path, extra: Sequence[str]) -> Dict[str, object]:
    """Everything that travels, laid out in `dest`; a summary for the manifest."""
    if not (CHROMIUM_DIR / "chromium").exists():
        raise SystemExit(f"devcarry: no Chromium in {CHROMIUM_DIR}: run `make setup` (it installs Debian's chromium)")
    pyodide = ROOT / ".cache" / "pyodide"
    wheels = ROOT / ".cache" / "wheels"
    subprocess.run(["bash", str(ROOT / "scripts" / "build_wheel.sh")], cwd=ROOT, check=True)
    if not pyodide.is_dir() or not list(wheels.glob("wgattn-*.whl")):
        raise SystemExit("devcarry: no Pyodide or wgattn wheel in .cache: run `make setup` first")
    for f in CHROMIUM_FILES:
        (dest / "chromium" / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CHROMIUM_DIR / f, dest / "chromium" / f)
    (dest / "lib").mkdir()
    for lib in _chromium_libs():
        shutil.copy2(lib, dest / "lib" / lib.name)  # follows links: the library itself under its soname
    (dest / "fonts").mkdir()
    for font in FONTS:
        shutil.copy2(Path("/usr/share/fonts/truetype/dejavu") / font, dest / "fonts" / font)
    shutil.copy2(libvulkan_deb(), dest / "libvulkan1.deb")
    carried = collect_wheels(extra, dest / "wheels")
    shutil.copytree(pyodide, dest / "pyodide", ignore=shutil.ignore_patterns("*.tar.gz", "*.tgz"))
    shutil.copytree(wheels, dest / "wgattn-wheels")
    return {"wheels": sorted(p.name for p in carried), "chromium_libs": len(list((dest / "lib").iterdir()))}


def working_tree(root: Path = ROOT) -> List[str]:
    """What a device call sends besides its carry: the tracked files and the untracked ones git
    does not ignore (paths relative to `root`)."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [n.decode() for n in names if n and (root / n.decode()).is_file()]


def working_tree_mib(root: Path = ROOT) -> float:
    return sum((root / name).stat().st_size for name in working_tree(root)) / 2**20


def _mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def pack(dest: Path, part_mib: float, level: int, extra: Sequence[str], suite_args: str) -> List[Path]:
    """Stage, compress and split into dest/p1 .. dest/pN (the last pack's parts replaced, anything
    else in dest left: a lab's carried folder); print the calls that run it there. Offline: what
    must be downloaded is `fetch`'s (a test packs only what was fetched)."""
    from wgattn import bench

    zstd = shutil.which("zstd")
    if zstd is None:
        raise SystemExit("devcarry: zstd is not installed here (apt-get install zstd)")
    t0 = time.time()
    for old in dest.glob("p[0-9]*"):  # the last pack's parts; other carried folders here stay
        shutil.rmtree(old)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="devcarry-") as tmp:
        staged = Path(tmp) / "staged"
        staged.mkdir()
        summary = stage(staged, extra)
        archive = Path(tmp) / ARCHIVE
        say(f"compressing {_mib(staged):.0f} MiB (zstd -{level} --long=27)")
        with open(archive, "wb") as fh:
            tar = subprocess.Popen(["tar", "cf", "-", "-C", str(staged), "."], stdout=subprocess.PIPE)
            flags = [f"-{level}", "--long=27", "-T0", "-q"] + (["--ultra"] if level > 19 else [])
            subprocess.run([zstd, *flags], stdin=tar.stdout, stdout=fh, check=True)
            if tar.wait() != 0:
                raise SystemExit("devcarry: tar failed")
        data = archive.read_bytes()
    size = int(part_mib * 2**20)
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    parts = []
    for n, chunk in enumerate(chunks, 1):
        part = dest / f"p{n}"
        part.mkdir()
        (part / f"{ARCHIVE}.{n:02d}").write_bytes(chunk)
        parts.append(part)
    last = parts[-1]
    (last / "tools").mkdir()
    shutil.copy2(zstd, last / "tools" / "zstd")
    for lib in ("libz.so.1", "liblzma.so.5", "liblz4.so.1"):  # what Debian's zstd links against
        src = Path("/lib/x86_64-linux-gnu") / lib
        if src.exists():
            shutil.copy2(src, last / "tools" / lib)
    manifest = {
        "parts": len(parts),
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "commit": bench.git_commit(ROOT),
        "packed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suite_args": suite_args,
        **summary,
    }
    (last / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    tree = working_tree_mib()
    say(f"{len(data) / 2**20:.1f} MiB in {len(parts)} parts of at most {part_mib:g} MiB, in {time.time() - t0:.0f} s:")
    for part in parts:
        say(f"  {_rel(part)}: {_mib(part):.1f} MiB (+ {tree:.1f} MiB of working tree)")
    over = [_rel(part) for part in parts if _mib(part) + tree > CALL_MIB]
    if over:
        raise SystemExit(f"devcarry: {over} with the working tree exceed a call's {CALL_MIB} MiB: pack with a smaller --part-mib")
    print(calls(parts, suite_args))
    return parts


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def calls(parts: Sequence[Path], suite_args: str = "") -> str:
    """The device calls, in order, to make back to back on one warm machine, and the command that
    takes the results in here."""
    rel = [_rel(p) for p in parts]
    stash_calls = [(f"python3 -m bench.devcarry stash {part}", [part], 120) for part in rel[:-1]]
    runner = "PYTHONUNBUFFERED=1 python3 -m bench.devcarry run"
    check = f"{runner} {rel[-1]} -- python3 -m bench.suite --out $OUT {SMOKE}"
    full = f"{runner} -- python3 -m bench.suite --out $OUT {suite_args}".strip()
    made = [*stash_calls, (check, [rel[-1]], 300), (full, [], 600)]
    lines = [
        "The device calls, from this checkout (the device gets its working tree), to one warm machine, each made",
        "as soon as the last returns (a machine goes back 30 s after a call; then start again at 1):",
    ]
    if any(Path(r).is_absolute() for r in rel):
        lines.append("  (the parts lie outside this checkout: a call carries only paths inside it; pack into .devcarry)")
    for n, (command, carry, timeout) in enumerate(made, 1):
        assert len(command) <= MOST_COMMAND, command
        lines.append(f"  {n}. run(command={command!r}, carry={carry!r}, timeout_s={timeout})")
    lines += [
        f"Call {len(made) - 1} unpacks and runs every kernel small in every runtime (about a minute): read its output",
        f"before call {len(made)}, the suite itself (native, PyTorch, Chromium robustness on and off, two repeats).",
        "Then, here, with the folder its files landed in (files_at):",
        "  .venv/bin/python -m bench.history add FILES_AT          # history file, docs tables, comparison",
    ]
    return "\n".join(lines)


def stash(part: Path, root: Path) -> None:
    """Copy a part's chunk into root/parts (the machine's /tmp: it survives while the machine is warm)."""
    (root / "parts").mkdir(parents=True, exist_ok=True)
    chunks = sorted(part.glob(f"{ARCHIVE}.*"))
    if not chunks:
        raise SystemExit(f"devcarry: {part} holds no part of {ARCHIVE}: carry it (name it in the call's carry list)")
    for c in chunks:
        shutil.copy2(c, root / "parts" / c.name)
    held = sorted(p.name for p in (root / "parts").iterdir())
    say(f"stashed {', '.join(c.name for c in chunks)}; {root / 'parts'} holds {held}")


def unpack(last: Path, root: Path) -> Dict[str, object]:
    """Join the parts (checked against the manifest), decompress and untar into root/unpacked,
    once per machine; install the wheels into root/site; keep the manifest as root/manifest.json."""
    manifest = json.loads((last / "manifest.json").read_text())
    done = root / "unpacked" / ".done"
    if done.exists() and done.read_text() == manifest["sha256"]:
        return manifest
    chunks = sorted((root / "parts").glob(f"{ARCHIVE}.*"))
    if len(chunks) != manifest["parts"]:
        have = [c.name for c in chunks]
        raise SystemExit(
            f"devcarry: {len(chunks)} of {manifest['parts']} parts in {root / 'parts'} ({have}): the machine was given "
            "back between calls (a fresh one has an empty /tmp), or a stash call was skipped. Make the stash calls "
            "again, back to back."
        )
    digest = hashlib.sha256()
    for c in chunks:
        digest.update(c.read_bytes())
    if digest.hexdigest() != manifest["sha256"]:
        raise SystemExit("devcarry: the joined parts do not match the manifest: parts of two different packs; stash them again")
    t0 = time.time()
    shutil.rmtree(root / "unpacked", ignore_errors=True)
    (root / "unpacked").mkdir(parents=True)
    tools = last / "tools"
    env = dict(os.environ, LD_LIBRARY_PATH=f"{tools}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    cat = " ".join(shlex.quote(str(c)) for c in chunks)
    cmd = f"cat {cat} | {shlex.quote(str(tools / 'zstd'))} -d -q --long=27 | tar xf - -C {shlex.quote(str(root / 'unpacked'))}"
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], env=env, check=True)
    shutil.rmtree(root / "site", ignore_errors=True)
    wheels = sorted(str(p) for p in (root / "unpacked" / "wheels").glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(root / "site"), *wheels], check=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    done.write_text(manifest["sha256"])
    say(f"unpacked {manifest['bytes'] / 2**20:.0f} MiB and installed {len(wheels)} wheels in {time.time() - t0:.0f} s")
    return manifest


def unpacked(root: Path) -> Dict[str, object]:
    """The manifest of what an earlier call unpacked on this machine; SystemExit saying which
    calls to make when nothing is."""
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except FileNotFoundError:
        raise SystemExit(
            f"devcarry: nothing is unpacked in {root}: this machine is not the one the earlier calls went to (it was "
            "given back between calls). Make every call again, from the first, back to back."
        ) from None
    if (root / "unpacked" / ".done").read_text() != manifest["sha256"]:
        raise SystemExit(f"devcarry: {root / 'unpacked'} is not the pack of {root / 'manifest.json'}: make every call again")
    return manifest


def environment(root: Path, repo: Path, commit: str) -> Dict[str, str]:
    """The environment the suite runs in: the carried wheels and the repo's package first on the
    path, the Vulkan loader (and NVIDIA's ICD where there is an NVIDIA driver), the carried
    Chromium with its libraries and fonts, the page's Pyodide and wgattn wheel in the repo."""
    u = root / "unpacked"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "site"), str(repo / "py"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("XDG_RUNTIME_DIR", str(root / "xdg"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    if commit:
        env["WGATTN_COMMIT"] = commit
    loader = root / "vulkan"
    if not (loader / "usr").exists():
        subprocess.run(["dpkg", "-x", str(u / "libvulkan1.deb"), str(loader)], check=True)
    libdir = loader / "usr" / "lib" / "x86_64-linux-gnu"
    paths = [str(libdir)]
    egl = subprocess.run(
        ["bash", "-c", "ldconfig -p | awk '/libEGL_nvidia.so.0/{print $NF; exit}'"], capture_output=True, text=True
    )
    driver_dir = "/usr/local/nvidia/lib64" if Path("/usr/local/nvidia/lib64").is_dir() else os.path.dirname(egl.stdout.strip())
    if driver_dir and (Path(driver_dir) / "libEGL_nvidia.so.0").exists():
        paths.append(driver_dir)
        icd = root / "nvidia_egl_icd.json"
        icd.write_text('{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}\n')
        env["VK_ICD_FILENAMES"] = str(icd)  # the stock ICD names libGLX_nvidia, which needs a display
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*paths, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    # ANGLE and Dawn load libvulkan.so.1 from beside the binary: Chromium's own travels there. The
    # H100 recipe found none there and put Debian's in its place, which worked: bench/suite.py
    # falls back to it if a browser finds no adapter.
    env["WGATTN_VULKAN_FALLBACK"] = str(next(libdir.glob("libvulkan.so.1*")))
    env["WGATTN_CHROMIUM"] = str(u / "chromium" / "chromium")
    env["WGATTN_CHROMIUM_LIBS"] = str(u / "lib")
    conf = root / "fonts.conf"
    conf.write_text(
        f'<?xml version="1.0"?>\n<fontconfig><dir>{u / "fonts"}</dir><cachedir>{root / "fccache"}</cachedir></fontconfig>\n'
    )
    env["FONTCONFIG_FILE"] = str(conf)
    # The page's Pyodide and wgattn wheel, where the server looks for them (the repo's .cache).
    target = repo / ".cache" / "pyodide"
    if not target.is_dir():
        shutil.copytree(u / "pyodide", target)
    wheels = repo / ".cache" / "wheels"
    if not list(wheels.glob("wgattn-*.whl")):
        shutil.copytree(u / "wgattn-wheels", wheels, dirs_exist_ok=True)
    return env


def run(last: Optional[Path], root: Path, command: Sequence[str], repo: Path) -> int:
    """With the last part: stash it and unpack (once per machine); without: use what an earlier
    call unpacked. Then set the environment up and run `command` in the repo."""
    if last is not None:
        stash(last, root)
        manifest = unpack(last, root)
    else:
        manifest = unpacked(root)
    env = environment(root, repo, str(manifest.get("commit", "")))
    say(f"running in {repo}: {' '.join(command)}")
    return subprocess.run(list(command), cwd=repo, env=env).returncode


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    f = sub.add_parser("fetch", help="download the 3.12 wheels and the libvulkan1 .deb into .cache/devcarry")
    f.add_argument("--extra", default="", help="more wheels, with what they need (e.g. numpy,aiohttp)")
    p = sub.add_parser("pack", help="stage, compress and split what travels; print the device calls")
    p.add_argument("--dest", default=str(ROOT / ".devcarry"))
    p.add_argument("--part-mib", type=float, default=55.0, help="a part's size (a call carries at most 64 MiB with the repo)")
    p.add_argument("--level", type=int, default=12, help="zstd's level (12: about 150 MiB in 3 parts, 2 minutes)")
    p.add_argument("--extra", default="", help="more wheels, with what they need (e.g. numpy,aiohttp)")
    p.add_argument("--suite-args", default="", help="arguments of the suite (bench.suite) in the printed last call")
    p.add_argument("--offline", action="store_true", help="pack only what was fetched (default: fetch what is missing first)")
    c = sub.add_parser("calls", help="print the device calls of the last pack again")
    c.add_argument("--dest", default=str(ROOT / ".devcarry"))
    s = sub.add_parser("stash", help="copy a carried part into --root (on the device machine)")
    s.add_argument("part")
    r = sub.add_parser("run", help="[with the last part: stash it, unpack once;] set up and run the command after --")
    r.add_argument("part", nargs="?", help="the last part (omitted: use what an earlier call unpacked)")
    for q in (s, r):
        q.add_argument("--root", default=DEVICE_ROOT, help="where parts and the unpacked tree live")
    r.add_argument("--repo", default=str(ROOT))
    args = ap.parse_args(argv)
    if args.verb == "fetch":
        fetch([e.strip() for e in args.extra.split(",") if e.strip()])
        return 0
    if args.verb == "pack":
        extra = [e.strip() for e in args.extra.split(",") if e.strip()]
        if not args.offline:
            fetch(extra)
        pack(Path(args.dest), args.part_mib, args.level, extra, args.suite_args)
        return 0
    if args.verb == "calls":
        parts = sorted(Path(args.dest).glob("p[0-9]*"), key=lambda p: int(p.name[1:]))
        if not parts or not (parts[-1] / "manifest.json").exists():
            raise SystemExit(f"devcarry: no pack in {args.dest}: .venv/bin/python -m bench.devcarry pack")
        print(calls(parts, str(json.loads((parts[-1] / "manifest.json").read_text()).get("suite_args", ""))))
        return 0
    if args.verb == "stash":
        stash(Path(args.part), Path(args.root))
        return 0
    if not command:
        ap.error("run needs a command after --, e.g. -- python3 -m bench.suite --out $OUT")
    return run(Path(args.part) if args.part else None, Path(args.root), command, Path(args.repo))


if __name__ == "__main__":
    sys.exit(main())
