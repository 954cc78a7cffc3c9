"""The native runner refuses an adapter that truncates long loops. Debian 12's own lavapipe
(Mesa 22.3.6) is such an adapter: it is unpacked aside (never installed) and wgpu-py is pointed at
it in a subprocess, which must fail with the fix in its message."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "mesa22"
PROBE = """
from wgattn import native
try:
    native.runtime()
    print("accepted")
except native.AdapterError as exc:
    print("refused:", exc)
"""


def _mesa22_icd() -> Path:
    """An ICD file for Debian 12's stock lavapipe, unpacked into .cache (skips when unavailable)."""
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        pytest.skip("needs Debian's apt-get and dpkg to fetch Mesa 22's lavapipe")
    icd = CACHE / "lvp_icd.json"
    # A cached ICD whose library moved (a copy of .cache from another checkout) would let the
    # loader fall back to another driver silently: use it only while its library is there.
    if icd.exists() and Path(json.loads(icd.read_text())["ICD"]["library_path"]).is_file():
        return icd
    madison = subprocess.run(["apt-cache", "madison", "mesa-vulkan-drivers"], capture_output=True, text=True)
    versions = [line.split("|")[1].strip() for line in madison.stdout.splitlines() if "|" in line]
    old = [v for v in versions if v.startswith("22.")]
    if not old:
        pytest.skip(f"no Mesa 22 mesa-vulkan-drivers in the apt lists (have {versions})")
    CACHE.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(["apt-get", "download", f"mesa-vulkan-drivers={old[0]}"], cwd=CACHE, capture_output=True, text=True)
    debs = list(CACHE.glob("mesa-vulkan-drivers_22*.deb"))
    if got.returncode != 0 or not debs:
        pytest.skip(f"could not download Mesa {old[0]}: {got.stderr.strip()[-200:]}")
    root = CACHE / "root"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["dpkg", "-x", str(debs[0]), str(root)], check=True)
    lib = next(root.rglob("libvulkan_lvp.so"))
    icd.write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": str(lib), "api_version": "1.1.0"}}))
    return icd


def _probe(icd: str) -> str:
    env = dict(os.environ, VK_ICD_FILENAMES=icd)
    env.pop("VK_DRIVER_FILES", None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    return out.stdout.strip() + out.stderr.strip()[-500:]


def test_stock_debian12_lavapipe_is_refused():
    pytest.importorskip("wgpu")
    got = _probe(str(_mesa22_icd()))
    assert got.startswith("refused:"), got
    assert "after 65535" in got and "bookworm-backports" in got


def test_installed_adapter_is_accepted():
    pytest.importorskip("wgpu")
    icd = "/usr/share/vulkan/icd.d/lvp_icd.json"
    if not os.path.exists(icd):
        icd = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
    if not os.path.exists(icd):
        pytest.skip("no lavapipe ICD installed")
    assert _probe(icd).startswith("accepted")
