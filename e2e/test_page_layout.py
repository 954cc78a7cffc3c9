"""The page a person meets, at a desktop's 1440x900 and a phone's 390x844: once the first run is
done its verdict is in the first viewport; the phone page is no wider than the phone; every
picture has a text alternative; axe-core finds no accessibility violation; a bad configuration's
message is visible next to Run without scrolling. Screenshots of both sizes go to
test-results/screenshots/ (page-1440.png, page-390.png, and the bad configuration's)."""

import pytest

from pagetools import ROOT, wait_for_status

SHOTS = ROOT / "test-results" / "screenshots"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SIZES = [(1440, 900), (390, 844)]


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def sized(request, browser, server):
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(server + "/")
    assert wait_for_status(page) == "done", page.inner_text("main")
    yield page, width, height
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


def test_verdict_first_and_nothing_wider_than_the_screen(sized):
    page, width, _ = sized
    SHOTS.mkdir(parents=True, exist_ok=True)
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


def test_every_picture_says_what_it_shows(sized):
    page, _, _ = sized
    unlabelled = page.evaluate("""[...document.querySelectorAll('canvas, svg, img')]
        .filter((e) => e.getClientRects().length)
        .filter((e) => !(e.getAttribute('aria-label') || e.getAttribute('alt') || e.querySelector?.('title')))
        .map((e) => e.id || e.tagName)""")
    assert unlabelled == []
    label = page.get_attribute("#heatmap", "aria-label")
    pics = page.evaluate("window.wgattn.pictures")
    assert f"{pics['heatmap']['rows']} query rows by {pics['heatmap']['cols']} keys" in label, label
    assert page.locator("#heatmap-bar .ticks span").count() >= 3  # a colour bar with a scale


def test_axe_finds_no_violation(sized):
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed ({AXE}): run make setup")
    page, _, _ = sized
    page.evaluate(AXE.read_text())  # through DevTools: the page's CSP forbids an inline script, rightly
    violations = page.evaluate("""async () => (await axe.run(document)).violations
        .map((v) => `${v.id}: ${v.help} (${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')})`)""")
    assert violations == []


def test_a_bad_configuration_is_explained_beside_run(sized):
    page, width, _ = sized
    details = page.locator("#config-details")
    if not details.evaluate("d => d.open"):
        page.click("#config-details summary")
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
