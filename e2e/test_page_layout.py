"""The page a person meets, at a desktop's 1440x900 and a phone's 390x844, one page per size:
usable before its Python is loaded (the kernel list, the form, the table of kernels and the
committed GPU results charted while Pyodide's first file is held back), Python's download told in
MB where the verdict will be, no layout shift (CLS < 0.1, from PerformanceObserver 'layout-shift'),
the verdict in the first viewport, nothing wider than the screen, every picture labelled, the
charts legible at the size they are shown, a run in progress said where the verdict is (its
kernel, step and seconds) with the previous result stale and never green, a bad configuration
explained beside Run with its field focused; axe-core finds no violation while loading, done,
running, or stale. Screenshots go to test-results/screenshots/."""

import re
import time

import pytest

from pagetools import ROOT, axe_violations, wait_for_status
from wgattn import registry

SHOTS = ROOT / "test-results" / "screenshots"
SIZES = [(1440, 900), (390, 844)]
REG = registry.load()
# Every layout shift the page makes without input, summed (CLS is the largest 5 s window of them:
# the sum bounds it from above).
CLS = """window.__shifts = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) if (!e.hadRecentInput) window.__shifts.push(
  { value: e.value, at: e.startTime, what: (e.sources || []).map((s) => s.node ? (s.node.id || s.node.nodeName) : '?') }); })
  .observe({ type: 'layout-shift', buffered: true });"""
GREEN = "rgb(26, 127, 55)"  # the page's pass colour


class Held:
    """Requests held back by a route until released: the page is seen in a state it passes
    through (before Python, during a run) whatever this machine's speed."""

    def __init__(self, page, pattern):
        self.page, self.pattern, self.routes = page, pattern, []
        page.route(pattern, lambda route: self.routes.append(route))

    def release(self):
        for route in self.routes:
            route.continue_()
        self.page.unroute(self.pattern)


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(request, browser, server):
    """The page at one size, loaded once: `early` is what it showed with Pyodide held back."""
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.add_init_script(CLS)
    pyodide = Held(page, "**/pyodide/*/pyodide.js")
    page.goto(server + "/", wait_until="commit")
    page.wait_for_function("document.getElementById('kernel').options.length > 1 && document.querySelector('#bench-chart svg')")
    # The catalogue and the chart can come before the page asks for Pyodide at all (they race on a
    # loaded machine): wait, up to a minute, until the held route has caught that request.
    deadline = time.monotonic() + 60
    while not pyodide.routes and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    early = page.evaluate("""() => ({ python: window.wgattn.ctx.page !== null, status: document.body.dataset.status,
        options: document.getElementById('kernel').options.length,
        rows: document.querySelectorAll('#kernel-table tr[data-kernel]').length,
        fields: document.querySelectorAll('#config-fields input, #config-fields select').length,
        verdict: document.getElementById('verdict').dataset.state, strip: document.getElementById('verdict').innerText,
        source: document.getElementById('bench-chart-source').textContent, held: 0 })""")
    early["held"] = len(pyodide.routes)
    early["axe"] = axe_violations(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"page-{width}-before-python.png"))
    pyodide.release()
    page.wait_for_function(r"/[1-9][0-9]*\.[0-9] of [0-9]+\.[0-9] MB/.test(document.getElementById('verdict').innerText)")
    strip = page.inner_text("#verdict")
    assert wait_for_status(page) == "done", page.inner_text("main")
    shifts = page.evaluate("window.__shifts")
    yield page, width, height, early, strip, shifts, errors
    context.close()


def _in_view(page, selector):
    """The element's box, and whether all of it lies in the viewport as it is scrolled now."""
    return page.evaluate(
        """(sel) => {
        const r = document.querySelector(sel).getBoundingClientRect();
        return { top: r.top, bottom: r.bottom, inside: r.height > 0 && r.top >= 0 && r.bottom <= innerHeight
          && r.left >= 0 && r.right <= innerWidth };
    }""",
        selector,
    )


def test_usable_before_python(sized):
    """With Pyodide's first file held back: the kernel list, the form and the kernels' table from
    the server's catalogue, the committed H100 results charted, the strip saying what loads."""
    page, width, _, early, _, _, _ = sized
    assert early["held"] == 1 and early["python"] is False and early["status"] == "loading"
    assert early["options"] == len(REG.kernels) and early["rows"] == len(REG.kernels)
    assert early["fields"] > 0  # the default kernel's form
    assert early["verdict"] == "loading" and early["strip"].startswith("Loading"), early["strip"]
    assert "NVIDIA H100" in early["source"], early["source"]
    assert early["axe"] == []  # axe-core, while loading


def test_python_s_download_is_told_in_mb(sized):
    _, _, _, _, strip, _, _ = sized
    loaded, total = (float(x) for x in re.search(r"([0-9.]+) of ([0-9.]+) MB", strip).groups())
    assert 0 < loaded <= total < 16, strip  # compressed: 27 MB of files arrive as 13


def test_no_layout_shift(sized):
    _, width, _, _, _, shifts, _ = sized
    cls = sum(s["value"] for s in shifts)
    print(f"{width}px: CLS {cls:.4f} ({len(shifts)} shifts)")
    assert cls < 0.1, shifts


def test_verdict_first_and_nothing_wider_than_the_screen(sized):
    page, width, _, _, _, _, errors = sized
    page.screenshot(path=str(SHOTS / f"page-{width}.png"))
    page.screenshot(path=str(SHOTS / f"page-{width}-full.png"), full_page=True)
    assert page.evaluate("scrollY") == 0  # the first viewport, as it loads
    box = _in_view(page, "#verdict")
    assert box["inside"], box
    text = page.inner_text("#verdict")
    assert page.get_attribute("#verdict", "data-state") == "pass", text
    assert text.startswith("PASS") and "agree on" in text and "browser's WebGPU" in text and "native wgpu-py" in text, text
    # the phone page is no wider than the phone: tables scroll inside their own box
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert errors == []


def test_every_picture_says_what_it_shows(sized):
    page, _, _, _, _, _, _ = sized
    unlabelled = page.evaluate("""[...document.querySelectorAll('canvas, svg[role=img], img')]
        .filter((e) => e.getClientRects().length)
        .filter((e) => !(e.getAttribute('aria-label') || e.getAttribute('alt') || e.querySelector?.('title')))
        .map((e) => e.id || e.tagName)""")
    assert unlabelled == []
    label = page.get_attribute("#heatmap", "aria-label")
    pics = page.evaluate("window.wgattn.pictures")
    assert f"{pics['heatmap']['rows']} rows (query (batches stacked)) by {pics['heatmap']['cols']} columns (key)" in label, label
    assert page.locator("#heatmap-bar .ticks span").count() >= 3  # a colour bar with a scale


def test_axe_finds_no_violation(sized):
    page, _, _, _, _, _, _ = sized
    assert axe_violations(page) == []


def test_committed_results_are_legible_at_this_size(sized):
    """The H100's records, charted at the chart's own width (no scaled-down text), their legend
    in groups (a few kernels, a few runtimes) in the page's text size; native and Chromium lines
    drawn differently."""
    page, width, _, _, _, _, _ = sized
    chart = page.evaluate("""() => { const svg = document.querySelector('#bench-chart svg');
        const tick = svg.querySelector('.tick');
        return { drawn: svg.clientWidth, width: svg.width.baseVal.value,
          tick: parseFloat(getComputedStyle(tick).fontSize),
          legend: Math.min(...[...document.querySelectorAll('#bench-chart-legend li')]
            .map((li) => parseFloat(getComputedStyle(li).fontSize))),
          groups: [...document.querySelectorAll('#bench-chart-legend .legend-group')].map((g) => g.querySelectorAll('li').length),
          dash: Object.fromEntries([...document.querySelectorAll('#bench-chart polyline.series')].map((p) => [p.dataset.runtime,
            p.getAttribute('stroke-dasharray')])) }; }""")
    assert abs(chart["drawn"] - chart["width"]) < 1 and chart["drawn"] <= width  # not scaled
    assert chart["tick"] >= 11 and chart["legend"] >= 12, chart
    kernels, runtimes, sources, modes = chart["groups"]
    assert kernels <= 10 and runtimes == 3 and sources == 1 and modes == 2, chart["groups"]
    assert {"native", "chromium", "torch"} <= set(chart["dash"]) and len(set(chart["dash"].values())) == 3, chart["dash"]
    legend = page.inner_text("#bench-chart-legend")
    assert "native wgpu-py" in legend and "Chromium" in legend and "PyTorch" in legend
    page.locator("#measured").screenshot(path=str(SHOTS / f"measured-{width}.png"))


def test_a_run_in_progress_says_so_and_the_last_result_is_stale(sized):
    """While the server's part of a run is held back: the verdict says running, with the kernel,
    its step and a clock that moves; the previous PASS stays below it, marked stale, not green."""
    page, width, _, _, _, _, _ = sized
    native = Held(page, "**/api/run")
    page.select_option("#kernel", "varlen_fwd.seed")
    page.click("#run")
    page.wait_for_function("document.getElementById('verdict').innerText.includes('step 2 of 3')")
    line = page.inner_text("#verdict-line")
    assert page.get_attribute("#verdict", "data-state") == "running" and line.startswith("Running") and "varlen_fwd.seed" in line
    clock = page.inner_text("#verdict-clock")
    page.wait_for_function(f"document.getElementById('verdict-clock').textContent !== {clock!r}")  # it moves
    previous = page.locator("#verdict-previous")
    said = previous.inner_text()
    assert "stale" in previous.get_attribute("class") and "PASS" in said and "sdpa_arena.seed" in said, said
    colours = page.evaluate("""[...document.querySelectorAll('#verdict-previous, #verdict-previous *, #results .run *')]
        .map((e) => getComputedStyle(e).color)""")
    assert GREEN not in colours  # the previous result is never green while it no longer answers the form
    assert "stale" in page.get_attribute("#results", "class") and "stale" in page.get_attribute("#pictures", "class")
    page.screenshot(path=str(SHOTS / f"page-{width}-running.png"))
    assert axe_violations(page) == []  # running, a stale result shown
    native.release()
    page.wait_for_function("document.getElementById('verdict').dataset.state === 'pass'")
    assert "varlen_fwd.seed" in page.inner_text("#verdict-line") and page.locator("#verdict-previous").count() == 0
    assert "stale" not in (page.get_attribute("#results", "class") or "")


def test_a_bad_configuration_is_explained_beside_run(sized):
    page, width, _, _, _, _, _ = sized
    page.select_option("#kernel", "sdpa_arena.seed")
    if page.get_attribute("#config-toggle", "aria-expanded") != "true":
        page.click("#config-toggle")
    page.fill("input[name=seq_q]", "70000")
    page.click("#run")
    page.wait_for_function("document.body.dataset.status === 'error'")
    page.screenshot(path=str(SHOTS / f"page-{width}-bad-config.png"))
    error = _in_view(page, "#run-error")
    run = _in_view(page, "#run")
    assert error["inside"] and run["inside"], (error, run)
    assert 0 <= error["top"] - run["bottom"] < 120  # right under the Run button
    assert "seq_q must be an integer in 1..65536" in page.inner_text("#run-error")
    assert page.get_attribute("input[name=seq_q]", "aria-invalid") == "true"
    assert page.evaluate("document.activeElement.name") == "seq_q"  # the field it names, focused
    # where the verdict is: not run, and the last result below it, stale
    assert page.get_attribute("#verdict", "data-state") == "notrun"
    assert "stale" in page.get_attribute("#verdict-previous", "class")
    assert axe_violations(page) == []  # stale
