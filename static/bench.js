// @ts-check
// The benchmark view: `wgattn bench`'s jobs timed by this browser's WebGPU. Python (under Pyodide,
// wgattn.page.bench_*) validates the request, builds every plan and writes every record, in the
// same shape as `wgattn bench --json`; this module uploads, dispatches, reads timestamps and draws.
// Publishes window.wgattn.bench = {status: "idle"|"running"|"done"|"error"|"cancelled", records,
// error, skipped, imported} and mirrors the status on the section's data-status. A progress bar
// follows the jobs; Cancel stops at the next submission. Records of `wgattn bench --json` dropped
// on the chart (checked by wgattn.page.bench_import) are charted beside the browser's.

import { $, errorText, pyError, row, svgEl } from "./dom.js";
import { adapterWords, planBytes } from "./webgpu.js";

/**
 * The benchmark's shapes that Python makes (BenchStart, BenchJob, BenchPlan, BenchRecord: `wgattn
 * bench --json`'s records) are declared in wire.d.ts, generated from the Python.
 * @typedef {{ op: string, impls: string, B: string, H: string, D: string, seq_lens: string, causal: boolean,
 *   runs: string }} BenchRequest the form's fields, as typed: Python checks them
 * @typedef {"idle" | "running" | "done" | "error" | "cancelled"} BenchStatus
 * @typedef {{ status: BenchStatus, records: BenchRecord[], skipped: Array<{ impl: string, shape: number[] | null, reason: string }>,
 *   failed: string[], error: string | null, request: BenchRequest | null, imported: BenchRecord[], cancel: boolean,
 *   start: BenchStart | null }} BenchState
 * @typedef {{ impl: string, source: "browser" | "file", label: string, points: BenchRecord[] }} Series
 */

const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#bf3989"];

/** @type {BenchState} */
export const benchState = { status: "idle", records: [], skipped: [], failed: [], error: null, request: null,
  imported: [], cancel: false, start: null };

/** @param {BenchStatus} status
 * @param {string | null} [error] */
function setStatus(status, error = null) {
  benchState.status = status;
  benchState.error = error;
  $("bench").dataset.status = status;
  const box = $("bench-error");
  box.hidden = !error;
  box.textContent = error || "";
}

/** @param {number[]} xs */
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** A figure to 3 significant digits (exponent form when tiny or huge).
 * @param {number} x */
function num(x) {
  if (x === 0) return "0";
  const a = Math.abs(x);
  return a < 1e-3 || a >= 1e5 ? x.toExponential(2) : x.toPrecision(3);
}

/** The form's named fields (index.html's #bench-form: a select and inputs).
 * @param {HTMLFormElement} form
 * @param {string} name */
function field(form, name) {
  const f = form.elements.namedItem(name);
  if (!(f instanceof HTMLInputElement || f instanceof HTMLSelectElement)) throw new Error(`#bench-form has no field ${name}`);
  return f;
}

/** The request the form describes; Python checks every field (the form has `novalidate`).
 * @param {HTMLFormElement} form
 * @returns {BenchRequest} */
function requestFromForm(form) {
  /** @param {string} name */
  const v = (name) => field(form, name).value;
  const causal = field(form, "causal");
  return {
    op: v("op"), impls: v("impls").trim(), B: v("B"), H: v("H"), D: v("D"),
    seq_lens: v("seq_lens"), causal: causal instanceof HTMLInputElement && causal.checked, runs: v("runs"),
  };
}

/** Time one job: every plan of a run uploaded once and dispatched warm-up + runs times; the
 * per-run milliseconds summed over the plans. GPU timestamps when the device has them; wall
 * time when not, or when the timestamps read 0 (work below the timer's resolution).
 * @param {import("./main.js").ReadyContext} ctx
 * @param {import("./webgpu.js").Executor} executor
 * @param {BenchStart} start
 * @param {BenchJob} job
 * @returns {Promise<{ skipped: string } | { timer: "gpu" | "wall", samples: number[], skipped?: undefined }>} */
async function timeJob(ctx, executor, start, job) {
  const page = ctx.page;
  /** @type {"gpu" | "wall"} */
  let timer = executor.timed ? "gpu" : "wall";
  for (;;) {
    /** @type {number[] | null} */
    let total = null;
    let count = 1;
    for (let p = 0; p < count; p++) {
      /** @type {BenchPlan} */
      const prep = JSON.parse(page.bench_plan(start.bench, job.index, p));
      if ("skipped" in prep) return { skipped: prep.skipped };
      count = prep.count;
      const why = prep.plan.unavailable;  // Python's answer for this device (wgattn.target)
      if (why) {
        page.bench_release(prep.run);
        return { skipped: why };
      }
      let out;
      try {
        out = await executor.time(prep.plan, planBytes(page, prep.run), { runs: start.runs, warmup: start.warmup, timer, stop: () => benchState.cancel });
      } finally {
        page.bench_release(prep.run);
      }
      const samples = out.samples;
      total = total ? total.map((x, i) => x + samples[i]) : samples;
      timer = out.timer;
    }
    if (!total) throw new Error(`${job.impl}: no plan to time`);
    if (timer === "gpu" && !(median(total) > 0)) {
      timer = "wall";  // the timestamps could not see it: time it on the wall clock instead
      continue;
    }
    return { timer, samples: total };
  }
}

/** Run a benchmark request; resolves to the records (also in window.wgattn.bench).
 * @param {import("./main.js").ReadyContext} ctx
 * @param {BenchRequest} request
 * @returns {Promise<BenchRecord[]>} */
export async function runBench(ctx, request) {
  const page = ctx.page;
  benchState.records = [];
  benchState.skipped = [];
  benchState.failed = [];
  benchState.request = request;
  for (const id of ["bench-table", "bench-chart", "bench-skipped"]) $(id).replaceChildren();
  $("bench-download").hidden = true;
  if (!ctx.executor) {
    setStatus("error", "The benchmark needs WebGPU, which this browser does not offer.");
    return benchState.records;
  }
  const info = ctx.executor.info;
  /** @type {BenchStart} */
  let start;
  try {
    start = JSON.parse(page.bench_start(JSON.stringify(request)));
  } catch (e) {
    setStatus("error", `Benchmark not started: ${pyError(e)}`);
    return benchState.records;
  }
  setStatus("running");
  const adapter = `${adapterWords(info).join(" ") || "unknown adapter"} (browser WebGPU)`;
  /** @param {string} impl
   * @param {number[] | null} shape
   * @param {string} reason */
  const skip = (impl, shape, reason) => {
    benchState.skipped.push({ impl, shape, reason });
    const li = document.createElement("li");
    li.textContent = `skipped ${impl}${shape ? ` at (${shape})` : ""}: ${reason}`;
    $("bench-skipped").append(li);
  };
  start.skipped.forEach((s) => skip(s.impl, null, s.reason));
  benchState.start = start;
  const bar = $("bench-progress", HTMLProgressElement);
  bar.max = start.jobs.length;
  for (const job of start.jobs) {
    bar.value = job.index;
    if (benchState.cancel) break;
    const executor = ctx.executor;
    if (!executor) {
      setStatus("error", "The WebGPU device was lost: start it again (the button above), then rerun the benchmark.");
      page.release(start.bench);
      return benchState.records;
    }
    $("bench-status").textContent = `job ${job.index + 1} of ${start.jobs.length}: ${job.impl} at ` +
      `(B,H,S,D)=(${job.shape})${job.causal ? " causal" : ""}, ${start.warmup} warm-up + ${start.runs} runs`;
    let out;
    /** @type {BenchRecord | null} */
    let record = null;
    try {
      out = await timeJob(ctx, executor, start, job);
      if (out.skipped === undefined) {
        record = JSON.parse(page.bench_record(start.bench, job.index, JSON.stringify(out.samples), out.timer, adapter));
      }
    } catch (e) {
      if (e instanceof Error && e.name === "Cancelled") break;
      const msg = `${job.impl} at (${job.shape}) failed: ${pyError(e)}`;
      benchState.failed.push(msg);
      const li = document.createElement("li");
      li.className = "fail";
      li.textContent = msg;
      $("bench-skipped").append(li);
      continue;
    }
    if (!record) {
      skip(job.impl, job.shape, out.skipped || "no record");
      continue;
    }
    benchState.records.push(record);
    render(start);
  }
  page.release(start.bench);  // failed or cancelled jobs left it open (recorded and skipped ones free it)
  const n = benchState.records.length;
  bar.value = benchState.cancel ? bar.value : start.jobs.length;
  $("bench-status").textContent = (benchState.cancel ? `cancelled after ${n} of ${start.jobs.length} jobs: ` : "") +
    `${n} record${n === 1 ? "" : "s"} on ${adapter}` +
    (benchState.skipped.length ? `, ${benchState.skipped.length} skipped` : "");
  if (benchState.cancel) setStatus("cancelled");
  else if (benchState.failed.length) setStatus("error", `${benchState.failed.length} job(s) failed; first: ${benchState.failed[0]}`);
  else setStatus("done");
  return benchState.records;
}

/** The table, chart and download link of the browser's records so far.
 * @param {BenchStart} start */
function render(start) {
  const records = benchState.records;
  const base = start.baseline;
  const rows = records.map((r) => {
    const b = records.find((x) => x.impl === base && x.shape.join() === r.shape.join() && x.causal === r.causal);
    const ratio = b ? (b.median_ms / r.median_ms).toFixed(2) : "–";
    const tr = row("td", [[r.impl, "l"], [r.dtype, "l"], [`${r.shape.join(",")}${r.causal ? " causal" : ""}`, "l"],
      r.median_ms.toFixed(3), num(r.tflops), ratio, [r.timer, "l"]]);
    tr.dataset.impl = r.impl;
    return tr;
  });
  const head = row("th", [["impl", "l"], ["dtype", "l"], ["shape (B,H,S,D)", "l"], "median ms", "TFLOP/s",
    `× ${base}`, ["timer", "l"]]);
  head.cells[5].title = `median time of ${base} / this row's`;
  $("bench-table").replaceChildren(head, ...rows);
  redraw();
  const link = $("bench-download", HTMLAnchorElement);
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([JSON.stringify(records, null, 1)], { type: "application/json" }));
  link.download = `wgattn-bench-${start.op}.json`;
  link.hidden = false;
}

/** The chart of the browser's records and the imported ones of the same op (the browser run's op,
 * else the first imported record's). */
function redraw() {
  const start = benchState.start;
  const op = start ? start.op : benchState.imported.length ? benchState.imported[0].op : undefined;
  /** @type {Series[]} */
  const series = [];
  /** One series per kernel, mode (trusted or checked) and adapter: a file of `wgattn bench` holds both
   * modes of each kernel, and several adapters' files may be dropped; merged they would zig-zag.
   * @param {BenchRecord[]} records
   * @param {"browser" | "file"} source */
  const add = (records, source) => {
    const keys = [...new Set(records.map((r) => JSON.stringify([r.impl, r.mode, r.adapter])))];
    for (const key of keys) {
      const pts = records.filter((r) => JSON.stringify([r.impl, r.mode, r.adapter]) === key);
      const r = pts[0];
      const label = `${r.impl}${r.mode ? ` [${r.mode}]` : ""} (${r.dtype})` + (source === "file" ? ` · ${r.adapter}` : "");
      series.push({ impl: r.impl, source, label, points: pts });
    }
  };
  if (start) add(start.impls.flatMap((impl) => benchState.records.filter((r) => r.impl === impl)), "browser");
  add(benchState.imported.filter((r) => r.op === op), "file");
  if (!series.length) {
    $("bench-chart").replaceChildren();
    return;
  }
  $("bench-chart").replaceChildren(chart(series, op));
}

/** TFLOP/s against sequence length (log2 axis), one polyline and legend entry per series.
 * @param {Series[]} series
 * @param {string | undefined} op */
function chart(series, op) {
  const records = series.flatMap((s) => s.points);
  const W = 720, H = 340 + Math.max(0, 18 * series.length - 300), m = { l: 64, r: 260, t: 14, b: 46 };
  const svg = svgEl("svg", { id: "bench-svg", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `TFLOP/s against sequence length, ${op}` });
  const xs = records.map((r) => Math.log2(r.shape[2]));
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  const pad = Math.max(0.5 - (x1 - x0) / 2, 0.06 * (x1 - x0));  // keep points off the y axis
  x0 -= pad;
  x1 += pad;
  const top = Math.max(...records.map((r) => r.tflops), 1e-12);
  const step = 10 ** Math.floor(Math.log10(top / 4));
  const ystep = [1, 2, 5, 10].map((k) => k * step).find((s) => top / s <= 5) || 10 * step;  // 10·step always fits
  const ymax = Math.ceil(top / ystep) * ystep;
  // Figures from an H100 beside a software adapter's span decades: then the y axis is log10.
  const positive = records.map((r) => r.tflops).filter((t) => t > 0);
  const logY = positive.length > 1 && Math.max(...positive) / Math.min(...positive) > 100;
  const d0 = logY ? Math.floor(Math.log10(Math.min(...positive))) : 0;
  const d1 = logY ? Math.ceil(Math.log10(Math.max(...positive))) : 1;
  /** @param {number} s */
  const X = (s) => m.l + (Math.log2(s) - x0) / (x1 - x0) * (W - m.l - m.r);
  /** @type {(t: number) => number} */
  const Y = logY
    ? (t) => H - m.b - (Math.log10(Math.max(t, 10 ** d0)) - d0) / (d1 - d0) * (H - m.t - m.b)
    : (t) => H - m.b - t / ymax * (H - m.t - m.b);
  const axis = { stroke: "#656d76", "stroke-width": 1 };
  svg.append(svgEl("line", { x1: m.l, y1: H - m.b, x2: W - m.r, y2: H - m.b, ...axis }),
    svgEl("line", { x1: m.l, y1: m.t, x2: m.l, y2: H - m.b, ...axis }));
  for (const s of [...new Set(records.map((r) => r.shape[2]))]) {
    svg.append(svgEl("line", { x1: X(s), y1: H - m.b, x2: X(s), y2: H - m.b + 4, ...axis }),
      svgEl("text", { x: X(s), y: H - m.b + 16, "text-anchor": "middle", class: "tick" }, String(s)));
  }
  /** @type {number[]} */
  const yticks = [];
  if (logY) for (let d = d0; d <= d1; d++) yticks.push(10 ** d);
  else for (let t = 0; t <= ymax * (1 + 1e-9); t += ystep) yticks.push(t);
  for (const t of yticks) {
    svg.append(svgEl("line", { x1: m.l, y1: Y(t), x2: W - m.r, y2: Y(t), stroke: "#eaeef2" }),
      svgEl("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end", class: "tick" }, num(Number(t.toPrecision(6)))));
  }
  svg.append(svgEl("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle", class: "axis-label" },
    "sequence length S (tokens, log2 scale)"));
  svg.append(svgEl("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", class: "axis-label",
    transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, logY ? "TFLOP/s (log10 scale)" : "TFLOP/s"));
  series.forEach((srs, k) => {
    const color = COLORS[k % COLORS.length];
    const pts = [...srs.points].sort((a, b) => a.shape[2] - b.shape[2]);
    const g = svgEl("g", { "data-impl": srs.impl, "data-source": srs.source });
    g.append(svgEl("polyline", { class: "series", "data-impl": srs.impl, "data-source": srs.source, fill: "none",
      stroke: color, "stroke-width": 2, "stroke-dasharray": srs.source === "file" ? "6 3" : "none",
      points: pts.map((r) => `${X(r.shape[2]).toFixed(1)},${Y(r.tflops).toFixed(1)}`).join(" ") }));
    for (const r of pts) {
      const dot = svgEl("circle", { cx: X(r.shape[2]), cy: Y(r.tflops), r: 3, fill: color });
      dot.append(svgEl("title", {}, `${srs.label} S=${r.shape[2]}: ${num(r.tflops)} TFLOP/s, ${r.median_ms.toFixed(3)} ms (${r.timer})`));
      g.append(dot);
    }
    const ly = m.t + 8 + 18 * k;
    g.append(svgEl("line", { x1: W - m.r + 14, y1: ly, x2: W - m.r + 34, y2: ly, stroke: color, "stroke-width": 2,
      "stroke-dasharray": srs.source === "file" ? "6 3" : "none" }),
      svgEl("text", { x: W - m.r + 40, y: ly + 4, class: "legend" }, srs.label.length > 34 ? srs.label.slice(0, 33) + "…" : srs.label,
        svgEl("title", {}, srs.label)));
    svg.append(g);
  });
  return svg;
}

/** Add the records of a `wgattn bench --json` file to the chart (Python checks them).
 * @param {import("./main.js").ReadyContext} ctx
 * @param {string} text
 * @param {string} [name]
 * @returns {Promise<BenchRecord[]>} */
export async function importRecords(ctx, text, name = "the file") {
  /** @type {BenchRecord[]} */
  let records;
  try {
    records = JSON.parse(ctx.page.bench_import(text));
  } catch (e) {
    setStatus("error", `Could not read ${name}: ${pyError(e)}`);
    return [];
  }
  benchState.imported = benchState.imported.concat(records);
  const adapters = [...new Set(records.map((r) => r.adapter))];
  $("bench-imported").textContent = `${benchState.imported.length} imported record(s); ${name}: ${records.length} on ${adapters.join(", ")}`;
  if (!benchState.start && records.length) field($("bench-form", HTMLFormElement), "op").value = records[0].op;
  setStatus(benchState.status === "error" ? "idle" : benchState.status);
  redraw();
  return records;
}

/** Wire the form; with `?bench=OP` (and bench_B, bench_H, bench_D, bench_seq_lens, bench_causal,
 * bench_runs, bench_impls) in the URL, fill it and run at once.
 * @param {import("./main.js").ReadyContext} ctx
 * @param {URLSearchParams} [params]
 * @returns {Promise<void>} */
export function setupBench(ctx, params) {
  const form = $("bench-form", HTMLFormElement);
  const button = $("bench-run", HTMLButtonElement);
  const run = async () => {
    button.disabled = true;
    benchState.cancel = false;
    $("bench-cancel").hidden = false;
    $("bench-progress").hidden = false;
    try {
      await runBench(ctx, requestFromForm(form));
    } catch (e) {
      setStatus("error", `Benchmark stopped: ${errorText(e)}`);
    } finally {
      button.disabled = false;
      $("bench-cancel").hidden = true;
    }
  };
  $("bench-cancel").addEventListener("click", () => { benchState.cancel = true; });
  for (const target of [$("bench-drop"), $("bench-chart")]) {
    target.addEventListener("dragover", (ev) => { ev.preventDefault(); target.classList.add("over"); });
    target.addEventListener("dragleave", () => target.classList.remove("over"));
    target.addEventListener("drop", async (ev) => {
      ev.preventDefault();
      target.classList.remove("over");
      for (const file of ev.dataTransfer ? ev.dataTransfer.files : []) await importRecords(ctx, await file.text(), file.name);
    });
  }
  const chooser = $("bench-file", HTMLInputElement);
  chooser.addEventListener("change", async () => {
    for (const file of chooser.files || []) await importRecords(ctx, await file.text(), file.name);
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run();
  });
  button.disabled = false;
  const op = params && params.get("bench");
  if (params && op !== null && op !== undefined) {
    field(form, "op").value = op;
    for (const name of ["impls", "B", "H", "D", "seq_lens", "runs"]) {
      const value = params.get(`bench_${name}`);
      if (value !== null) field(form, name).value = value;
    }
    const causal = params.get("bench_causal");
    const box = field(form, "causal");
    if (causal !== null && box instanceof HTMLInputElement) box.checked = !["0", "false", ""].includes(causal);
    return run();
  }
  return Promise.resolve();
}
