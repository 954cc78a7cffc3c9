// @ts-check
// The benchmark view: `wgattn bench`'s jobs timed by this browser's WebGPU, by the same protocol
// (wgattn.protocol: warm-up by time, interleaved rounds, the median with its spread) and into the
// same records. Python (under Pyodide, wgattn.page.bench_*) validates the request, builds every
// plan, decides each step of the protocol (the order of the rounds, when the warm-up is done, the
// dispatches per sample) and writes every record; this module uploads, dispatches, reads
// timestamps and draws. Publishes window.wgattn.bench = {status: "idle"|"running"|"done"|"error"|
// "cancelled", records, error, skipped, imported} and mirrors the status on the section's
// data-status. A progress bar follows the jobs; Cancel stops at the next sample. Records of
// `wgattn bench --json` dropped on the chart (checked by wgattn.page.bench_import) are charted
// beside the browser's: colour by kernel, dash by mode (trusted solid, checked dashed), a hollow
// point for a file's; a file dropped twice adds nothing the second time.

import { $, errorText, pyError, row, svgEl } from "./dom.js";
import { Executor, adapterWords, planBytes } from "./webgpu.js";

/**
 * The benchmark's shapes that Python makes (BenchStart, BenchJob, BenchPlan, BenchWarm,
 * BenchCalibration, BenchRecord: `wgattn bench --json`'s records) are declared in wire.d.ts,
 * generated from the Python.
 * @typedef {{ op: string, impls: string, B: string, H: string, D: string, seq_lens: string, causal: boolean,
 *   rounds: string, warmup_s: string, repeat: string }} BenchRequest the form's fields, as typed: Python checks them
 * @typedef {"idle" | "running" | "done" | "error" | "cancelled"} BenchStatus
 * @typedef {{ status: BenchStatus, records: BenchRecord[], skipped: Array<{ impl: string, shape: number[] | null, reason: string }>,
 *   failed: string[], error: string | null, request: BenchRequest | null, imported: BenchRecord[], cancel: boolean,
 *   start: BenchStart | null }} BenchState
 * @typedef {{ key: string, impl: string, mode: string, source: "browser" | "file", label: string, points: BenchRecord[] }} Series
 * @typedef {{ job: BenchJob, timed: import("./webgpu.js").TimedPlans, timer: "gpu" | "wall" }} Entry
 */

const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#bf3989"];
/** Dash by mode: trusted (no runtime bounds checks) solid, checked dashed, anchors dotted. */
const DASH = /** @type {Record<string, string>} */ ({ trusted: "none", checked: "7 4", "": "2 3" });

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
    op: v("op"), impls: v("impls").trim(), B: v("B"), H: v("H"), D: v("D"), seq_lens: v("seq_lens"),
    causal: causal instanceof HTMLInputElement && causal.checked, rounds: v("rounds"), warmup_s: v("warmup_s"),
    repeat: v("repeat"),
  };
}

/** The tick of performance.now() here, in ns (browsers coarsen it: 100 µs unless cross-origin
 * isolated): the wall timer's resolution in the records. */
function clockResolutionNs() {
  let best = Infinity;
  let last = performance.now();
  for (let seen = 0; seen < 5;) {
    const t = performance.now();
    if (t !== last) {
      best = Math.min(best, t - last);
      last = t;
      seen++;
    }
  }
  return Math.round(best * 1e6);
}

/** An Error named "Cancelled" when the user pressed Cancel. */
function stopIfCancelled() {
  if (benchState.cancel) throw Object.assign(new Error("cancelled"), { name: "Cancelled" });
}

/** Upload one job's plans (Python builds them and says whether this device can run them, the executor uploads them; Python
 * forgets them once they are on the GPU). A job with a `check` buffer (a kernel timed as bandwidth) then has its inputs
 * filled on the GPU by Python's fill plans (a GB never crosses Pyodide), runs once, and its output is judged by Python
 * against the float64 reference: a job whose check fails comes back `failed`, not timed.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {Executor} executor
 * @param {{ bench: number }} start
 * @param {BenchJob} job
 * @returns {Promise<{ skipped: string, timed?: undefined, failed?: undefined, check?: undefined }
 *   | { failed: string, check: BenchCheck, timed?: undefined, skipped?: undefined }
 *   | { timed: import("./webgpu.js").TimedPlans, check?: BenchCheck, skipped?: undefined, failed?: undefined }>} */
async function uploadJob(ctx, executor, start, job) {
  const up = await uploadPlans(ctx, executor, start, job);
  if (!up.timed || !job.check) return up;
  const page = ctx.page;
  try {
    /** @type {Plan[]} */
    const fills = JSON.parse(page.bench_fills(start.bench, job.index));
    for (const f of fills) await executor.runOnTimed(up.timed, f);
    await executor.sample(up.timed, 1, "wall");  // one run on the filled inputs, then its output judged
    /** @type {BenchCheck} */
    const check = JSON.parse(page.bench_check(start.bench, job.index, await executor.readTimed(up.timed, job.check)));
    if (check.ok) return { timed: up.timed, check };
    Executor.releaseTiming(up.timed);
    return { failed: `${job.impl}: max |${job.check} - reference| ${check.max_abs_err} > ${check.allowed}: not timed`, check };
  } catch (e) {
    Executor.releaseTiming(up.timed);
    throw e;
  }
}

/** Upload one job's plans.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {Executor} executor
 * @param {{ bench: number }} start
 * @param {BenchJob} job
 * @returns {Promise<{ skipped: string, timed?: undefined } | { timed: import("./webgpu.js").TimedPlans, skipped?: undefined }>} */
async function uploadPlans(ctx, executor, start, job) {
  const page = ctx.page;
  /** @type {number[]} */
  const runs = [];
  try {
    /** @type {Array<{ plan: Plan, initial: import("./webgpu.js").InitialBytes }>} */
    const items = [];
    for (let p = 0, count = 1; p < count; p++) {
      /** @type {BenchPlan} */
      const prep = JSON.parse(page.bench_plan(start.bench, job.index, p));
      if ("skipped" in prep) return { skipped: prep.skipped };
      count = prep.count;
      runs.push(prep.run);
      const why = prep.plan.unavailable;  // Python's answer for this device (wgattn.target)
      if (why) return { skipped: why };
      items.push({ plan: prep.plan, initial: planBytes(page, prep.run) });
    }
    return { timed: await executor.prepareTiming(items) };
  } finally {
    runs.forEach((run) => page.bench_release(run));
  }
}

/** Time one series (the jobs at one shape) by wgattn.protocol, asking Python at each step; each
 * repeat warms again, then times its rounds, and gives one record per job to `keep`.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {Executor} executor
 * @param {{ bench: number, repeat: number, stamps_kept: number }} start
 * @param {Entry[]} entries
 * @param {string} adapter
 * @param {(text: string) => void} say
 * @param {(records: any[]) => void} keep hears each repeat's records */
async function timeSeries(ctx, executor, start, entries, adapter, say, keep) {
  const page = ctx.page;
  const bench = start.bench;
  const clockNs = clockResolutionNs();
  /** @type {number[][]} */
  const order = JSON.parse(page.bench_schedule(bench, entries.length));
  /** @param {Entry} e @param {number} reps */
  const sample = async (e, reps) => { stopIfCancelled(); return executor.sample(e.timed, reps, e.timer); };
  say(`priming (${entries[0].job.shape})`);
  for (const e of entries) await sample(e, 1);  // untimed: a driver may compile a pipeline at its first dispatch
  for (let rep = 0; rep < start.repeat; rep++) {
    const what = `(${entries[0].job.shape})${start.repeat > 1 ? `, repeat ${rep + 1} of ${start.repeat}` : ""}`;
    say(`warming up at ${what}`);
    const t0 = performance.now();
    /** @type {number[]} */
    const rounds = [];
    /** @type {number[][]} */
    const perRun = entries.map(() => []);
    /** @type {number[][]} */
    const stamps = entries.map(() => []);
    /** @type {BenchWarm} */
    let verdict;
    do {
      let total = 0;
      for (const i of order[rounds.length % order.length]) {
        const s = await sample(entries[i], 1);
        perRun[i].push(s.ms);
        stamps[i].push(...s.stamps.slice(0, start.stamps_kept));
        total += s.ms;
      }
      rounds.push(total);
      verdict = JSON.parse(page.bench_warm(bench, JSON.stringify({ elapsed_s: (performance.now() - t0) / 1e3, rounds })));
    } while (!verdict.done);
    const warmupS = (performance.now() - t0) / 1e3;
    for (const [i, e] of entries.entries()) {
      // Timestamps that cannot see the work (all equal): time it on the wall clock instead.
      if (e.timer === "gpu" && !perRun[i].some((ms) => ms > 0)) {
        e.timer = "wall";
        perRun[i] = [(await sample(e, 1)).ms];
        stamps[i] = [];
      }
    }
    const known = entries.map((e) => (e.timer === "wall" ? clockNs : 0));
    /** @type {BenchCalibration} */
    const cal = JSON.parse(page.bench_calibrate(bench, JSON.stringify({
      per_run: perRun, stamps, passes: entries.map((e) => e.timed.passes), resolution_ns: known })));
    /** @type {number[][]} */
    const samples = entries.map(() => []);
    for (const [r, roundOrder] of order.entries()) {
      say(`round ${r + 1} of ${order.length} at ${what}`);
      for (const i of roundOrder) {
        const s = await sample(entries[i], cal.reps[i]);
        samples[i].push(s.ms);
        stamps[i].push(...s.stamps.slice(0, start.stamps_kept));
      }
    }
    keep(entries.map((e, i) => JSON.parse(page.bench_record(bench, e.job.index, JSON.stringify({
      samples: samples[i], stamps: stamps[i], reps: cal.reps[i], warmup_s: warmupS, warmed: verdict.warmed,
      timer: e.timer, resolution_ns: known[i], adapter, repeat: rep })))));
  }
}

/** Run a benchmark request; resolves to the records (also in window.wgattn.bench).
 * @param {import("./context.js").ReadyContext} ctx
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
    start = JSON.parse(page.bench_start(JSON.stringify({ ...request, user_agent: navigator.userAgent })));
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
  /** @param {string} msg */
  const fail = (msg) => {
    benchState.failed.push(msg);
    const li = document.createElement("li");
    li.className = "fail";
    li.textContent = msg;
    $("bench-skipped").append(li);
  };
  start.skipped.forEach((s) => skip(s.impl, null, s.reason));
  benchState.start = start;
  const bar = $("bench-progress", HTMLProgressElement);
  bar.max = start.jobs.length + 1;
  bar.value = 0;
  const proto = `${start.protocol.warmup_s} s warm-up, ${start.protocol.rounds} interleaved rounds`;
  /** @param {string} text */
  const say = (text) => { $("bench-status").textContent = `${text} (${proto})`; };
  try {
    for (const series of start.series) {
      stopIfCancelled();
      const executor = ctx.executor;
      if (!executor) {
        setStatus("error", "The WebGPU device was lost: start it again (the button above), then rerun the benchmark.");
        return benchState.records;
      }
      /** @type {Entry[]} */
      const entries = [];
      try {
        for (const index of series.jobs) {
          const job = start.jobs[index];
          say(`job ${index + 1} of ${start.jobs.length}: uploading ${job.impl}${job.variant ? " +" + job.variant : ""} at ` +
            `(B,H,S,D)=(${job.shape})${job.causal ? " causal" : ""}`);
          bar.value = index;
          let up;
          try {
            up = await uploadJob(ctx, executor, start, job);
          } catch (e) {
            fail(`${job.impl} at (${job.shape}) failed: ${pyError(e)}`);
            continue;
          }
          if (up.timed) entries.push({ job, timed: up.timed, timer: executor.timed ? "gpu" : "wall" });
          else if (up.skipped !== undefined) skip(job.impl, job.shape, up.skipped);
          else fail(up.failed);
        }
        /** @param {BenchRecord[]} records */
        const keep = (records) => {
          benchState.records.push(...records);
          render(start);
        };
        if (entries.length) await timeSeries(ctx, executor, start, entries, adapter, say, keep);
      } catch (e) {
        if (e instanceof Error && e.name === "Cancelled") throw e;
        fail(`the series at (${series.shape}) failed: ${pyError(e)}`);
      } finally {
        entries.forEach((e) => Executor.releaseTiming(e.timed));
      }
    }
  } catch (e) {
    if (!(e instanceof Error && e.name === "Cancelled")) throw e;
  } finally {
    if (ctx.executor) ctx.executor.releaseQueries();
    page.release(start.bench);  // skipped, failed or cancelled jobs left it open (recorded ones free it)
  }
  const n = benchState.records.length;
  bar.value = benchState.cancel ? bar.value : bar.max;
  $("bench-status").textContent = (benchState.cancel ? `cancelled after ${n} records: ` : "") +
    `${n} record${n === 1 ? "" : "s"} on ${adapter} (${proto} per shape)` +
    (benchState.skipped.length ? `, ${benchState.skipped.length} skipped` : "");
  if (benchState.cancel) setStatus("cancelled");
  else if (benchState.failed.length) setStatus("error", `${benchState.failed.length} job(s) failed; first: ${benchState.failed[0]}`);
  else setStatus("done");
  return benchState.records;
}

/** @typedef {{ status: BenchStatus, records: Array<Record<string, any>>, checks: Array<BenchCheck & { impl: string }>,
 *   skipped: BenchSkip[], failed: string[], error: string | null }} DecodeState */

/** The decode benchmark's state (window.wgattn.decode), as benchState is the benchmark view's.
 * @type {DecodeState} */
export const decodeState = { status: "idle", records: [], checks: [], skipped: [], failed: [], error: null };

/** Decode as bandwidth (wgattn.bandwidth): a decode configuration's kernels and the WGSL copy of the bytes a step reads,
 * timed in one series per cache precision by the protocol above (timeSeries), each kernel checked before it is timed
 * (uploadJob). Records of bench/decode_bandwidth.py's shape, GB/s and the share of this browser's own copy bandwidth.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {{ op?: string, name?: string, config: Record<string, number | boolean>, impls?: string, rounds?: number,
 *   warmup_s?: number, repeat?: number }} request the benchmark request of an op timed as bandwidth (Python checks it)
 * @returns {Promise<Array<Record<string, any>>>} */
export async function runDecodeBench(ctx, request) {
  const page = ctx.page;
  Object.assign(decodeState, { status: "running", records: [], checks: [], skipped: [], failed: [], error: null });
  const executor = ctx.executor;
  if (!executor) {
    Object.assign(decodeState, { status: "error", error: "The decode benchmark needs WebGPU, which this browser does not offer." });
    return decodeState.records;
  }
  /** @type {BenchStart} */
  let start;
  try {
    start = JSON.parse(page.bench_start(JSON.stringify({ op: "decode", ...request, user_agent: navigator.userAgent })));
  } catch (e) {
    Object.assign(decodeState, { status: "error", error: `Decode benchmark not started: ${pyError(e)}` });
    return decodeState.records;
  }
  decodeState.skipped.push(...start.skipped);
  const adapter = `${adapterWords(executor.info).join(" ") || "unknown adapter"} (browser WebGPU)`;
  try {
    for (const series of start.series) {
      /** @type {Entry[]} */
      const entries = [];
      try {
        for (const index of series.jobs) {
          const job = start.jobs[index];
          const up = await uploadJob(ctx, executor, start, job);
          if (up.check) decodeState.checks.push({ impl: job.impl, ...up.check });
          if (up.timed) entries.push({ job, timed: up.timed, timer: executor.timed ? "gpu" : "wall" });
          else if (up.skipped !== undefined) decodeState.skipped.push({ impl: job.impl, reason: up.skipped });
          else decodeState.failed.push(up.failed);
        }
        /** @param {Array<Record<string, any>>} records */
        const keep = (records) => { decodeState.records.push(...records); };
        if (entries.length) await timeSeries(ctx, executor, start, entries, adapter, () => {}, keep);
      } finally {
        entries.forEach((e) => Executor.releaseTiming(e.timed));
      }
    }
  } catch (e) {
    decodeState.failed.push(pyError(e));
  } finally {
    executor.releaseQueries();
    page.release(start.bench);
  }
  Object.assign(decodeState, decodeState.failed.length
    ? { status: "error", error: decodeState.failed[0] } : { status: "done" });
  return decodeState.records;
}

/** A record's mode as the table and legend show it ("" for an anchor).
 * @param {BenchRecord} r */
const modeOf = (r) => (r.mode ? ` [${r.mode}]` : "");

/** The table, chart and download link of the browser's records so far.
 * @param {BenchStart} start */
function render(start) {
  const records = benchState.records;
  const base = start.baseline;
  const rows = records.map((r) => {
    const b = records.find((x) => x.impl === base && x.shape.join() === r.shape.join() && x.causal === r.causal &&
      x.repeat === r.repeat && x.variant === r.variant);
    const ratio = b ? (b.median_ms / r.median_ms).toFixed(2) : "–";
    const flags = [r.wide ? "wide" : "", r.warmed ? "" : "cold"].filter((f) => f).join(", ");
    const variant = r.variant ? ` +${r.variant}` : "";  // ALiBi and/or sinks, timed beside the plain problem
    const tr = row("td", [[`${r.impl}${variant}${modeOf(r)}${r.repeat ? ` #${r.repeat + 1}` : ""}`, "l"], [r.dtype, "l"],
      [`${r.shape.join(",")}${r.causal ? " causal" : ""}`, "l"], r.median_ms.toFixed(3), `±${(100 * r.spread).toFixed(1)}%`,
      num(r.tflops), ratio, `${r.rounds}×${r.reps}`, [`${r.timer} (${num(r.timer_resolution_ns)} ns)`, "l"], [flags, "l"]]);
    tr.dataset.impl = r.impl;
    if (r.wide || !r.warmed) tr.classList.add("warn");
    return tr;
  });
  const head = row("th", [["impl [mode]", "l"], ["dtype", "l"], ["shape (B,H,S,D)", "l"], "median ms", "IQR", "TFLOP/s",
    `× ${base}`, "rounds×reps", ["timer (tick)", "l"], ["", "l"]]);
  head.cells[4].title = "interquartile range of the rounds over the median: above 5% the figure is flagged wide";
  head.cells[6].title = `median time of ${base} / this row's`;
  $("bench-table").replaceChildren(head, ...rows);
  redraw();
  const link = $("bench-download", HTMLAnchorElement);
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([JSON.stringify(records, null, 1)], { type: "application/json" }));
  link.download = `wgattn-bench-${start.op}.json`;
  link.hidden = false;
}

/** The chart of the browser's records and the imported ones of the same op (the browser run's op,
 * else the first imported record's): one line per kernel, mode, runtime, adapter and repeat. */
function redraw() {
  const start = benchState.start;
  const op = start ? start.op : benchState.imported.length ? benchState.imported[0].op : undefined;
  /** @type {Map<string, Series>} */
  const series = new Map();
  /** @param {BenchRecord} r
   * @param {"browser" | "file"} source */
  const add = (r, source) => {
    const key = [source, r.impl, r.variant, r.mode, r.dtype, r.runtime, r.adapter, r.repeat].join("\u0000");
    let s = series.get(key);
    if (!s) {
      const variant = r.variant ? ` +${r.variant}` : "";
      const label = `${r.impl}${variant}${modeOf(r)} (${r.dtype}) · ${r.runtime} · ${r.adapter}${r.repeat ? ` #${r.repeat + 1}` : ""}`;
      s = { key, impl: r.impl, mode: r.mode, source, label, points: [] };
      series.set(key, s);
    }
    s.points.push(r);
  };
  benchState.records.forEach((r) => add(r, "browser"));
  benchState.imported.filter((r) => r.op === op).forEach((r) => add(r, "file"));
  if (!series.size) {
    $("bench-chart").replaceChildren();
    return;
  }
  $("bench-chart").replaceChildren(chart([...series.values()], op));
}

/** TFLOP/s against sequence length (log2 axis), one polyline and legend entry per series: colour
 * by kernel, dash by mode, hollow points for a file's records.
 * @param {Series[]} series
 * @param {string | undefined} op */
function chart(series, op) {
  const records = series.flatMap((s) => s.points);
  const W = 860, H = 340 + Math.max(0, 18 * series.length - 300), m = { l: 64, r: 400, t: 14, b: 46 };
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
  const kernels = [...new Set(series.map((s) => s.impl))];
  series.forEach((srs, k) => {
    const color = COLORS[kernels.indexOf(srs.impl) % COLORS.length];
    const dash = DASH[srs.mode] || "none";
    const pts = [...srs.points].sort((a, b) => a.shape[2] - b.shape[2]);
    const g = svgEl("g", { "data-impl": srs.impl, "data-source": srs.source, "data-mode": srs.mode });
    g.append(svgEl("polyline", { class: "series", "data-impl": srs.impl, "data-source": srs.source, "data-mode": srs.mode,
      fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": dash,
      points: pts.map((r) => `${X(r.shape[2]).toFixed(1)},${Y(r.tflops).toFixed(1)}`).join(" ") }));
    for (const r of pts) {
      const dot = svgEl("circle", { cx: X(r.shape[2]), cy: Y(r.tflops), r: 3, fill: srs.source === "file" ? "#fff" : color,
        stroke: color });
      dot.append(svgEl("title", {}, `${srs.label} S=${r.shape[2]}: ${num(r.tflops)} TFLOP/s, ${r.median_ms.toFixed(3)} ms ` +
        `±${(100 * r.spread).toFixed(1)}% (${r.timer}, ${r.rounds} rounds)`));
      g.append(dot);
    }
    const ly = m.t + 8 + 18 * k;
    g.append(svgEl("line", { x1: W - m.r + 14, y1: ly, x2: W - m.r + 34, y2: ly, stroke: color, "stroke-width": 2,
      "stroke-dasharray": dash }),
      svgEl("text", { x: W - m.r + 40, y: ly + 4, class: "legend" }, srs.label.length > 60 ? srs.label.slice(0, 59) + "…" : srs.label,
        svgEl("title", {}, srs.label)));
    svg.append(g);
  });
  return svg;
}

/** Add the records of a `wgattn bench --json` file to the chart (Python checks them); records
 * already there (the same file dropped again) are not added twice.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {string} text
 * @param {string} [name]
 * @returns {Promise<BenchRecord[]>} the records added */
export async function importRecords(ctx, text, name = "the file") {
  /** @type {BenchRecord[]} */
  let records;
  try {
    records = JSON.parse(ctx.page.bench_import(text));
  } catch (e) {
    setStatus("error", `Could not read ${name}: ${pyError(e)}`);
    return [];
  }
  const seen = new Set(benchState.imported.map((r) => JSON.stringify(r)));
  const added = records.filter((r) => {
    const key = JSON.stringify(r);  // Python wrote every record with the same fields in the same order
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  benchState.imported = benchState.imported.concat(added);
  const adapters = [...new Set(records.map((r) => r.adapter))];
  $("bench-imported").textContent = `${benchState.imported.length} imported record(s); ${name}: ${records.length} on ` +
    `${adapters.join(", ")}${added.length < records.length ? ` (${records.length - added.length} already charted)` : ""}`;
  if (!benchState.start && records.length) field($("bench-form", HTMLFormElement), "op").value = records[0].op;
  setStatus(benchState.status === "error" ? "idle" : benchState.status);
  redraw();
  return added;
}

/** Wire the form; with `?bench=OP` (and bench_B, bench_H, bench_D, bench_seq_lens, bench_causal,
 * bench_rounds, bench_warmup_s, bench_impls, bench_repeat) in the URL, fill it and run at once.
 * @param {import("./context.js").ReadyContext} ctx
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
    for (const name of ["impls", "B", "H", "D", "seq_lens", "rounds", "warmup_s", "repeat"]) {
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
