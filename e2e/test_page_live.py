"""The page as a product, in headless Chromium (SwiftShader WebGPU): every registered kernel's live
check passes on every output (kernels needing a feature SwiftShader lacks say so and are never
counted as passing in the browser), the pictures render (screenshots checked not blank), a shared
URL reproduces its run, device loss is reported and recoverable, an uncaptured GPU error is shown,
long work shows progress and can be cancelled, and a `wgattn bench --json` file dropped on the
benchmark is charted. One page serves most tests (a page load costs Pyodide's start)."""

import json
import os

import pytest
from png import colours

from pagetools import ROOT, axe_violations, in_progress, wait_for_status
from wgattn import bench, interfaces, pictures, registry
from wgattn.interfaces.flash_fwd import INTERFACE as flash_fwd

REG = registry.load()
SHOTS = ROOT / "test-results" / "screenshots"
FLASH = (
    "kernel=flash_fwd.tiled&batch=3&heads=4&heads_kv=2&seq_q=40&seq_k=48&head_dim=32&causal=true"
    "&causal_align=bottom_right&window_left=12&window_right=-1&softcap=0&padding=true&seed=5"
)
OBJECT_KEYS = "constructor=1&toString=2&hasOwnProperty=3&__proto__=4&valueOf=5"


@pytest.fixture(scope="module")
def live(browser, server):
    """One page, loaded once with a shared-URL configuration; yields (page, console errors)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    # Keys named like Object's members are no config fields: the page once took them for some.
    page.goto(f"{server}/?{FLASH}&head=1&{OBJECT_KEYS}")
    assert wait_for_status(page) == "done", page.inner_text("main")
    yield page, errors
    context.close()


def _report(**record):
    path = os.environ.get("WGATTN_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def test_first_verified_result_and_its_pictures(live):
    page, errors = live
    results = page.evaluate("window.wgattn.results")
    first_ms = results["first_result_ms"]
    (run,) = results["runs"]
    assert run["kernel"] == "flash_fwd.tiled" and run["pass"] is True
    assert run["config"]["heads_kv"] == 2 and run["config"]["window_left"] == 12 and run["config"]["padding"] is True
    assert first_ms is not None and first_ms > 0
    _report(metric="time_to_first_verified_result_ms", value=first_ms, url=f"/?{FLASH}")
    print(f"time to first verified result: {first_ms:.0f} ms")
    # The pictures: head 1 as the URL asked; masked keys and the window band are in the heatmap
    pics = page.evaluate("window.wgattn.pictures")
    assert pics["heatmap"]["head"] == 1 and pics["heatmap"]["masked"] > 0
    assert pics["error"]["a"] == "browser" and pics["error"]["b"] == "native" and pics["error"]["over"] == 0
    # the error map's axes named, wide enough to read (a 64x1024 map was 22 px wide), identical
    # elements a colour of their own (white), not the smallest error's
    err = pics["error"]
    assert (err["rows_axis"], err["cols_axis"]) == ("query token", "dim")
    width = page.evaluate("parseFloat(getComputedStyle(document.getElementById('errmap')).width)")
    assert width >= min(160, 16 * err["cols"]), (width, err["cols"])
    assert "identical (|a − b| = 0)" in page.inner_text("#errmap-keys") and "query token" in page.inner_text("#errmap-y")
    SHOTS.mkdir(parents=True, exist_ok=True)
    heat = page.locator("#heatmap").screenshot(path=str(SHOTS / "heatmap-flash_fwd.png"))
    err = page.locator("#errmap").screenshot(path=str(SHOTS / "errmap-flash_fwd.png"))
    page.locator("#pictures").screenshot(path=str(SHOTS / "pictures-flash_fwd.png"))
    heat_colours, err_colours = colours(heat), colours(err)
    assert len(heat_colours) >= 20, "the heatmap screenshot is (nearly) blank"
    assert pictures.MASKED in heat_colours  # masked keys drawn grey
    assert len(err_colours) >= 3, "the error map screenshot is (nearly) blank"
    assert errors == []


def test_every_kernel_live_in_the_browser(live):
    """Every registered kernel on its default configuration: every pair of every output passes;
    a kernel needing a feature this adapter lacks says so and has no browser pair."""
    page, errors = live
    page.click("#run-all")
    page.wait_for_function("document.getElementById('verdict').dataset.scope === 'all'", timeout=300_000)
    features = page.evaluate("window.wgattn.results.adapter.features")
    # what the server's adapter cannot run (flash_fwd.smx: wgpu-py has no subgroup matrices)
    native_lacks = page.evaluate("window.wgattn.results.native_adapter.unavailable")
    runs = page.evaluate("window.wgattn.results.runs")[-len(REG.kernels) :]
    assert [r["kernel"] for r in runs] == list(REG.kernels)
    outputs = {k.interface: set(interfaces.of(k).OUTPUTS) for k in REG.kernels.values()}
    unchecked = []
    for r in runs:
        kernel = REG.kernel(r["kernel"])
        lacking = [f for f in kernel.requires if f not in features]
        browser = r["runtimes"]["browser"]
        got = {(p["a"], p["b"], p["output"]) for p in r["pairs"]}
        # the row shows the verdict Python gave the run (wgattn.page.verdict), nothing of its own
        shown = f"#all-table tr[data-kernel='{kernel.id}']"
        assert page.get_attribute(shown, "data-state") == r["verdict"]["state"]
        assert r["verdict"]["word"] in page.inner_text(shown)
        if kernel.id in native_lacks:
            assert r["runtimes"]["native"] == {"ok": False, "skipped": native_lacks[kernel.id]}
        cells = page.locator(f"{shown} td").all_inner_texts()
        if lacking:  # the browser's cell names what it lacks, nothing it has
            assert cells[2] == f"not run: lacks {', '.join(lacking)}", (kernel.id, cells)
        if kernel.id in native_lacks and lacking:  # run by the reference alone: nothing compared
            unchecked.append(kernel.id)
            assert got == set() and r["pass"] is False and "error" not in str(r["runtimes"])
            assert page.get_attribute(shown, "data-state") == "partial"
            assert "NOT CHECKED HERE" in page.inner_text(shown)
            assert cells[3] == "not compared", cells  # never "0.0x"
            continue
        assert cells[3].endswith("×") and float(cells[3][:-1]) < 1, cells
        want_runtimes = (
            [("pyodide", "native")] if lacking else [("browser", "pyodide"), ("browser", "native"), ("pyodide", "native")]
        )
        assert got == {(a, b, o) for a, b in want_runtimes for o in outputs[kernel.interface]}, r["kernel"]
        assert all(p["pass"] for p in r["pairs"]), (r["kernel"], r["pairs"])
        assert r["pass"] is True, r
        if lacking:
            assert browser["ok"] is False and "lacks" in browser["skipped"] and lacking[0] in browser["skipped"]
            row = page.locator(f".run[data-kernel='{kernel.id}'] tr[data-runtime=browser]").first.inner_text()
            assert "unavailable here" in row and lacking[0] in row
        else:
            assert browser["ok"] is True, (r["kernel"], browser)
        # one row of the every-kernel table: a kernel that ran only natively is never a plain PASS
        state = page.get_attribute(f"#all-table tr[data-kernel='{kernel.id}']", "data-state")
        assert state == ("partial" if lacking else "pass"), (kernel.id, state)
    partial = [k.id for k in REG.kernels.values() if any(f not in features for f in k.requires)]
    verdict = page.inner_text("#verdict")
    n = len(REG.kernels)
    assert f"{n - len(partial)} of {n} kernels pass in all three runtimes" in verdict, verdict
    assert page.get_attribute("#verdict", "data-state") == ("partial" if partial else "pass")
    assert all(k in verdict for k in partial) and (not partial or "not run in this browser" in verdict), verdict
    assert not unchecked or f"{len(unchecked)} not checked here" in verdict, verdict
    # the table fits its column, the worst error's included (details in the expanded rows)
    fits = page.evaluate("""() => { const t = document.getElementById('all-table').getBoundingClientRect();
        const c = document.getElementById('check').getBoundingClientRect(); return [t.right, c.right, t.width]; }""")
    assert fits[0] <= fits[1] + 0.5, fits
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#check").screenshot(path=str(SHOTS / "every-kernel.png"))
    # a row opens its run's details
    first = page.locator("#all-table button.expand").first
    first.click()
    assert first.get_attribute("aria-expanded") == "true"
    assert page.locator(f"#{first.get_attribute('aria-controls').replace('.', chr(92) + '.')} .run").is_visible()
    assert axe_violations(page) == []  # every kernel's table, a row expanded
    # Every run's pictures draw under Pyodide (numpy 1.17): the heatmap, and an error map per output
    for r in runs:
        if r["kernel"] in unchecked:  # one runtime's outputs: a heatmap, no error map (the page says so)
            continue
        pair = ["browser", "native"] if r["runtimes"]["browser"]["ok"] else ["pyodide", "native"]
        drawn = page.evaluate(
            """([run, outputs, a, b]) => {
            const p = window.wgattn.ctx.page;
            const heat = JSON.parse(p.heatmap(run, 0));
            return [heat.width * heat.height, ...outputs.map((o) => JSON.parse(p.error_map(run, o, a, b, 0)).over)];
        }""",
            [r["run"], sorted(outputs[REG.kernel(r["kernel"]).interface]), *pair],
        )
        assert drawn[0] > 0 and drawn[1:] == [0] * (len(drawn) - 1), (r["kernel"], drawn)
    assert errors == []


def test_url_keys_named_like_object_members_are_not_config_fields(live):
    """The fixture's URL carries constructor=, toString=, ...: the run went ahead (the fixture
    waited for "done") with none of them in its configuration."""
    page, _ = live
    config = page.evaluate("window.wgattn.results.runs[0].config")
    assert not {"constructor", "toString", "hasOwnProperty", "__proto__", "valueOf"} & set(config)
    assert config["heads_kv"] == 2 and config["seed"] == 5


def test_shared_url_reproduces_its_run(live, browser, server):
    page, _ = live
    first = page.evaluate("window.wgattn.results.runs[0]")
    link = page.locator(".run[data-kernel='flash_fwd.tiled'] a.share").last.get_attribute("href")
    other = browser.new_page()
    try:
        other.goto(server + link)
        assert wait_for_status(other) == "done"
        (again,) = other.evaluate("window.wgattn.results.runs")
    finally:
        other.close()
    assert again["kernel"] == first["kernel"] and again["config"] == first["config"]
    assert again["digest"] == first["digest"]  # the same inputs, drawn from the seed in the URL
    errs = lambda r: {(p["a"], p["b"], p["output"]): p["max_abs_err"] for p in r["pairs"]}  # noqa: E731
    assert errs(again) == errs(first)  # and the same results, to the bit


def test_form_runs_go_into_the_url_and_bad_ones_say_why(live):
    page, errors = live
    page.select_option("#kernel", "attn_probs_batched.subgroup")
    page.fill("#config-fields input[name=window]", "7")
    page.click("#run")
    page.wait_for_function("document.body.dataset.status === 'done'")
    assert "kernel=attn_probs_batched.subgroup" in page.url and "window=7" in page.url
    page.fill("#config-fields input[name=positions]", "999")
    page.click("#run")
    page.wait_for_function("document.body.dataset.status === 'error'")
    assert "positions must be an integer in 1..256, got 999" in page.inner_text("#run-error")
    assert page.get_attribute("#config-fields input[name=positions]", "aria-invalid") == "true"
    page.fill("#config-fields input[name=positions]", "8")
    page.click("#run")
    page.wait_for_function("document.body.dataset.status === 'done'")
    assert not page.is_visible("#run-error") and not page.is_visible("#message")
    assert page.get_attribute("#config-fields input[name=positions]", "aria-invalid") is None
    assert page.get_attribute("#verdict", "data-state") == "pass" and page.locator("#verdict-previous").count() == 0
    assert errors == []


def test_an_uncaptured_gpu_error_is_shown(live):
    page, _ = live
    # An invalid buffer made outside any error scope; the device reports it once it ticks.
    page.evaluate("""async () => {
        const device = window.wgattn.ctx.gpu.device;
        device.createBuffer({ label: 'e2e.invalid', size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE });
        await device.queue.onSubmittedWorkDone();
    }""")
    page.wait_for_function("window.wgattn.results.gpu_errors.length > 0")
    assert "WebGPU error (uncaptured)" in page.inner_text("#message")


def test_device_loss_is_reported_and_recoverable(live):
    page, _ = live
    page.evaluate("window.wgattn.ctx.gpu.device.destroy()")
    page.wait_for_selector("#gpu-restart", state="visible")
    assert "WebGPU device lost" in page.inner_text("#message")
    lost = page.evaluate("window.wgattn.run({kernel: 'sdpa_arena.seed', config: {heads: 1, seq_q: 8, seq_k: 8, head_dim: 4}})")
    assert "device lost" in lost["runtimes"]["browser"]["skipped"]
    page.click("#gpu-restart")
    page.wait_for_function("document.body.dataset.gpu === 'ready'")
    again = page.evaluate("window.wgattn.run({kernel: 'sdpa_arena.seed', config: {heads: 1, seq_q: 8, seq_k: 8, head_dim: 4}})")
    assert again["runtimes"]["browser"]["ok"] is True and again["pass"] is True


def test_grid_and_benchmark_show_progress_and_cancel(live):
    page, _ = live
    page.select_option("#grid-interface", "flash_fwd")
    page.fill("#grid-source", "")
    page.click("#grid-run")
    page.wait_for_function("window.wgattn.conformance && window.wgattn.conformance.cases.length >= 1", timeout=120_000)
    assert page.is_visible("#grid-progress") and page.is_visible("#grid-cancel")
    page.click("#grid-cancel")
    page.wait_for_function("document.getElementById('conformance').dataset.status === 'cancelled'", timeout=120_000)
    summary = page.evaluate("window.wgattn.conformance")
    total = len(flash_fwd.conformance_cases())
    assert summary["cancelled"] is True and 1 <= len(summary["cases"]) < total
    assert "cancelled after" in page.inner_text("#grid-status")
    assert in_progress(page) == {}  # the cancelled grid's job was released

    page.fill("#bench-form input[name=seq_lens]", "64,128,256,512")
    page.fill("#bench-form input[name=H]", "2")
    page.fill("#bench-form input[name=D]", "32")
    page.fill("#bench-form input[name=rounds]", "5")
    page.fill("#bench-form input[name=warmup_s]", "0.2")
    page.click("#bench-run")
    page.wait_for_function("window.wgattn.bench.records.length >= 1", timeout=120_000)
    page.click("#bench-cancel")
    page.wait_for_function("document.getElementById('bench').dataset.status === 'cancelled'", timeout=120_000)
    assert 1 <= len(page.evaluate("window.wgattn.bench.records")) < 8
    assert "cancelled after" in page.inner_text("#bench-status")
    assert in_progress(page) == {}  # the cancelled benchmark was released


def _drop(page, text, name):
    page.evaluate(
        """([text, name]) => {
        const dt = new DataTransfer();
        dt.items.add(new File([text], name, { type: 'application/json' }));
        document.getElementById('bench-drop').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true }));
    }""",
        [text, name],
    )


def _record(impl, mode, s, tflops, runtime="native", dtype="f32"):
    """A record as `wgattn bench --json` writes it (H100 figures, made up)."""
    ms = bench.flops("fwd", (1, 2, s, 32), True) / (tflops * 1e9)
    return {
        "op": "fwd", "impl": impl, "shape": [1, 2, s, 32], "causal": True, "dtype": dtype, "runtime": runtime,
        "mode": mode, "config": "BR=64 BC=32 WG=128" if mode else "", "adapter": "NVIDIA H100 80GB HBM3 (Vulkan)",
        "browser": "", "flags": [], "median_ms": ms, "tflops": tflops, "min_ms": ms, "q1_ms": ms, "q3_ms": ms,
        "max_ms": ms, "spread": 0.0, "wide": False, "rounds": 20, "reps": 1, "warmup_s": 2.1, "warmed": True,
        "timer": "gpu", "timer_resolution_ns": 32.0, "repeat": 0, "time": "2026-11-24T10:00:00+00:00", "commit": "abc",
    }  # fmt: skip


def test_a_dropped_bench_json_is_charted(live):
    """A dropped file's records join the chart beside the committed ones: trusted and checked rows
    of one kernel are two lines of one colour and one line style (the runtime's), filled and hollow
    points; dropping the same file again adds nothing; a file that does not read says why."""
    page, errors = live
    records = [
        _record("flash_fwd.blocked", m, s, t * s / 64) for m, t in (("trusted", 17.0), ("checked", 1.8)) for s in (64, 128, 256)
    ]
    records += [_record("torch", "", s, 28.0 * s / 64, runtime="torch") for s in (64, 128, 256)]
    text = json.dumps(records)
    _drop(page, text, "h100.json")
    page.wait_for_function("document.getElementById('bench-imported').textContent.includes('h100.json: 9')")
    lines = page.evaluate("""[...document.querySelectorAll('#bench-chart polyline.series')]
        .filter((p) => p.dataset.source.startsWith('file:')).map((p) =>
        [p.dataset.kernel, p.dataset.mode, p.getAttribute('stroke'), p.getAttribute('stroke-dasharray'),
         p.getAttribute('points').trim().split(/\\s+/).length])""")
    blocked = sorted(line for line in lines if line[0] == "flash_fwd.blocked")
    assert [(m, n) for _, m, _, _, n in blocked] == [("checked", 3), ("trusted", 3)]  # two lines, not one zig-zag
    assert blocked[0][2] == blocked[1][2] and blocked[0][3] == blocked[1][3]  # one colour, the runtime's line
    fills = page.evaluate(
        """(k) => [...document.querySelectorAll(`#bench-chart g[data-kernel="${k}"]`)]
        .filter((g) => g.dataset.source.startsWith('file:'))
        .map((g) => [g.dataset.mode, g.querySelector('.point').getAttribute('fill')])""",
        "flash_fwd.blocked",
    )
    assert dict(fills)["checked"] == "#fff" and dict(fills)["trusted"] != "#fff"  # hollow and filled points
    assert [line[0] for line in lines].count("torch (f32)") == 1
    legend = page.inner_text("#bench-chart-legend")
    assert "NVIDIA H100" in legend and "trusted:" in legend and "checked:" in legend and "PyTorch" in legend
    _drop(page, text, "h100.json")  # again: nothing new
    page.wait_for_function("document.getElementById('bench-imported').textContent.includes('already charted')")
    assert page.locator("#bench-chart polyline.series[data-source^='file:']").count() == len(lines)
    shot = page.locator("#bench-chart").screenshot(path=str(SHOTS / "bench-chart.png"))
    assert len(colours(shot)) >= 10
    _drop(page, '{"op": 1}', "bad.json")
    page.wait_for_selector("#import-error", state="visible")
    assert "Could not read bad.json: record 0: expected the fields" in page.inner_text("#import-error")
    assert errors == []


def test_a_kernel_s_wgsl_opens_in_the_editor(live):
    page, errors = live
    page.select_option("#kernel", "sdpa_arena.seed")
    assert page.get_attribute("#kernel-wgsl", "href") == "/shaders/sdpa_arena.seed.wgsl"
    page.click("#kernel-wgsl")
    page.wait_for_function("document.getElementById('grid-source').value.length > 0")
    assert page.input_value("#grid-source") == (ROOT / "shaders" / "sdpa_arena.seed.wgsl").read_text()
    assert page.input_value("#grid-interface") == "sdpa_arena"
    assert _in_view(page, "#grid-source")
    assert errors == []


def _in_view(page, selector):
    return page.evaluate(
        "(s) => { const r = document.querySelector(s).getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }",
        selector,
    )


def test_an_old_url_s_unknown_field_is_dropped_and_said(page, server):
    """A link whose field the kernel no longer has opens the page on the kernel's defaults for
    it, saying so beside the form; everything runs."""
    page.goto(f"{server}/?kernel=varlen_fwd.seed&window_left=3")
    assert wait_for_status(page) == "done"
    note = page.inner_text("#url-note")
    assert "window_left=3 could not be used (unknown config field(s) ['window_left'] for varlen_fwd" in note, note
    assert page.is_enabled("#run") and page.is_enabled("#grid-run")
    (run,) = page.evaluate("window.wgattn.results.runs")
    assert run["kernel"] == "varlen_fwd.seed" and run["pass"] is True
    assert "window_left" not in page.url  # the URL now says what ran
