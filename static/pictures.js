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

// A picture's longer side is drawn about this many CSS pixels long; its shorter side at least
// MIN_SIDE (or 16 px a row or column where it has fewer): a 64 x 1024 map is not 22 px wide, and a
// decode picture's few rows each show.
const LONG_SIDE = 360;
const MIN_SIDE = 160;
const MIN_CELL = 16;

/** How many CSS pixels a picture's side of `n` values (drawn as `px` pixels) takes, given the zoom
 * of its longer side.
 * @param {number} n @param {number} px @param {number} zoom */
function sideLength(n, px, zoom) {
  return Math.round(Math.max(px * zoom, Math.min(MIN_SIDE, n * MIN_CELL), 8));
}

/** Put a picture {width, height, rgba (base64)} on a canvas: its longer side about LONG_SIDE px
 * (whole pixels up to 8x), its shorter one at least MIN_SIDE (the aspect given up for it: the axes
 * say what each side is).
 * @template {{ width: number, height: number, rgba: string, rows: number, cols: number }} P
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
  const zoom = side <= LONG_SIDE ? Math.max(1, Math.min(8, Math.floor(LONG_SIDE / side))) : LONG_SIDE / side;
  canvas.style.width = `${sideLength(pic.cols, pic.width, zoom)}px`;
  canvas.style.height = `${sideLength(pic.rows, pic.height, zoom)}px`;
  const { rgba, ...meta } = pic;
  return meta;
}

/** Mark groups of rows (every head's rows of a decode picture) over the canvas: a line where
 * each starts and its name.
 * @param {HTMLCanvasElement} canvas
 * @param {Array<[string, number, number]>} groups (label, first row, end row)
 * @param {number} rows */
function markGroups(canvas, groups, rows) {
  const box = canvas.parentElement;
  if (!box) return;
  box.querySelectorAll(".group").forEach((g) => g.remove());
  const height = parseFloat(canvas.style.height) || canvas.clientHeight;
  let lastTop = -Infinity;
  for (const [label, start] of groups) {
    const top = start / rows * height;
    const mark = el("span", { class: "group" }, top - lastTop >= 12 ? label : "");
    if (top - lastTop >= 12) lastTop = top;
    mark.style.top = `${top}px`;
    box.append(mark);
  }
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
  $(`${id}-x`).replaceChildren(el("span", {}, "0"), el("span", {}, cols ? `${cols} →` : "one column"), el("span", {}, String(pic.cols - 1)));
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
  /** @type {PictureState} */
  const state = { heatmap: null, error: null };
  window.wgattn.pictures = state;
  const withOutputs = /** @type {const} */ (["browser", "pyodide", "native"]).filter((r) => result.runtimes[r] && result.runtimes[r].ok);
  const pairs = [];
  for (let i = 0; i < withOutputs.length; i++) {
    for (let j = i + 1; j < withOutputs.length; j++) pairs.push(`${withOutputs[i]}-${withOutputs[j]}`);
  }
  const [head, output, pair] = ["pic-head", "pic-output", "pic-pair"].map((id) => $(id, HTMLSelectElement));
  for (const select of [head, output, pair]) select.disabled = false;
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
    decorate("heatmap", shown, shown.rows_axis, shown.cols_axis);
    markGroups(canvas, shown.groups, shown.rows);
    const which = shown.heads.length > 1 ? `every head (${shown.heads.length}), its rows grouped by head` : `head ${h}`;
    $("heatmap-legend").textContent = `${result.kernel}, ${which}: ${shown.layout}. ${shown.legend}` +
      (shown.empty_rows ? `; ${shown.empty_rows} rows see no key` : "");
    canvas.setAttribute("aria-label", `Attention probabilities of ${result.kernel}, ${which}: ${shown.rows} rows ` +
      `(${shown.rows_axis}) by ${shown.cols} columns (${shown.cols_axis}); ${shown.masked} masked, ${shown.empty_rows} rows ` +
      `with no visible key; largest probability ${shown.max.toPrecision(3)}, colour scale up to ${shown.top.toPrecision(3)}.`);
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
      decorate("errmap", drawn, drawn.rows_axis, drawn.cols_axis);
      canvas.setAttribute("aria-label", `|${a} − ${b}| of ${output.value}, head ${h}: ${drawn.rows} rows (${drawn.rows_axis}) by ` +
        `${drawn.cols} columns${drawn.cols_axis ? ` (${drawn.cols_axis})` : ""}; largest ${fmt(drawn.max_abs_err)} against an ` +
        `allowance of ${fmt(drawn.allowance)}; ${drawn.identical} identical, ${drawn.over} over it.`);
      $("errmap-legend").textContent = `|${a} − ${b}| of ${output.value}, head ${h} (${drawn.rows_axis}` +
        `${drawn.cols_axis ? ` × ${drawn.cols_axis}` : ""}): max ${fmt(drawn.max_abs_err)}. ${drawn.legend}`;  // "inf" where a side is NaN
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
