"""The page's conformance view runs each interface's grid in the browser's WebGPU (SwiftShader
here): the project's kernels pass; pasted WGSL with a planted bug fails; WGSL that does not
compile gets a visible message."""

import re

import pytest

from pagetools import in_progress, wait_for_status
from wgattn import registry

REG = registry.load()
INTERFACES = sorted(n for n in REG.abis if REG.kernels_of(n) and all(k.path.exists() for k in REG.kernels_of(n)))


def _open(page, server):
    page.goto(server + "/?heads=1&seq_q=8&seq_k=8&head_dim=4")
    assert wait_for_status(page) == "done"


def _run_grid(page, interface, source=""):
    page.select_option("#grid-interface", interface)
    page.fill("#grid-source", source)
    page.click("#grid-run")
    page.wait_for_function("['done', 'error'].includes(document.getElementById('conformance').dataset.status)", timeout=600_000)
    return page.evaluate("document.getElementById('conformance').dataset.status")


@pytest.mark.parametrize("interface", INTERFACES)
def test_project_kernels_pass_the_grid_in_the_browser(page, server, console_errors, interface):
    _open(page, server)
    assert _run_grid(page, interface) == "done"
    summary = page.evaluate("window.wgattn.conformance")
    failing = [(c["case"], c["rows"]) for c in summary["cases"] if not c["pass"]]
    assert summary["failed"] == 0, failing
    assert summary["passed"] == len(summary["cases"]) > 0
    # Every kernel of the interface ran, or was skipped for a feature it requires; a kernel that
    # ran skipped only cases it cannot take here (a head dim no tile fits, a knob it lacks).
    ran = {c["kernel"] for c in summary["cases"]}
    skipped = {s["kernel"]: s["reason"] for s in summary["skipped"] if "case" not in s}
    assert ran | set(skipped) == {k.id for k in REG.kernels_of(interface)} and not ran & set(skipped)
    for kid, reason in skipped.items():
        assert REG.kernel(kid).requires and "lacks" in reason, (kid, reason)
    for s in summary["skipped"]:
        if "case" in s:
            why = ("no tile shape fits", "does not support", "supports head_dim <=")
            assert s["kernel"] in ran and any(w in s["reason"] for w in why), s
    assert in_progress(page) == {}  # the grid freed its job and runs
    assert console_errors == []


def test_pasted_planted_bug_fails(page, server):
    src = REG.kernel("sdpa_arena.seed").source().replace("hi = min(i + 1u, p.seq_k);", "hi = min(i, p.seq_k);")
    _open(page, server)
    assert _run_grid(page, "sdpa_arena", src) == "done"
    summary = page.evaluate("window.wgattn.conformance")
    assert summary["user"] is True
    failed = [c["case"] for c in summary["cases"] if not c["pass"]]
    assert failed and all("causal" in name or "window" in name for name in failed), failed
    # a failing row shows its error map: |error| / allowance by head and row block, over 1 marked
    mapped = [r for c in summary["cases"] for r in c["rows"] if not r["pass"] and (r.get("where") or {}).get("map")]
    assert mapped, "no failing row carries an error map"
    assert page.locator("#grid-table table.errgrid").count() == len(mapped)
    assert page.locator("#grid-table table.errgrid td.over").count() >= len(mapped)
    # ... labelled by the output's real axes ([B, H, S, D] or [B, S, H, D]: heads down, blocks of
    # queries across), and the failing elements named by them
    for r in mapped:
        assert sorted(r["where"]["axes"]) == ["batch", "dim", "head", "query"], r["where"]["axes"]
        assert (r["where"]["map"]["rows"], r["where"]["map"]["blocks_of"]) == ("head", "query")
    caption = page.locator("#grid-table table.errgrid caption").first.inner_text()
    assert caption.startswith("|error| ÷ allowance by head and block of query"), caption
    where = page.locator("#grid-table tr.where").first.inner_text()
    assert re.search(r"batch \d+, (head|query) \d+, (query|head) \d+, dim \d+: \|err\|", where), where


def test_pasted_wgsl_that_does_not_compile_shows_a_message(page, server):
    _open(page, server)
    assert _run_grid(page, "sdpa_arena", "fn broken( {") == "error"
    assert page.is_visible("#grid-error")
    assert "does not compile" in page.inner_text("#grid-error")
    assert in_progress(page) == {}  # the abandoned grid's job was released


def test_compile_error_text_is_shown_verbatim(page, server):
    """Rows were once built with innerHTML, so a compiler message naming `vec4<f32>` lost its
    `<f32>` as an unknown tag. Every field is text now: the table and the message show it as is."""
    _open(page, server)
    assert _run_grid(page, "sdpa_arena", "fn f() { let x: vec4<f32> = 1.0; }") == "error"
    table = page.inner_text("#grid-table")
    assert "does not compile" in table and "vec4<f32>" in table, table
    assert page.evaluate("document.querySelectorAll('#grid-table f32').length") == 0
    assert "vec4<f32>" in page.inner_text("#grid-error")
