#!/usr/bin/env bash
# Build wgattn's pure-Python wheel (the package plus shaders/ as package data) with the project's
# own build backend (setuptools), offline, into .cache/wheels/. The server serves it to the page,
# which installs it under Pyodide with micropip. Idempotent: rebuilds only when the sources changed.
#   scripts/build_wheel.sh            (make setup runs it; the e2e tests run it before serving)
# pyodide-build is not used: `pyodide build` fetches a cross-build environment from the internet
# even for a pure-Python package, and a pure-Python wheel needs nothing Pyodide-specific.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${WGATTN_WHEELS:-.cache/wheels}"
py="${PYTHON:-.venv/bin/python}"
[ -x "$py" ] || py=python3

# The wheel's inputs: a stamp of their contents decides whether to rebuild.
want=$(find pyproject.toml README.md py/wgattn shaders -type f \( -name '*.py' -o -name '*.wgsl' \
        -o -name '*.json' -o -name '*.toml' -o -name '*.md' \) -not -path '*/__pycache__/*' -print0 \
        | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] && ls "$out"/wgattn-*.whl >/dev/null 2>&1; then
    exit 0
fi
# Build from a clean copy: setuptools' in-tree build/ keeps files deleted from the sources.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r pyproject.toml README.md shaders "$tmp"/
mkdir -p "$tmp/py" && cp -r py/wgattn "$tmp/py/"
find "$tmp" -name __pycache__ -prune -exec rm -rf {} +
"$py" -m pip wheel --no-deps --no-build-isolation --disable-pip-version-check -q -w "$tmp/dist" "$tmp" >&2
mkdir -p "$out"
rm -f "$out"/wgattn-*.whl
cp "$tmp"/dist/wgattn-*-py3-none-any.whl "$out"/
echo "$want" > "$out/.stamp"
printf 'build_wheel: %s\n' "$(ls "$out"/wgattn-*.whl)" >&2
