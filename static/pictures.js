// Pictures of the latest live run: the attention probabilities of a chosen head (a heatmap where
// masks, windows and rows with no visible key show) and |error| between two runtimes for one
// output. Python (wgattn.pictures under Pyodide) computes every pixel; this module only blits
// them onto canvases. Publishes window.wgattn.pictures = {heatmap, error} (the pictures' metadata).

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

/** Put a picture {width, height, rgba (base64)} on a canvas, scaled up to about 480 px wide. */
function blit(canvas, pic) {
  canvas.width = pic.width;
  canvas.height = pic.height;
  const raw = atob(pic.rgba);
  const px = new Uint8ClampedArray(raw.length);
  for (let i = 0; i < raw.length; i++) px[i] = raw.charCodeAt(i);
  canvas.getContext("2d").putImageData(new ImageData(px, pic.width, pic.height), 0, 0);
  const zoom = Math.max(1, Math.min(8, Math.floor(480 / Math.max(pic.width, pic.height / 2))));
  canvas.style.width = `${pic.width * zoom}px`;
  canvas.style.height = `${Math.max(pic.height * zoom, 8)}px`;
  const { rgba, ...meta } = pic;
  return meta;
}

function options(select, values, chosen) {
  select.innerHTML = values.map(([v, label]) => `<option value="${esc(v)}">${esc(label)}</option>`).join("");
  if (values.some(([v]) => String(v) === String(chosen))) select.value = String(chosen);
}

/** Draw the pictures of `result` (a finished live run); `params` may choose head, output and pair;
 * `onPick({head, output, pair})` hears the reader's choices (the page keeps them in the URL). */
export function drawPictures(page, result, params, onPick) {
  const section = $("pictures");
  section.hidden = false;
  const state = { heatmap: null, error: null };
  window.wgattn.pictures = state;
  const withOutputs = ["browser", "pyodide", "native"].filter((r) => result.runtimes[r] && result.runtimes[r].ok);
  const pairs = [];
  for (let i = 0; i < withOutputs.length; i++) {
    for (let j = i + 1; j < withOutputs.length; j++) pairs.push(`${withOutputs[i]}-${withOutputs[j]}`);
  }
  options($("pic-head"), [...Array(result.heads).keys()].map((h) => [h, `head ${h}`]), params.get("head") || 0);
  options($("pic-output"), result.outputs.map((o) => [o, o]), params.get("output") || result.outputs[0]);
  // browser vs native first: both are kernels, so their difference is what a kernel bug shows in
  options($("pic-pair"), pairs.map((p) => [p, p.replace("-", " ↔ ")]),
    params.get("pair") || (pairs.includes("browser-native") ? "browser-native" : pairs[0]));

  const draw = () => {
    const head = Number($("pic-head").value);
    state.heatmap = blit($("heatmap"), JSON.parse(page.heatmap(result.run, head)));
    $("heatmap-legend").textContent = `${result.kernel}, head ${head}: ${state.heatmap.layout}. ${state.heatmap.legend}` +
      (state.heatmap.empty_rows ? `; ${state.heatmap.empty_rows} rows see no key` : "");
    const pair = $("pic-pair").value;
    if (!pair) {
      state.error = null;
      $("errmap").width = 0;
      $("errmap-legend").textContent = "No two runtimes produced outputs: nothing to compare.";
    } else {
      const [a, b] = pair.split("-");
      const output = $("pic-output").value;
      state.error = blit($("errmap"), JSON.parse(page.error_map(result.run, output, a, b, head)));
      $("errmap-legend").textContent = `|${a} − ${b}| of ${output}, head ${head} (rows × last axis): max ` +
        `${state.error.max_abs_err.toExponential(2)}. ${state.error.legend}`;
    }
    section.dataset.status = "drawn";
  };
  const pick = () => {
    draw();
    onPick({ head: $("pic-head").value, output: $("pic-output").value, pair: $("pic-pair").value });
  };
  for (const id of ["pic-head", "pic-output", "pic-pair"]) $(id).onchange = pick;
  draw();
}
