"""The precision probe in the browser: the page measures its WebGPU built-ins and shows
them beside the server's; a failing conformance case is localised (likely class, worst elements)."""

from pagetools import wait_for_status
from wgattn import precision, registry


def test_probe_section_and_localised_failure(page, server, console_errors):
    page.goto(server + "/?heads=1&seq_q=8&seq_k=8&head_dim=4")
    assert wait_for_status(page) == "done"
    page.wait_for_function("['done', 'error'].includes(document.getElementById('precision')?.dataset.status)", timeout=120_000)
    assert page.evaluate("document.getElementById('precision').dataset.status") == "done"
    state = page.evaluate("window.wgattn.precision")
    names = [f.name for f in precision.FUNCTIONS]
    for side in ("browser", "native"):
        rows = {r["name"]: r for r in state[side]["functions"]}
        assert list(rows) == names, side
        assert rows["softcap_apply"]["max_ulps"] <= 8, (side, rows["softcap_apply"])
    assert state["browser"]["adapter"]["runtime"] == "browser"
    assert page.locator("#precision-table tr").count() == len(names) + 1
    page.click("#precision summary")  # the table is folded until asked for
    assert "softcap_apply(a, b)" in page.inner_text("#precision-table")

    # A planted mask bug (causal rows miss their diagonal key): the failing rows say where and why.
    src = registry.load().kernel("sdpa_arena.seed").source().replace("hi = min(i + 1u, p.seq_k);", "hi = min(i, p.seq_k);")
    page.select_option("#grid-interface", "sdpa_arena")
    page.fill("#grid-source", src)
    page.click("#grid-run")
    page.wait_for_function("['done', 'error'].includes(document.getElementById('conformance').dataset.status)", timeout=600_000)
    summary = page.evaluate("window.wgattn.conformance")
    failing = [r for c in summary["cases"] for r in c["rows"] if not r["pass"]]
    assert failing
    assert all(r["where"]["likely"] == "mask edge" and r["where"]["worst"] for r in failing), [
        r["where"]["evidence"] for r in failing
    ]
    assert "likely mask edge" in page.inner_text("#grid-table")
    assert summary["precision"]["functions"][0]["name"] == "exp"  # the report stores the probe
    assert console_errors == []
