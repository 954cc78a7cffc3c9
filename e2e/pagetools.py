"""What the end-to-end tests share besides fixtures: waits on the page's state, and the check
that the page can be served here. The fixtures (conftest.py) build on these and on bench/demo.py
(the demo server and Chromium's flags, shared with the benchmark suite); tests import them from
here, never from a conftest."""

import json

import pytest

from bench.demo import ROOT


def needs_pyodide() -> None:
    """Skip, saying why, where the page cannot load: it needs Pyodide in .cache/pyodide."""
    if not (ROOT / ".cache" / "pyodide").is_dir():
        pytest.skip("Pyodide is not installed (.cache/pyodide): run make setup")


def wait_for_status(page, timeout_s: float = 180) -> str:
    page.wait_for_function("['done', 'error'].includes(document.body.dataset.status)", timeout=timeout_s * 1000)
    return page.evaluate("document.body.dataset.status")


def in_progress(page) -> dict:
    """What the page's wgattn.page.PageSession holds besides the finished runs it keeps for their
    pictures: {kind: count}, every count 0 when the page has nothing in progress. Waits for the
    precision probe that the page starts on load first (it holds a run while it runs)."""
    page.wait_for_function("['done', 'error'].includes(document.getElementById('precision')?.dataset.status)", timeout=120_000)
    held = json.loads(page.evaluate("window.wgattn.ctx.page.stats()"))
    assert 0 <= held.pop("finished") <= 16
    return {kind: n for kind, n in held.items() if n}


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page) -> list:
    """axe-core's violations on the page as it is now (injected through DevTools: the page's CSP
    forbids an inline script, rightly), one line each; skips, saying why, without axe-core."""
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed ({AXE}): run make setup")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())
    return page.evaluate("""async () => (await axe.run(document)).violations
        .map((v) => `${v.id}: ${v.help} (${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')})`)""")
