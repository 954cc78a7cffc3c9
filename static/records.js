// @ts-check
// What the project measured, charted as soon as the page opens: the committed records
// (GET /api/records: bench/history/, read on the server by the checker the page's Python uses for a
// dropped file), the files a visitor drops (checked by that Python, wgattn.page.bench_import) and
// the visitor's own benchmark runs (bench.js adds them). Two charts: attention (TFLOP/s against
// sequence length, one chart per op and shape) and decode (GB/s by case). chart.js draws them, a
// colour per kernel, a line per runtime, a marker per source of records, filled or hollow by mode.
// Publishes window.wgattn.records.

import { $, errorText, pyError } from "./dom.js";
import { pythonReady } from "./context.js";
import { drawChart, num, stylesOf } from "./chart.js";

/**
 * A source of records: a committed history file, a dropped file, or this browser's runs.
 * @typedef {{ id: string, kind: "committed" | "file" | "yours", label: string, path: string, date: string,
 *   bench: BenchRecord[], bandwidth: BandwidthRecord[] }} Origin
 * @typedef {{ status: "loading" | "done" | "error", error: string | null, origins: Origin[],
 *   file: { bench: string, bandwidth: string }, view: string, shown: { bench: import("./chart.js").Series[],
 *   bandwidth: import("./chart.js").Series[] } }} RecordsState
 */

/** @type {RecordsState} */
export const recordsState = { status: "loading", error: null, origins: [], file: { bench: "", bandwidth: "" }, view: "",
  shown: { bench: [], bandwidth: [] } };
const yours = /** @type {Origin} */ ({ id: "yours", kind: "yours", label: "this browser", path: "", date: "", bench: [], bandwidth: [] });

/** A file's attention records (Python's Imported says dicts of bench.Record's fields).
 * @param {ImportedRecords} r */
const benchOf = (r) => /** @type {BenchRecord[]} */ (/** @type {unknown} */ (r.bench));

const RUNTIME_WORDS = { native: "native wgpu-py (Vulkan)", chromium: "Chromium's WebGPU", torch: "PyTorch (CUDA)", numpy: "NumPy" };
const MODE_WORDS = { trusted: "trusted: no runtime bounds checks (in Chromium: robustness off)",
  checked: "checked: runtime bounds checks on (Chromium's default robustness)" };

/** The machine a source's records were measured on, in words: its native adapter's name (the
 * browser's is vaguer: "nvidia"), else the first adapter named.
 * @param {Array<BenchRecord | BandwidthRecord>} recs */
function machineOf(recs) {
  const names = recs.map((r) => r.adapter).filter((a) => !a.includes("browser WebGPU"));
  const name = names.sort((a, b) => b.length - a.length)[0] || (recs[0] ? recs[0].adapter : "");
  return name.replace(/ \((Vulkan|Metal|D3D12)\)$/, "");
}

/** The runtimes of records, in words ("native wgpu-py, Chromium 156, PyTorch").
 * @param {Array<BenchRecord | BandwidthRecord>} recs */
function runtimesOf(recs) {
  const seen = new Map();
  for (const r of recs) {
    if (seen.has(r.runtime)) continue;
    seen.set(r.runtime, r.runtime === "chromium" && r.browser ? `${r.browser.replace(/^(\S+ \d+)\..*/, "$1")}'s WebGPU`
      : /** @type {Record<string, string>} */ (RUNTIME_WORDS)[r.runtime] || r.runtime);
  }
  return [...seen.values()].join(", ");
}

/** The committed source of `kind` charted first: the one with the most runtimes, then the most cases
 * (shapes, decode's cases: a file of one case draws points, not lines), then the newest, then the one
 * with the most records.
 * @param {"bench" | "bandwidth"} kind */
function firstFile(kind) {
  const files = recordsState.origins.filter((o) => o.kind === "committed" && o[kind].length);
  const caseOf = (/** @type {BenchRecord | BandwidthRecord} */ r) => ("case" in r ? String(r.case) : JSON.stringify(r.shape));
  const score = (/** @type {Origin} */ o) => [
    new Set(o[kind].map((r) => r.runtime)).size,
    new Set(o[kind].map(caseOf)).size,
    o.date,
    o[kind].length,
  ];
  files.sort((a, b) => {
    const [x, y] = [score(a), score(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] > y[i] ? -1 : 1;
    return 0;
  });
  return files.length ? files[0].id : "";
}

/** Fetch the committed records and chart them. */
export async function loadRecords() {
  try {
    const res = await fetch("/api/records");
    const body = await res.json();
    if (!res.ok) throw new Error(`GET /api/records answered HTTP ${res.status}: ${body.detail || ""}`);
    recordsState.origins = /** @type {RecordSource[]} */ (body.sources).map((s) => ({ id: `committed:${s.path}`, kind: "committed",
      label: machineOf([...benchOf(s.records), ...s.records.bandwidth]), path: s.path, date: s.date,
      bench: benchOf(s.records), bandwidth: s.records.bandwidth }));
    recordsState.file = { bench: firstFile("bench"), bandwidth: firstFile("bandwidth") };
    recordsState.status = "done";
    const n = recordsState.origins.length;
    $("records-status").textContent = `${n} committed record file${n === 1 ? "" : "s"}; choose one under each chart.`;
  } catch (e) {
    recordsState.status = "error";
    recordsState.error = errorText(e);
    $("records-status").textContent = `The committed records could not be loaded: ${recordsState.error}`;
  }
  window.wgattn.records = recordsState;
  $("measured").dataset.status = recordsState.status;
  fillFileChoices();
  redraw();
  const boxes = [$("bench-chart"), $("decode-chart")];
  let width = boxes[0].clientWidth;
  new ResizeObserver(() => {  // drawn at its width: text keeps its size on a phone
    if (boxes[0].clientWidth !== width) {
      width = boxes[0].clientWidth;
      redraw();
    }
  }).observe(boxes[0]);
}

/** The "records" choices of both charts: the committed files with records of its kind. */
function fillFileChoices() {
  for (const [kind, id] of /** @type {const} */ ([["bench", "bench-chart-file"], ["bandwidth", "decode-chart-file"]])) {
    const select = $(id, HTMLSelectElement);
    const files = recordsState.origins.filter((o) => o.kind === "committed" && o[kind].length);
    select.replaceChildren(...files.map((o) => new Option(`${o.label}: ${o.path.replace(/^bench\/history\//, "")}`, o.id)));
    select.value = recordsState.file[kind];
    select.onchange = () => {
      recordsState.file[kind] = select.value;
      recordsState.view = "";
      redraw();
    };
  }
}

/** The sources charted beside each other: the chosen committed file, the dropped files, this browser's runs.
 * @param {"bench" | "bandwidth"} kind */
function charted(kind) {
  return [...recordsState.origins.filter((o) => o.id === recordsState.file[kind] || o.kind === "file"), yours]
    .filter((o) => o[kind].length);
}

/** An attention record's view: its op, causal or not (its shapes are the chart's x axis).
 * @param {BenchRecord} r */
const viewOf = (r) => `${r.op}${r.causal ? ", causal" : ""}`;

/** PyTorch's SDPA with one backend forced: folded in a chart at first (the legend shows them),
 * which shows SDPA as a user calls it. */
const FOLDED = /^torch\.(FLASH_ATTENTION|CUDNN_ATTENTION|EFFICIENT_ATTENTION|MATH)/;

/** What a source is called in a legend.
 * @param {Origin} o
 * @param {Array<BenchRecord | BandwidthRecord>} recs its records in the chart */
function sourceWords(o, recs) {
  if (o.kind === "yours") {
    const shapes = [...new Set(recs.map((r) => ("op" in r ? `B=${r.shape[0]} H=${r.shape[1]} D=${r.shape[3]}` : "")))].filter((x) => x);
    return `this browser: ${machineOf(recs) || "its adapter"}${shapes.length ? ` (${shapes.join("; ")})` : ""}`;
  }
  return o.kind === "file" ? `${o.label} (${o.path}, dropped here)` : `${o.label} (${o.path})`;
}

/** One point per (series, x): the first repeat, and for decode the split count its rule chose.
 * @template {BenchRecord | BandwidthRecord} R
 * @param {R[]} recs
 * @param {(r: R) => string} key */
function firstOfEach(recs, key) {
  /** @type {Map<string, R>} */
  const kept = new Map();
  for (const r of recs) {
    const k = key(r);
    const had = kept.get(k);
    const better = (/** @type {R} */ x) => (("rule" in x && x.rule ? 0 : 1) * 10 + x.repeat);
    if (!had || better(r) < better(had)) kept.set(k, r);
  }
  return [...kept.values()];
}

/** Draw both charts from what is loaded, dropped and measured. */
export function redraw() {
  drawAttention();
  drawDecode();
}

function drawAttention() {
  const origins = charted("bench");
  const views = [...new Set(origins.flatMap((o) => o.bench.map(viewOf)))];
  const select = $("bench-chart-view", HTMLSelectElement);
  // At first the view that compares the most runtimes (native, Chromium, PyTorch), then the first.
  const runtimesIn = (/** @type {string} */ v) =>
    new Set(origins.flatMap((o) => o.bench.filter((r) => viewOf(r) === v).map((r) => r.runtime))).size;
  if (!views.includes(recordsState.view)) {
    recordsState.view = views.reduce((best, v) => (runtimesIn(v) > runtimesIn(best) ? v : best), views[0] || "");
  }
  select.replaceChildren(...views.map((v) => new Option(v, v)));
  select.value = recordsState.view;
  select.onchange = () => { recordsState.view = select.value; drawAttention(); };
  const view = recordsState.view;
  const inView = origins.flatMap((o) => o.bench.filter((r) => viewOf(r) === view));
  // The x axis: the sequence length where every record has one (B, H, D), else the whole shape.
  const oneShape = new Set(inView.map((r) => `${r.shape[0]},${r.shape[1]},${r.shape[3]}`)).size === 1;
  const xOf = (/** @type {BenchRecord} */ r) => (oneShape ? String(r.shape[2]) : r.shape.join("×"));
  const order = [...inView].sort((a, b) => a.shape[2] - b.shape[2] || a.shape[0] * a.shape[1] * a.shape[3] - b.shape[0] * b.shape[1] * b.shape[3]);
  /** @type {import("./chart.js").Series[]} */
  const series = [];
  /** @type {Record<string, string>} */
  const sourceNames = {};
  for (const o of origins) {
    const recs = o.bench.filter((r) => viewOf(r) === view);
    if (!recs.length) continue;
    sourceNames[o.id] = sourceWords(o, recs);
    const bySeries = new Map();
    for (const r of firstOfEach(recs, (r) => [r.impl, r.variant, r.dtype, r.runtime, r.mode, r.shape.join()].join("|"))) {
      // a variant (ALiBi, sinks) is its own line beside the plain problem's
      const kernel = (r.impl === "torch" ? `torch (${r.dtype})` : r.impl) + (r.variant ? ` +${r.variant}` : "");
      const key = [o.id, kernel, r.runtime, r.mode].join("|");
      if (!bySeries.has(key)) bySeries.set(key, { key, kernel, runtime: r.runtime, source: o.id, mode: r.mode, points: [] });
      bySeries.get(key).points.push({ x: xOf(r), y: r.tflops, title: `${kernel}${r.mode ? ` [${r.mode}]` : ""} · ` +
        `${r.runtime} · ${sourceNames[o.id]}, (B,H,S,D) = (${r.shape}): ${num(r.tflops)} TFLOP/s, ${r.median_ms.toFixed(3)} ms ` +
        `±${(100 * r.spread).toFixed(1)}% (${r.timer}, ${r.rounds} rounds)` });
    }
    series.push(...bySeries.values());
  }
  recordsState.shown.bench = series;
  const file = recordsState.origins.find((o) => o.id === recordsState.file.bench);
  $("bench-chart-source").textContent = file ? `Measured on ${/^[aeiou]/i.test(file.label) ? "an" : "a"} ${file.label}: ` +
    `${runtimesOf(file.bench)}. Records ${file.path}${commitOf(file.bench)}.` : "";
  const styles = stylesOf(series, { runtime: RUNTIME_WORDS, source: sourceNames, mode: MODE_WORDS });
  drawChart($("bench-chart"), $("bench-chart-legend"), { series, x: { kind: "category", label: oneShape
    ? `sequence length S (B, H, D = ${inView[0].shape[0]}, ${inView[0].shape[1]}, ${inView[0].shape[3]})` : "shape B×H×S×D",
    order: [...new Set(order.map(xOf))] }, y: { label: "TFLOP/s" },
    label: `TFLOP/s by shape: ${view}; ${Object.values(sourceNames).join("; ")}` }, styles);
}

function drawDecode() {
  const origins = charted("bandwidth");
  /** @type {import("./chart.js").Series[]} */
  const series = [];
  /** @type {Record<string, string>} */
  const sourceNames = {};
  for (const o of origins) {
    sourceNames[o.id] = sourceWords(o, o.bandwidth);
    const bySeries = new Map();
    for (const r of firstOfEach(o.bandwidth, (r) => [r.impl, r.runtime, r.mode, r.case, r.dtype].join("|"))) {
      const key = [o.id, r.impl, r.runtime, r.mode].join("|");
      if (!bySeries.has(key)) bySeries.set(key, { key, kernel: r.impl, runtime: r.runtime, source: o.id, mode: r.mode, points: [] });
      bySeries.get(key).points.push({ x: r.case, y: r.gbps, title: `${r.impl}${r.mode ? ` [${r.mode}]` : ""} · ${r.runtime} · ` +
        `${sourceNames[o.id]}, ${r.case}: ${num(r.gbps)} GB/s${r.pct_of_copy ? ` (${r.pct_of_copy.toFixed(0)}% of the copy)` : ""}, ` +
        `${r.median_ms.toFixed(3)} ms ±${(100 * r.spread).toFixed(1)}%` });
    }
    series.push(...bySeries.values());
  }
  recordsState.shown.bandwidth = series;
  const file = recordsState.origins.find((o) => o.id === recordsState.file.bandwidth);
  $("decode-chart-source").textContent = file ? `Measured on ${/^[aeiou]/i.test(file.label) ? "an" : "a"} ${file.label}: ` +
    `${runtimesOf(file.bandwidth)}. Records ${file.path}${commitOf(file.bandwidth)}.` : "";
  const styles = stylesOf(series, { runtime: RUNTIME_WORDS, source: sourceNames, mode: MODE_WORDS });
  drawChart($("decode-chart"), $("decode-chart-legend"), { series, x: { kind: "category", label: "case" }, y: { label: "GB/s" },
    label: `Decode GB/s by case; ${Object.values(sourceNames).join("; ")}`, folded: series.map((x) => x.kernel).filter((k) => FOLDED.test(k)) },
    styles);
}

/** ", commit abc, 2026-11-24" of records (their first).
 * @param {Array<BenchRecord | BandwidthRecord>} recs */
function commitOf(recs) {
  const r = recs[0];
  return r ? `${r.commit ? `, commit ${r.commit.slice(0, 12)}` : ""}${r.time ? `, ${r.time.slice(0, 10)}` : ""}` : "";
}

/** This browser's benchmark records join the charts (`clear` first: a new run replaces the last).
 * @param {"bench" | "bandwidth"} kind
 * @param {Array<BenchRecord | BandwidthRecord>} recs
 * @param {boolean} [clear] */
export function addYours(kind, recs, clear = false) {
  if (clear) yours[kind] = [];
  yours[kind] = /** @type {any} */ ([...yours[kind], ...recs]);
  if (kind === "bench" && recs.length) recordsState.view = viewOf(/** @type {BenchRecord} */ (recs[0]));  // the view they joined
  redraw();
}

/** Add the records of a dropped file (Python checks them: wgattn.page.bench_import) to the charts;
 * records already there (the same file dropped again) are not added twice. Waits for Python.
 * @param {string} text
 * @param {string} [name]
 * @returns {Promise<number>} the records added */
export async function importRecords(text, name = "the file") {
  const error = $("import-error");
  error.hidden = true;
  $("bench-imported").textContent = `Reading ${name}…${document.body.dataset.status === "loading" ? " (once Python is loaded)" : ""}`;
  const ctx = await pythonReady;
  /** @type {ImportedRecords} */
  let got;
  try {
    got = JSON.parse(ctx.page.bench_import(text));
  } catch (e) {
    error.textContent = `Could not read ${name}: ${pyError(e)}`;
    error.hidden = false;
    $("bench-imported").textContent = "";
    return 0;
  }
  const seen = new Set(recordsState.origins.filter((o) => o.kind === "file").flatMap((o) => [...o.bench, ...o.bandwidth])
    .map((r) => JSON.stringify(r)));  // Python wrote every record with the same fields in the same order
  const fresh = (/** @type {Array<BenchRecord | BandwidthRecord>} */ recs) => recs.filter((r) => {
    const key = JSON.stringify(r);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const bench = /** @type {BenchRecord[]} */ (fresh(benchOf(got)));
  const bandwidth = /** @type {BandwidthRecord[]} */ (fresh(got.bandwidth));
  const all = [...got.bench, ...got.bandwidth].length;
  const added = bench.length + bandwidth.length;
  if (added) {
    recordsState.origins.push({ id: `file:${recordsState.origins.length}:${name}`, kind: "file",
      label: machineOf([...bench, ...bandwidth]), path: name, date: "", bench, bandwidth });
    if (bench.length) recordsState.view = viewOf(bench[0]);
  }
  const files = recordsState.origins.filter((o) => o.kind === "file");
  const total = files.reduce((n, o) => n + o.bench.length + o.bandwidth.length, 0);
  $("bench-imported").textContent = `${total} imported record(s); ${name}: ${all} ` +
    `(${got.bench.length} attention, ${got.bandwidth.length} decode)${added < all ? ` (${all - added} already charted)` : ""}`;
  redraw();
  return added;
}

/** Wire the drop zone and the file chooser (a drop before Python is ready waits for it). */
export function setupImports() {
  for (const target of [$("bench-drop"), $("bench-chart"), $("decode-chart")]) {
    target.addEventListener("dragover", (ev) => { ev.preventDefault(); target.classList.add("over"); });
    target.addEventListener("dragleave", () => target.classList.remove("over"));
    target.addEventListener("drop", async (ev) => {
      ev.preventDefault();
      target.classList.remove("over");
      for (const file of ev.dataTransfer ? ev.dataTransfer.files : []) await importRecords(await file.text(), file.name);
    });
  }
  const chooser = $("bench-file", HTMLInputElement);
  chooser.addEventListener("change", async () => {
    for (const file of chooser.files || []) await importRecords(await file.text(), file.name);
  });
}
