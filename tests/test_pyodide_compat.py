"""What the page imports under Pyodide must be Python 3.8 syntax (the only offline Pyodide with
NumPy is 0.17: Python 3.8, numpy 1.17). The e2e tests run it there for real; this catches syntax
early and without a browser."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE_FILES = sorted((ROOT / "py" / "wgattn").rglob("*.py")) + sorted((ROOT / "tests").glob("test_reference*.py"))


@pytest.mark.parametrize("path", PAGE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python38_syntax(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))
