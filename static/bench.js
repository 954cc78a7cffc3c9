// The benchmark view: `wgattn bench`'s jobs timed by this browser's WebGPU. Python (under Pyodide,
// wgattn.page.bench_*) validates the request, builds every plan and writes every record, in the
// same shape as `wgattn bench --json`; this module uploads, dispatches, reads timestamps and draws.
// Publishes window.wgattn.bench = {status: "idle"|"running"|"done"|"error"|"cancelled", records,
// error, skipped, imported} and mirrors the status on the section's data-status. A progress bar
// follows the jobs; Cancel stops at the next submission. Records of `wgattn bench --json` dropped
// on the chart (checked by wgattn.page.bench_import) are charted beside the browser's.

import { planBytes } from "./webgpu.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#bf3989"];

export const benchState = { status: "idle", records: [], skipped: [], failed: [], error: null, request: null,
  imported: [], cancel: false, start: null };

function setStatus(status, error = null) {
  benchState.status = status;
  benchState.error = error;
  $("bench").dataset.status = status;
  const box = $("bench-error");
  box.hidden = !error;
  box.textContent = error || "";
}

/** The readable part of a Python exception raised through Pyodide (its last line). */
function pyError(e) {
  const lines = String(e && e.message ? e.message : e).trim().split("\n");
  return lines[lines.length - 1].replace(/^ValueError: /, "");
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function num(x) {
  if (x === 0) return "0";
  const a = Math.abs(x);
  return a < 1e-3 || a >= 1e5 ? x.toExponential(2) : x.toPrecision(3);
}

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

/** The request the form describes; Python checks every field (the form has `novalidate`). */
function requestFromForm(form) {
  const f = form.elements;
  return {
    op: f.op.value, impls: f.impls.value.trim(), B: f.B.value, H: f.H.value, D: f.D.value,
    seq_lens: f.seq_lens.value, causal: f.causal.checked, runs: f.runs.value,
  };
}

/** Time one job: every plan of a run uploaded once and dispatched warm-up + runs times; the
 * per-run milliseconds summed over the plans. GPU timestamps when the device has them; wall
 * time when not, or when the timestamps read 0 (work below the timer's resolution). */
async function timeJob(ctx, start, job) {
  const page = ctx.page;
  let timer = ctx.executor.timed ? "gpu" : "wall";
  for (;;) {
    let total = null;
    let count = 1;
    for (let p = 0; p < count; p++) {
      const prep = JSON.parse(page.bench_plan(start.bench, job.index, p));
      if (prep.skipped) return { skipped: prep.skipped };
      count = prep.count;
      const why = ctx.executor.check(prep.plan);
      if (why) {
        page.bench_release(prep.run);
        return { skipped: why };
      }
      let out;
      try {
        out = await ctx.executor.time(prep.plan, planBytes(page, prep.run), { runs: start.runs, warmup: start.warmup, timer, stop: () => benchState.cancel });
      } finally {
        page.bench_release(prep.run);
      }
      total = total ? total.map((x, i) => x + out.samples[i]) : out.samples;
      timer = out.timer;
    }
    if (timer === "gpu" && !(median(total) > 0)) {
      timer = "wall";  // the timestamps could not see it: time it on the wall clock instead
      continue;
    }
    return { timer, samples: total };
  }
}

/** Run a benchmark request; resolves to the records (also in window.wgattn.bench). */
export async function runBench(ctx, request) {
  const page = ctx.page;
  benchState.records = [];
  benchState.skipped = [];
  benchState.failed = [];
  benchState.request = request;
  $("bench-table").innerHTML = "";
  $("bench-chart").innerHTML = "";
  $("bench-skipped").innerHTML = "";
  $("bench-download").hidden = true;
  if (!ctx.executor) {
    setStatus("error", "The benchmark needs WebGPU, which this browser does not offer.");
    return benchState.records;
  }
  let start;
  try {
    start = JSON.parse(page.bench_start(JSON.stringify({ ...request, features: ctx.gpu.info.features })));
  } catch (e) {
    setStatus("error", `Benchmark not started: ${pyError(e)}`);
    return benchState.records;
  }
  setStatus("running");
  const info = ctx.gpu.info;
  const named = [info.vendor, info.architecture, info.device, info.description].filter(Boolean);
  const adapter = `${named.join(" ") || "unknown adapter"} (browser WebGPU)`;
  const skip = (impl, shape, reason) => {
    benchState.skipped.push({ impl, shape, reason });
    const li = document.createElement("li");
    li.textContent = `skipped ${impl}${shape ? ` at (${shape})` : ""}: ${reason}`;
    $("bench-skipped").append(li);
  };
  start.skipped.forEach((s) => skip(s.impl, null, s.reason));
  benchState.start = start;
  const bar = $("bench-progress");
  bar.max = start.jobs.length;
  for (const job of start.jobs) {
    bar.value = job.index;
    if (benchState.cancel) break;
    if (!ctx.executor) {
      setStatus("error", "The WebGPU device was lost: start it again (the button above), then rerun the benchmark.");
      page.release(start.bench);
      return benchState.records;
    }
    $("bench-status").textContent = `job ${job.index + 1} of ${start.jobs.length}: ${job.impl} at ` +
      `(B,H,S,D)=(${job.shape})${job.causal ? " causal" : ""}, ${start.warmup} warm-up + ${start.runs} runs`;
    let out;
    try {
      out = await timeJob(ctx, start, job);
      if (!out.skipped) {
        out.record = JSON.parse(page.bench_record(start.bench, job.index, JSON.stringify(out.samples), out.timer, adapter));
      }
    } catch (e) {
      if (e.name === "Cancelled") break;
      const msg = `${job.impl} at (${job.shape}) failed: ${pyError(e)}`;
      benchState.failed.push(msg);
      const li = document.createElement("li");
      li.className = "fail";
      li.textContent = msg;
      $("bench-skipped").append(li);
      continue;
    }
    if (out.skipped) {
      skip(job.impl, job.shape, out.skipped);
      continue;
    }
    benchState.records.push(out.record);
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

function render(start) {
  const records = benchState.records;
  const base = start.baseline;
  const rows = records.map((r) => {
    const b = records.find((x) => x.impl === base && x.shape.join() === r.shape.join() && x.causal === r.causal);
    const ratio = b ? (b.median_ms / r.median_ms).toFixed(2) : "–";
    return `<tr data-impl="${esc(r.impl)}"><td class=l>${esc(r.impl)}</td><td class=l>${r.dtype}</td>
      <td class=l>${r.shape.join(",")}${r.causal ? " causal" : ""}</td><td>${r.median_ms.toFixed(3)}</td>
      <td>${num(r.tflops)}</td><td>${ratio}</td><td class=l>${r.timer}</td></tr>`;
  });
  $("bench-table").innerHTML = `<tr><th class=l>impl</th><th class=l>dtype</th><th class=l>shape (B,H,S,D)</th>
    <th>median ms</th><th>TFLOP/s</th><th title="median time of ${esc(base)} / this row's">× ${esc(base)}</th>
    <th class=l>timer</th></tr>` + rows.join("");
  redraw();
  const link = $("bench-download");
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([JSON.stringify(records, null, 1)], { type: "application/json" }));
  link.download = `wgattn-bench-${start.op}.json`;
  link.hidden = false;
}

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** The chart of the browser's records and the imported ones of the same op (the browser run's op,
 * else the first imported record's). */
function redraw() {
  const start = benchState.start;
  const op = start ? start.op : (benchState.imported[0] || {}).op;
  const series = [];
  if (start) {
    for (const impl of start.impls) {
      const pts = benchState.records.filter((r) => r.impl === impl);
      if (pts.length) series.push({ impl, source: "browser", label: `${impl} (${pts[0].dtype})`, points: pts });
    }
  }
  const imported = benchState.imported.filter((r) => r.op === op);
  const keys = [...new Set(imported.map((r) => `${r.impl}\u0000${r.adapter}`))];
  for (const key of keys) {
    const [impl, adapter] = key.split("\u0000");
    const pts = imported.filter((r) => r.impl === impl && r.adapter === adapter);
    series.push({ impl, source: "file", label: `${impl} (${pts[0].dtype}) · ${adapter}`, points: pts });
  }
  if (!series.length) {
    $("bench-chart").replaceChildren();
    return;
  }
  $("bench-chart").replaceChildren(chart(series, op));
}

/** TFLOP/s against sequence length (log2 axis), one polyline and legend entry per series. */
function chart(series, op) {
  const records = series.flatMap((s) => s.points);
  const W = 720, H = 340 + Math.max(0, 18 * series.length - 300), m = { l: 64, r: 260, t: 14, b: 46 };
  const svg = el("svg", { id: "bench-svg", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `TFLOP/s against sequence length, ${op}` });
  const xs = records.map((r) => Math.log2(r.shape[2]));
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  const pad = Math.max(0.5 - (x1 - x0) / 2, 0.06 * (x1 - x0));  // keep points off the y axis
  x0 -= pad;
  x1 += pad;
  const top = Math.max(...records.map((r) => r.tflops), 1e-12);
  const step = 10 ** Math.floor(Math.log10(top / 4));
  const ystep = [1, 2, 5, 10].map((k) => k * step).find((s) => top / s <= 5);
  const ymax = Math.ceil(top / ystep) * ystep;
  // Figures from an H100 beside a software adapter's span decades: then the y axis is log10.
  const positive = records.map((r) => r.tflops).filter((t) => t > 0);
  const logY = positive.length > 1 && Math.max(...positive) / Math.min(...positive) > 100;
  const d0 = logY ? Math.floor(Math.log10(Math.min(...positive))) : 0;
  const d1 = logY ? Math.ceil(Math.log10(Math.max(...positive))) : 1;
  const X = (s) => m.l + (Math.log2(s) - x0) / (x1 - x0) * (W - m.l - m.r);
  const Y = logY
    ? (t) => H - m.b - (Math.log10(Math.max(t, 10 ** d0)) - d0) / (d1 - d0) * (H - m.t - m.b)
    : (t) => H - m.b - t / ymax * (H - m.t - m.b);
  const axis = { stroke: "#656d76", "stroke-width": 1 };
  svg.append(el("line", { x1: m.l, y1: H - m.b, x2: W - m.r, y2: H - m.b, ...axis }),
    el("line", { x1: m.l, y1: m.t, x2: m.l, y2: H - m.b, ...axis }));
  for (const s of [...new Set(records.map((r) => r.shape[2]))]) {
    svg.append(el("line", { x1: X(s), y1: H - m.b, x2: X(s), y2: H - m.b + 4, ...axis }),
      el("text", { x: X(s), y: H - m.b + 16, "text-anchor": "middle", class: "tick" }, String(s)));
  }
  const yticks = [];
  if (logY) for (let d = d0; d <= d1; d++) yticks.push(10 ** d);
  else for (let t = 0; t <= ymax * (1 + 1e-9); t += ystep) yticks.push(t);
  for (const t of yticks) {
    svg.append(el("line", { x1: m.l, y1: Y(t), x2: W - m.r, y2: Y(t), stroke: "#eaeef2" }),
      el("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end", class: "tick" }, num(Number(t.toPrecision(6)))));
  }
  svg.append(el("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle", class: "axis-label" },
    "sequence length S (tokens, log2 scale)"));
  svg.append(el("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", class: "axis-label",
    transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, logY ? "TFLOP/s (log10 scale)" : "TFLOP/s"));
  series.forEach((srs, k) => {
    const color = COLORS[k % COLORS.length];
    const pts = [...srs.points].sort((a, b) => a.shape[2] - b.shape[2]);
    const g = el("g", { "data-impl": srs.impl, "data-source": srs.source });
    g.append(el("polyline", { class: "series", "data-impl": srs.impl, "data-source": srs.source, fill: "none",
      stroke: color, "stroke-width": 2, "stroke-dasharray": srs.source === "file" ? "6 3" : "none",
      points: pts.map((r) => `${X(r.shape[2]).toFixed(1)},${Y(r.tflops).toFixed(1)}`).join(" ") }));
    for (const r of pts) {
      const dot = el("circle", { cx: X(r.shape[2]), cy: Y(r.tflops), r: 3, fill: color });
      dot.append(el("title", {}, `${srs.label} S=${r.shape[2]}: ${num(r.tflops)} TFLOP/s, ${r.median_ms.toFixed(3)} ms (${r.timer})`));
      g.append(dot);
    }
    const ly = m.t + 8 + 18 * k;
    g.append(el("line", { x1: W - m.r + 14, y1: ly, x2: W - m.r + 34, y2: ly, stroke: color, "stroke-width": 2,
      "stroke-dasharray": srs.source === "file" ? "6 3" : "none" }),
      el("text", { x: W - m.r + 40, y: ly + 4, class: "legend" }, srs.label.length > 34 ? srs.label.slice(0, 33) + "…" : srs.label));
    g.lastChild.append(el("title", {}, srs.label));
    svg.append(g);
  });
  return svg;
}

/** Add the records of a `wgattn bench --json` file to the chart (Python checks them). */
export async function importRecords(ctx, text, name = "the file") {
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
  if (!benchState.start && records.length) $("bench-form").elements.op.value = records[0].op;
  setStatus(benchState.status === "error" ? "idle" : benchState.status);
  redraw();
  return records;
}

/** Wire the form; with `?bench=OP` (and bench_B, bench_H, bench_D, bench_seq_lens, bench_causal,
 * bench_runs, bench_impls) in the URL, fill it and run at once. */
export function setupBench(ctx, params) {
  const form = $("bench-form");
  const run = async () => {
    $("bench-run").disabled = true;
    benchState.cancel = false;
    $("bench-cancel").hidden = false;
    $("bench-progress").hidden = false;
    try {
      await runBench(ctx, requestFromForm(form));
    } catch (e) {
      setStatus("error", `Benchmark stopped: ${e.message || e}`);
    } finally {
      $("bench-run").disabled = false;
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
      for (const file of ev.dataTransfer.files) await importRecords(ctx, await file.text(), file.name);
    });
  }
  $("bench-file").addEventListener("change", async (ev) => {
    for (const file of ev.target.files) await importRecords(ctx, await file.text(), file.name);
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run();
  });
  $("bench-run").disabled = false;
  if (params && params.has("bench")) {
    form.elements.op.value = params.get("bench");
    for (const name of ["impls", "B", "H", "D", "seq_lens", "runs"]) {
      if (params.has(`bench_${name}`)) form.elements[name].value = params.get(`bench_${name}`);
    }
    if (params.has("bench_causal")) form.elements.causal.checked = !["0", "false", ""].includes(params.get("bench_causal"));
    return run();
  }
  return Promise.resolve();
}
