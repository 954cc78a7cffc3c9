"""The page's modules in the browser without Pyodide: a view is driven with a stand-in for
wgattn.page, so that what Python may send (a non-finite float as "inf", wgattn.wire.jsonable) is
shown as text rather than stopping the view."""

PICTURES = """
<section id="pictures">
  <select id="pic-head"></select><select id="pic-output"></select><select id="pic-pair"></select>
  <span id="heatmap-y"></span><div><canvas id="heatmap"></canvas></div><div id="heatmap-bar"></div><span id="heatmap-x"></span>
  <p id="heatmap-legend"></p>
  <span id="errmap-y"></span><div><canvas id="errmap"></canvas></div><div id="errmap-bar"></div><span id="errmap-x"></span>
  <p id="errmap-legend"></p>
</section>"""


def test_error_map_of_a_nan_output_says_inf(page, server):
    # A runtime that wrote NaN is infinitely wrong: Python's JSON says "inf" (it threw a TypeError here).
    page.goto(server + "/api/kernels")  # any page of the server: the modules load from its origin
    legend = page.evaluate(
        """async (html) => {
        document.body.insertAdjacentHTML("beforeend", html);
        window.wgattn = {};
        const { drawPictures } = await import("/static/pictures.js");
        const pic = { width: 1, height: 1, rgba: btoa("\\x00\\x00\\x00\\xff"), legend: "colour: ...", rows: 1, cols: 1,
            colours: ["#000000", "#ffffff"], ticks: [[0, "0"], [1, "1"]], keys: [], rows_axis: "query", cols_axis: "dim" };
        const page = {
            heatmap: () => JSON.stringify({ ...pic, head: 0, heads: [0], groups: [], layout: "bhsd", masked: 0, empty_rows: 0,
                max: 1, top: 1 }),
            error_map: (run, output, a, b, head) =>
                JSON.stringify({ ...pic, a, b, output, head, max_abs_err: "inf", allowance: 1e-6, over: 1, identical: 0 }),
        };
        const ok = { ok: true };
        const result = { run: 1, kernel: "k.x", heads: 1, outputs: ["out"], runtimes: { browser: ok, pyodide: ok, native: ok } };
        drawPictures(page, result, new URLSearchParams(), () => {});
        return document.getElementById("errmap-legend").textContent;
    }""",
        PICTURES,
    )
    assert legend.startswith("|browser − native| of out, head 0 (query × dim): max inf."), legend
