"""The test suite's own hygiene: no test depends on running last, and no test module imports a
conftest (shared helpers live in tests/helpers.py, e2e/pagetools.py and bench/demo.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

_REVERSE = "def pytest_collection_modifyitems(items):\n    items.reverse()\n"


def _jax_version() -> str:
    import jax

    return jax.__version__


def test_oracle_report_does_not_depend_on_order(tmp_path):
    """test_reference_oracle.py reported its worst error from a `test_zz_` test that had to run
    last; run in reverse order, the report must still come out, over every comparison (the
    module's cheap tests: which ones ran does not matter to the order, and the rest take minutes)."""
    pytest.importorskip("jax")
    (tmp_path / "reverse_order.py").write_text(_REVERSE)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'py'}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "reverse_order",
            "-p",
            "no:cacheprovider",
            "-k",
            "probs",
            str(TESTS / "test_reference_oracle.py"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-1000:]
    ran = int(proc.stdout.splitlines()[-1].split()[0])  # "4 passed, 24 deselected in ...": one comparison each
    assert f"worst abs error vs JAX {_jax_version()} (float64)" in proc.stdout, proc.stdout[-2000:]
    assert f"over {ran} comparisons" in proc.stdout, proc.stdout[-2000:]


def test_no_order_dependent_names():
    for path in sorted(TESTS.glob("test_*.py")) + sorted((ROOT / "e2e").glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue  # this file names what it looks for
        text = path.read_text()
        assert "def test_zz" not in text, f"{path.name}: a test named to run last"


def test_nothing_imports_a_conftest():
    """Three conftest.py files (root, tests/, e2e/) share one module name: `from conftest import`
    gets whichever sys.path finds first. Shared code lives in tests/helpers.py, e2e/pagetools.py and
    bench/demo.py."""
    files = [*TESTS.glob("*.py"), *(ROOT / "e2e").glob("*.py"), *(ROOT / "bench").rglob("*.py"), *(ROOT / "lab").rglob("*.py")]
    files.append(ROOT / "conftest.py")
    for path in files:
        if path.name == Path(__file__).name:
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            assert not (words[:1] in (["import"], ["from"]) and len(words) > 1 and words[1].split(".")[-1] == "conftest"), (
                f"{path.relative_to(ROOT)} imports a conftest: {line.strip()}"
            )
