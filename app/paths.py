"""Where the server finds what it serves, resolved from this file (not the working directory)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
SHADERS = ROOT / "shaders"
PY = ROOT / "py"
TESTS = ROOT / "tests"
PYODIDE_VERSION = "0.17.1"
PYODIDE = ROOT / ".cache" / "pyodide" / PYODIDE_VERSION
# scripts/build_wheel.sh writes the wheel here (WGATTN_WHEELS overrides it for both)
WHEELS = ROOT / os.environ.get("WGATTN_WHEELS", ".cache/wheels")
HISTORY = ROOT / "bench" / "history"  # the committed benchmark records (JSON Lines)
SWAGGER_UI = ROOT / "node_modules" / "swagger-ui-dist"  # /docs's Swagger UI, from npm (set-up's npm ci)
