"""Visits a person makes to the page beyond the first look (the layout at both sizes is
test_page_layout.py's): a link with an unknown kernel or an out-of-bounds value, the time to the
first verdict cold and warm (and the bytes before it), decode on the page (labelled fields, a
picture that shows its rows grouped by head, its bandwidth benchmark from a form), the repository's
record files dropped on the charts beside this browser's own runs, the benchmark form checked as it
is typed with its settings in the URL, WebGPU without an adapter, /docs with no network, and
/selftest. One page per visit; pages share the browser's cache within a context, as a reader's do."""

import json
import os
import re

import pytest

from pagetools import ROOT, axe_violations, wait_for_status
from wgattn import registry

REG = registry.load()
SHOTS = ROOT / "test-results" / "screenshots"


def _report(**record):
    path = os.environ.get("WGATTN_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


@pytest.fixture(scope="module")
def context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


def _open(context, url, init_script=None):
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    if init_script:
        page.add_init_script(init_script)
    page.goto(url)
    return page, errors


def test_an_unknown_kernel_in_a_link_opens_the_defaults_and_says_so(context, server):
    page, errors = _open(context, f"{server}/?kernel=nope.nope&seq_q=9&bench=nope&bench_rounds=3")
    assert wait_for_status(page) == "done", page.inner_text("main")
    note = page.inner_text("#url-note")
    assert "kernel=nope.nope is not a registered kernel" in note and "sdpa_arena.seed" in note and "flash_fwd.tiled" in note, note
    (run,) = page.evaluate("window.wgattn.results.runs")
    assert run["kernel"] == "sdpa_arena.seed" and run["pass"] is True  # the defaults ran
    for button in ("#run", "#run-all", "#grid-run", "#bench-run"):
        assert page.is_enabled(button), button
    # the benchmark's part of the link: said, not run
    assert "bench=nope is not an op the benchmark has (allowed: fwd, bwd, probs)" in page.inner_text("#bench-error")
    assert "rounds must be an integer in 5..100, got 3" in page.inner_text("#bench-form-error")
    assert page.get_attribute("#bench-rounds", "aria-invalid") == "true"
    assert page.evaluate("window.wgattn.bench.status") == "error" and page.evaluate("window.wgattn.bench.records") == []
    assert axe_violations(page) == []
    assert errors == []
    page.close()


def test_an_out_of_bounds_value_in_a_link_runs_its_default_and_says_so(context, server):
    page, errors = _open(context, f"{server}/?kernel=sdpa_arena.seed&seq_q=70000&heads=2")
    assert wait_for_status(page) == "done", page.inner_text("main")
    note = page.inner_text("#url-note")
    assert "seq_q=70000 could not be used (seq_q must be an integer in 1..65536, got 70000)" in note, note
    (run,) = page.evaluate("window.wgattn.results.runs")
    assert run["config"]["heads"] == 2 and run["config"]["seq_q"] == 128 and run["pass"] is True  # the rest of the link kept
    assert "seq_q=128" in page.url and "heads=2" in page.url
    assert errors == []
    page.close()


def test_time_to_the_first_verdict_cold_and_warm(browser, server):
    """A cold load (an empty cache) and a reload: what arrived before the first verdict, compressed
    and, warm, from the cache (versioned files are cached for good). Times are reported, not gated."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        got = {}
        for visit in ("cold", "warm"):
            if visit == "cold":
                page.goto(server + "/")
            else:
                page.reload()
            assert wait_for_status(page) == "done"
            r = page.evaluate("window.wgattn.results")
            got[visit] = {"ms": r["first_result_ms"], "bytes": r["first_result_bytes"], "form_ms": r["form_ms"]}
            _report(metric=f"first_verdict_{visit}", **got[visit])
            print(f"{visit}: first verdict at {r['first_result_ms']:.0f} ms, form at {r['form_ms']:.0f} ms, "
                  f"{r['first_result_bytes'] / 1e6:.2f} MB received before it")  # fmt: skip
        wasm = page.evaluate("""performance.getEntriesByType('resource').filter((e) => e.name.endsWith('pyodide.asm.wasm'))
            .map((e) => [e.encodedBodySize, e.decodedBodySize, e.transferSize])""")
    finally:
        context.close()
    assert got["cold"]["form_ms"] < got["cold"]["ms"]  # the form before the verdict
    assert 0 < got["cold"]["bytes"] < 16e6, got  # 27 MB of files, gzip'd
    assert got["warm"]["bytes"] < got["cold"]["bytes"] / 10, got  # Pyodide and the wheel from the cache
    (encoded, decoded, transfer), *_ = wasm
    assert encoded < decoded / 2 and transfer < encoded  # compressed, then cached (the warm load's entry)


def test_decode_on_the_page(context, server):
    """Decode's fields are labelled in words; its picture shows every head's rows, grouped, each
    row high enough to see; its bandwidth benchmark runs from its form (checked as typed) and its
    records join the decode chart; the repository's decode .jsonl imports beside the H100's."""
    config = "kernel=paged_decode.split&batch=2&heads=4&heads_kv=2&seq_len=40&head_dim=16"
    page, errors = _open(context, f"{server}/?{config}")
    assert wait_for_status(page) == "done", page.inner_text("main")
    labels = page.locator("#config-fields label > span:first-child").all_inner_texts()
    assert labels and not [t for t in labels if "_" in t], labels  # words, not raw names
    assert "new tokens per sequence" in labels and "cache block size (tokens)" in labels
    heat = page.evaluate("window.wgattn.pictures.heatmap")
    assert heat["heads"] == [0, 1, 2, 3] and [g[0] for g in heat["groups"]] == ["head 0", "head 1", "head 2", "head 3"]
    height = page.evaluate("parseFloat(getComputedStyle(document.getElementById('heatmap')).height)")
    assert height >= min(160, 16 * heat["rows"]), (height, heat["rows"])  # a row is at least 16 px
    assert page.locator(".plot .group:not(:empty)").count() >= 2  # the groups named on the picture
    page.locator("#pictures").screenshot(path=str(SHOTS / "pictures-decode.png"))

    # the bandwidth benchmark's form: labelled, bounds checked as typed, then a small run
    decode_labels = page.locator("#decode-fields label > span:first-child").all_inner_texts()
    assert decode_labels == page.locator("#config-fields label > span:first-child").all_inner_texts()
    page.fill("#decode-rounds", "3")
    page.wait_for_selector("#decode-form-error", state="visible")
    assert "rounds must be an integer in 5..100, got 3" in page.inner_text("#decode-form-error")
    for name, value in {"batch": 1, "heads": 2, "heads_kv": 1, "seq_len": 64, "head_dim": 16}.items():
        page.fill(f"#decode-{name}", str(value))
    page.fill("#decode-impls", "paged_decode.split")
    page.fill("#decode-rounds", "5")
    page.fill("#decode-warmup_s", "0.1")
    assert not page.is_visible("#decode-form-error")
    page.click("#decode-run")
    page.wait_for_function("['done', 'error'].includes(document.getElementById('decode').dataset.status)", timeout=300_000)
    assert page.get_attribute("#decode", "data-status") == "done", page.inner_text("#decode")
    impls = page.locator("#decode-table tr[data-impl]").evaluate_all("(rows) => rows.map((r) => r.dataset.impl)")
    assert sorted(impls) == ["paged_decode.split", "wgsl.copy"], impls
    assert "max |err|" in page.inner_text("#decode-table")  # checked before it was timed
    yours = page.evaluate("[...document.querySelectorAll('#decode-chart g[data-source=yours]')].map((g) => g.dataset.kernel)")
    assert sorted(yours) == ["paged_decode.split", "wgsl.copy"], yours
    # native and Chromium, in the committed decode records, drawn differently
    dash = page.evaluate("""Object.fromEntries([...document.querySelectorAll('#decode-chart polyline.series')]
        .filter((p) => p.dataset.source.startsWith('committed:'))
        .map((p) => [p.dataset.runtime, p.getAttribute('stroke-dasharray')]))""")
    assert dash["native"] != dash["chromium"], dash

    # the repository's own record files dropped on the page: decode's .jsonl, and the H100's
    for path in ("bench/history/decode/2026-11-24-h100-copy8.jsonl", "bench/history/2026-11-24-h100.jsonl"):
        text = (ROOT / path).read_text()
        page.evaluate(
            """([text, name]) => { const dt = new DataTransfer(); dt.items.add(new File([text], name));
            document.getElementById('bench-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true })); }""",
            [text, path.rsplit("/", 1)[1]],
        )
        n = len(text.splitlines())
        page.wait_for_function(f"document.getElementById('bench-imported').textContent.includes(': {n} (')")
    assert not page.is_visible("#import-error")
    assert page.locator("#decode-chart g[data-source^='file:']").count() > 0
    assert page.locator("#bench-chart g[data-source^='file:']").count() > 0
    kernels = page.locator("#bench-chart-legend li[data-kernel]").count()
    assert kernels <= 10, kernels  # the H100's 41 combinations, in a legend of a few kernels
    assert axe_violations(page) == []  # charts with files and this browser's runs, the decode table
    assert errors == []
    page.close()


def test_benchmark_form_is_checked_as_typed_and_its_run_is_charted_and_in_the_url(context, server):
    page, errors = _open(context, f"{server}/?heads=1&seq_q=8&seq_k=8&head_dim=4")
    assert wait_for_status(page) == "done"
    page.fill("#bench-rounds", "3")
    page.wait_for_selector("#bench-form-error", state="visible")  # as typed, before any Run
    assert "rounds must be an integer in 5..100, got 3" in page.inner_text("#bench-form-error")
    assert page.get_attribute("#bench-rounds", "aria-invalid") == "true"
    page.click("#bench-run")
    page.wait_for_function("document.getElementById('bench').dataset.status === 'error'")
    assert "Benchmark not started: rounds must be" in page.inner_text("#bench-error")
    assert not page.is_visible("#bench-progress")  # no bar left moving after "not started"
    assert page.evaluate("document.activeElement.id") == "bench-rounds"
    for field, value in {
        "impls": "flash_fwd.tiled",
        "B": 1,
        "H": 2,
        "D": 32,
        "seq_lens": "64,128",
        "rounds": 5,
        "warmup_s": 0.1,
    }.items():
        page.fill(f"#bench-{field}", str(value))
    page.click("#bench-run")
    page.wait_for_function("['done', 'error'].includes(document.getElementById('bench').dataset.status)", timeout=300_000)
    assert page.get_attribute("#bench", "data-status") == "done", page.inner_text("#bench")
    assert not page.is_visible("#bench-progress")
    for key, value in {
        "bench_op": "fwd",
        "bench_impls": "flash_fwd.tiled",
        "bench_seq_lens": "64%2C128",
        "bench_rounds": "5",
    }.items():
        assert f"{key}={value}" in page.url, page.url
    # this browser's records join the H100's in the chart of their op
    assert page.input_value("#bench-chart-view") == "fwd, causal"
    sources = set(page.locator("#bench-chart g").evaluate_all("(gs) => gs.map((g) => g.dataset.source)"))
    assert "yours" in sources and any(s.startswith("committed:") for s in sources), sources
    assert "this browser" in page.inner_text("#bench-chart-legend")
    # a reader reopening the URL gets the same settings
    again, _ = _open(context, page.url)
    assert wait_for_status(again) == "done"
    assert again.input_value("#bench-impls") == "flash_fwd.tiled" and again.input_value("#bench-seq_lens") == "64,128"
    assert again.get_attribute("#bench", "data-status") == "idle"  # settings, not a run
    again.close()
    assert errors == []
    page.close()


def test_webgpu_without_an_adapter_is_said_so(context, server):
    page, errors = _open(context, f"{server}/?heads=1&seq_q=8&seq_k=8&head_dim=4",
                         "navigator.gpu.requestAdapter = async () => null;")  # fmt: skip
    assert wait_for_status(page) == "done"
    message = page.inner_text("#message")
    assert message.startswith("WebGPU is present but no adapter was found") and "missing" not in message, message
    assert "no WebGPU here" in page.inner_text("#kernel-table")
    page.close()


def test_docs_are_served_with_no_network(context, server):
    page = context.new_page()
    off_machine, errors = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    def only_this_server(route):
        if route.request.url.startswith(server):
            route.continue_()
        else:
            off_machine.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(server + "/docs")
    page.wait_for_selector(".opblock", timeout=60_000)
    ops = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/run" in ops and "/api/kernels" in ops and "/api/records" in ops, ops
    assert off_machine == [] and errors == []  # nothing fetched elsewhere, nothing refused by the CSP
    page.close()


def test_selftest_is_linked_and_has_a_main(context, server):
    page = context.new_page()
    page.goto(server + "/selftest", wait_until="domcontentloaded")
    assert page.locator("main").count() == 1 and page.locator("a[href='/']").count() >= 1
    page.close()
    index = context.request.get(server + "/").text()
    assert re.search(r'<a href="/selftest">', index)
