// @ts-check
// Pictures of the latest live run: the attention probabilities of a chosen head (a heatmap where
// masks, windows and rows with no visible key show) and |error| between two runtimes for one
// output. Python (wgattn.pictures under Pyodide) computes every pixel; this module only blits
// them onto canvases. Publishes window.wgattn.pictures = {heatmap, error} (the pictures' metadata).

import { $, fmt } from "./dom.js";

/**
 * Pictures as wgattn.pictures draws them (Heatmap, ErrorPicture: RGBA pixels, base64, and what they show) are
 * declared in wire.d.ts, generated from the Python.
 * @typedef {{ heatmap: Omit<Heatmap, "rgba"> | null, error: Omit<ErrorPicture, "rgba"> | null }} PictureState
 * @typedef {{ head: string, output: string, pair: string }} Picks
 */

/** Put a picture {width, height, rgba (base64)} on a canvas, scaled up to about 480 px wide.
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
  const zoom = Math.max(1, Math.min(8, Math.floor(480 / Math.max(pic.width, pic.height / 2))));
  canvas.style.width = `${pic.width * zoom}px`;
  canvas.style.height = `${Math.max(pic.height * zoom, 8)}px`;
  const { rgba, ...meta } = pic;
  return meta;
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
    const shown = blit($("heatmap", HTMLCanvasElement), heat);
    state.heatmap = shown;
    $("heatmap-legend").textContent = `${result.kernel}, head ${h}: ${shown.layout}. ${shown.legend}` +
      (shown.empty_rows ? `; ${shown.empty_rows} rows see no key` : "");
    if (!pair.value) {
      state.error = null;
      $("errmap", HTMLCanvasElement).width = 0;
      $("errmap-legend").textContent = "No two runtimes produced outputs: nothing to compare.";
    } else {
      const [a, b] = pair.value.split("-");
      /** @type {ErrorPicture} */
      const err = JSON.parse(page.error_map(result.run, output.value, a, b, h));
      const drawn = blit($("errmap", HTMLCanvasElement), err);
      state.error = drawn;
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
