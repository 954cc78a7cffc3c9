"""Where the server finds what it serves, resolved from this file (not the working directory)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
SHADERS = ROOT / "shaders"
PY = ROOT / "py"
TESTS = ROOT / "tests"
PYODIDE_VERSION = "0.17.1"
PYODIDE = ROOT / ".cache" / "pyodide" / PYODIDE_VERSION
