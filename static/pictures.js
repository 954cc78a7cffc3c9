// @ts-check
// Pictures of the latest live run: the attention probabilities of a chosen head (a heatmap where
// masks, windows and rows with no visible key show) and |error| between two runtimes for one
// output. Python (wgattn.pictures under Pyodide) computes every pixel; this module only blits
// them onto canvases. Publishes window.wgattn.pictures = {heatmap, error} (the pictures' metadata).

import { $, el, fmt } from "./dom.js";

/**
 * Pictures as wgattn.pictures draws them (Heatmap, ErrorPicture: RGBA pixels, base64, and what they show) are
 * declared in wire.d.ts, generated from the Python.
 * @typedef {{ heatmap: Omit<Heatmap, "rgba"> | null, error: Omit<ErrorPicture, "rgba"> | null }} PictureState
 * @typedef {{ head: string, output: string, pair: string }} Picks
 */

/** Put a picture {width, height, rgba (base64)} on a canvas, its longer side scaled to about 360 px
 * (whole pixels up to 8x; the aspect kept).
 * @template {{ width: number, height: number, rgba: string }} P
 * @param {HTMLCanvasElement} canvas
 * @param {P} pic
 * @returns {Omit<P, "rgba">} the picture's metadata */
function blit(canvas, pic) {
  canvas.width = pic.width;
  canvas.height = pic.height;
  const raw = atob(pic.rgba);
  const px = new Uint8ClampedArray(raw.length);
  for (let i = 0; i < raw.length; i++) px[i] = raw.charCodeAt(i);
  const g = canvas.getContext("2d");
  if (!g) throw new Error("this browser gives the canvas no 2D context");
  g.putImageData(new ImageData(px, pic.width, pic.height), 0, 0);
  const side = Math.max(pic.width, pic.height);
  const zoom = side <= 360 ? Math.max(1, Math.min(8, Math.floor(360 / side))) : 360 / side;
  canvas.style.width = `${Math.max(pic.width * zoom, 8)}px`;
  canvas.style.aspectRatio = `${pic.width} / ${pic.height}`;
  canvas.style.height = "auto";
  const { rgba, ...meta } = pic;
  return meta;
}

/** The picture's colour bar (its colours bottom to top, its ticks) and the colours outside its scale,
 * and its axes: `rows` and `cols` name what runs down and across.
 * @param {string} id the canvas's id: heatmap or errmap
 * @param {{ rows: number, cols: number, colours: string[], ticks: Array<[number, string]>, keys: Array<[string, string]> }} pic
 * @param {string} rows
 * @param {string} cols */
function decorate(id, pic, rows, cols) {
  // Colours and positions go through the CSSOM: the page's CSP refuses style attributes.
  const ramp = el("div", { class: "ramp" });
  ramp.style.background = `linear-gradient(to top, ${pic.colours.join(", ")})`;
  const ticks = el("div", { class: "ticks" }, ...pic.ticks.map(([t, label]) => {
    const tick = el("span", {}, label);
    tick.style.bottom = `${(100 * t).toFixed(1)}%`;
    return tick;
  }));
  $(`${id}-bar`).replaceChildren(ramp, ticks);
  $(`${id}-y`).textContent = `${rows} 0 … ${pic.rows - 1} ↓`;
  $(`${id}-x`).replaceChildren(el("span", {}, "0"), el("span", {}, `${cols} →`), el("span", {}, String(pic.cols - 1)));
  const old = document.getElementById(`${id}-keys`);
  if (old) old.remove();
  $(`${id}-legend`).before(el("ul", { class: "swatches", id: `${id}-keys` }, ...pic.keys.map(([colour, what]) => {
    const swatch = el("i");
    swatch.style.background = colour;
    return el("li", {}, swatch, what);
  })));
}

/** Fill `select` with [value, label] options and choose `chosen` when it is one of them.
 * @param {HTMLSelectElement} select
 * @param {Array<[string | number, string]>} values
 * @param {string | number | undefined} chosen */
function options(select, values, chosen) {
  select.replaceChildren(...values.map(([v, label]) => new Option(label, String(v))));
  if (values.some(([v]) => String(v) === String(chosen))) select.value = String(chosen);
}

/** Draw the pictures of `result` (a finished live run); `params` may choose head, output and pair;
 * `onPick({head, output, pair})` hears the reader's choices (the page keeps them in the URL).
 * @param {WgattnPage} page
 * @param {LiveResult} result
 * @param {URLSearchParams} params
 * @param {(picks: Picks) => void} onPick */
export function drawPictures(page, result, params, onPick) {
  const section = $("pictures");
  section.hidden = false;
  /** @type {PictureState} */
  const state = { heatmap: null, error: null };
  window.wgattn.pictures = state;
  const withOutputs = /** @type {const} */ (["browser", "pyodide", "native"]).filter((r) => result.runtimes[r] && result.runtimes[r].ok);
  const pairs = [];
  for (let i = 0; i < withOutputs.length; i++) {
    for (let j = i + 1; j < withOutputs.length; j++) pairs.push(`${withOutputs[i]}-${withOutputs[j]}`);
  }
  const [head, output, pair] = ["pic-head", "pic-output", "pic-pair"].map((id) => $(id, HTMLSelectElement));
  options(head, [...Array(result.heads).keys()].map((h) => [h, `head ${h}`]), params.get("head") || 0);
  options(output, result.outputs.map((o) => [o, o]), params.get("output") || result.outputs[0]);
  // browser vs native first: both are kernels, so their difference is what a kernel bug shows in
  options(pair, pairs.map((p) => [p, p.replace("-", " ↔ ")]),
    params.get("pair") || (pairs.includes("browser-native") ? "browser-native" : pairs[0]));

  const draw = () => {
    const h = Number(head.value);
    /** @type {Heatmap} */
    const heat = JSON.parse(page.heatmap(result.run, h));
    const canvas = $("heatmap", HTMLCanvasElement);
    const shown = blit(canvas, heat);
    state.heatmap = shown;
    decorate("heatmap", shown, "query row", "key");
    $("heatmap-legend").textContent = `${result.kernel}, head ${h}: ${shown.layout}. ${shown.legend}` +
      (shown.empty_rows ? `; ${shown.empty_rows} rows see no key` : "");
    canvas.setAttribute("aria-label", `Attention probabilities of ${result.kernel}, head ${h}: ${shown.rows} query rows ` +
      `by ${shown.cols} keys; ${shown.masked} masked, ${shown.empty_rows} rows with no visible key; largest probability ` +
      `${shown.max.toPrecision(3)}, colour scale up to ${shown.top.toPrecision(3)}.`);
    if (!pair.value) {
      state.error = null;
      $("errmap", HTMLCanvasElement).width = 0;
      $("errmap", HTMLCanvasElement).setAttribute("aria-label", "No error map: fewer than two runtimes produced outputs.");
      $("errmap-legend").textContent = "No two runtimes produced outputs: nothing to compare.";
    } else {
      const [a, b] = pair.value.split("-");
      /** @type {ErrorPicture} */
      const err = JSON.parse(page.error_map(result.run, output.value, a, b, h));
      const canvas = $("errmap", HTMLCanvasElement);
      const drawn = blit(canvas, err);
      state.error = drawn;
      decorate("errmap", drawn, "row", "last axis");
      canvas.setAttribute("aria-label", `|${a} − ${b}| of ${output.value}, head ${h}: ${drawn.rows} rows by ${drawn.cols} ` +
        `columns; largest ${fmt(drawn.max_abs_err)} against an allowance of ${fmt(drawn.allowance)}; ${drawn.over} elements over it.`);
      $("errmap-legend").textContent = `|${a} − ${b}| of ${output.value}, head ${h} (rows × last axis): max ` +
        `${fmt(drawn.max_abs_err)}. ${drawn.legend}`;  // "inf" where a side is NaN
    }
    section.dataset.status = "drawn";
  };
  const pick = () => {
    draw();
    onPick({ head: head.value, output: output.value, pair: pair.value });
  };
  for (const select of [head, output, pair]) select.onchange = pick;
  draw();
}
