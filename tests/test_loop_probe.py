"""The native runner refuses an adapter that truncates long loops. Debian 12's own lavapipe
(Mesa 22.3.6) is such an adapter: set-up unpacks it aside (never installed) and wgpu-py is pointed
at it in a subprocess, which must fail with the fix in its message."""

import json
import os
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
    """The ICD file for Debian 12's stock lavapipe that set-up unpacked into .cache (step 6 of
    scripts/setup.sh; tests never fetch anything themselves); skips where set-up could not."""
    icd = CACHE / "lvp_icd.json"
    if not icd.exists():
        where = icd.relative_to(CACHE.parent.parent)
        pytest.skip(f"no {where}: set-up fetches Debian 12's Mesa 22 only where apt-get and dpkg work")
    # A cached ICD whose library moved (a copy of .cache from another checkout) would let the
    # loader fall back to another driver silently: refuse to use it.
    library = Path(json.loads(icd.read_text())["ICD"]["library_path"])
    assert library.is_file(), f"{icd} names {library}, which is gone: run make setup again"
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
