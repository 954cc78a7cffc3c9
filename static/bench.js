// @ts-check
// The benchmark view: `wgattn bench`'s jobs timed by this browser's WebGPU, by the same protocol
// (wgattn.protocol: warm-up by time, interleaved rounds, the median with its spread) and into the
// same records. Python (under Pyodide, wgattn.page.bench_*) validates the request, builds every
// plan, decides each step of the protocol (the order of the rounds, when the warm-up is done, the
// dispatches per sample) and writes every record; this module uploads, dispatches, reads
// timestamps and draws. Publishes window.wgattn.bench = {status: "idle"|"running"|"done"|"error"|
// "cancelled", records, error, skipped} and mirrors the status on the section's
// data-status. A progress bar follows the jobs (and goes once the benchmark ends, started or
// not); Cancel stops at the next sample. The form's values are checked by Python as they are
// typed (PageSession.bench_validate: the message beside the form names the field and what is
// allowed) and go into the URL (bench_<field>) when a benchmark starts. The records join the
// charts of what the project measured (records.js).

import { $, errorText, pyError, row } from "./dom.js";
import { Executor, adapterWords, planBytes } from "./webgpu.js";
import { addYours } from "./records.js";
import { num } from "./chart.js";
import { urlWithBench } from "./url_state.js";

/**
 * The benchmark's shapes that Python makes (BenchStart, BenchJob, BenchPlan, BenchWarm,
 * BenchWarmReps, BenchCalibration, BenchRecord: `wgattn bench --json`'s records) are declared in wire.d.ts,
 * generated from the Python.
 * @typedef {{ op: string, impls: string, B: string, H: string, D: string, seq_lens: string, causal: boolean,
 *   rounds: string, warmup_s: string, repeat: string, min_sample_ms?: number | string }} BenchRequest the form's fields,
 *   as typed (a script may add min_sample_ms: the protocol's shortest sample): Python checks them
 * @typedef {"idle" | "running" | "done" | "error" | "cancelled"} BenchStatus
 * @typedef {{ status: BenchStatus, records: BenchRecord[], skipped: Array<{ impl: string, shape: number[] | null, reason: string }>,
 *   failed: string[], error: string | null, request: BenchRequest | null, cancel: boolean,
 *   start: BenchStart | null }} BenchState
 * @typedef {{ job: BenchJob, timed: import("./webgpu.js").TimedPlans, timer: "gpu" | "wall" }} Entry
 */

/** @type {BenchState} */
export const benchState = { status: "idle", records: [], skipped: [], failed: [], error: null, request: null,
  cancel: false, start: null };

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
    return { failed: `${job.impl}${job.config ? ` ${job.config}` : ""}: max |${job.check} - reference| ${check.max_abs_err} > ${check.allowed}: not timed`, check };
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
  /** @type {number[]} */
  const firstMs = [];
  for (const e of entries) firstMs.push((await sample(e, 1)).ms);  // untimed: a driver may compile a pipeline at its first dispatch
  // Warm-up samples as long as timed ones: a GPU left idle between short ones lowers its clock.
  /** @type {BenchWarmReps} */
  const warm = JSON.parse(page.bench_warm_reps(bench, JSON.stringify({
    first_ms: firstMs, passes: entries.map((e) => e.timed.passes) })));
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
      let total = 0;  // the round's work: ms per run times runs
      for (const i of order[rounds.length % order.length]) {
        const s = await sample(entries[i], warm.reps[i]);
        perRun[i].push(s.ms);
        stamps[i].push(...s.stamps.slice(0, start.stamps_kept));
        total += s.ms * warm.reps[i];
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
  for (const id of ["bench-table", "bench-skipped"]) $(id).replaceChildren();
  addYours("bench", [], true);
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
          addYours("bench", records);
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
 *   skipped: BenchSkip[], failed: string[], error: string | null }} CaseState */

/** The state of the last case benchmark (window.wgattn.cases), as benchState is the benchmark view's.
 * @type {CaseState} */
export const caseState = { status: "idle", records: [], checks: [], skipped: [], failed: [], error: null };

/** A case: one configuration of an op whose inputs the GPU fills (wgattn.page.bench_jobs): decode as bandwidth
 * (wgattn.bandwidth: its kernels and the WGSL copy of the bytes a step reads, a series per cache precision; records of
 * bench/decode_bandwidth.py's shape) or the GEMM (wgattn.gemm: a job per tile of gemm.smx, TFLOP/s). Every series is timed
 * by the protocol above (timeSeries), each job checked before it is timed (uploadJob); a job that does not compile, run
 * or pass its check costs that job alone.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {{ op: string, name?: string, config?: Record<string, unknown>, impls?: string,
 *   tiles?: Array<Record<string, number | boolean>>, rounds?: number | string, warmup_s?: number | string, repeat?: number,
 *   min_sample_ms?: number }} request
 *   the benchmark request of a case (Python checks it)
 * @param {(text: string, done: number, total: number) => void} [say] hears each step (jobs done of all)
 * @returns {Promise<Array<Record<string, any>>>} */
export async function runCaseBench(ctx, request, say = () => {}) {
  const page = ctx.page;
  Object.assign(caseState, { status: "running", records: [], checks: [], skipped: [], failed: [], error: null });
  const executor = ctx.executor;
  if (!executor) {
    Object.assign(caseState, { status: "error", error: `The ${request.op} benchmark needs WebGPU, which this browser does not offer.` });
    return caseState.records;
  }
  /** @type {BenchStart} */
  let start;
  try {
    start = JSON.parse(page.bench_start(JSON.stringify({ ...request, user_agent: navigator.userAgent })));
  } catch (e) {
    Object.assign(caseState, { status: "error", error: `The ${request.op} benchmark did not start: ${pyError(e)}` });
    return caseState.records;
  }
  caseState.skipped.push(...start.skipped);
  const adapter = `${adapterWords(executor.info).join(" ") || "unknown adapter"} (browser WebGPU)`;
  const total = start.jobs.length;
  try {
    for (const series of start.series) {
      /** @type {Entry[]} */
      const entries = [];
      try {
        for (const index of series.jobs) {
          const job = start.jobs[index];
          const what = `${job.impl}${job.config ? ` ${job.config}` : ""}`;
          say(`job ${index + 1} of ${total}: filling the inputs on the GPU, then checking ${what} against the reference`, index, total);
          try {
            const up = await uploadJob(ctx, executor, start, job);
            if (up.check) caseState.checks.push({ impl: what, ...up.check });
            if (up.timed) entries.push({ job, timed: up.timed, timer: executor.timed ? "gpu" : "wall" });
            else if (up.skipped !== undefined) caseState.skipped.push({ impl: what, reason: up.skipped });
            else caseState.failed.push(up.failed);
          } catch (e) {
            caseState.failed.push(`${what}: ${pyError(e)}`);
          }
        }
        /** @param {Array<Record<string, any>>} records */
        const keep = (records) => { caseState.records.push(...records); };
        const last = series.jobs[series.jobs.length - 1];
        if (entries.length) await timeSeries(ctx, executor, start, entries, adapter, (text) => say(text, last, total), keep);
      } catch (e) {
        caseState.failed.push(`the series of ${series.jobs.map((i) => start.jobs[i].config || start.jobs[i].impl).join("; ")} failed: ${pyError(e)}`);
      } finally {
        entries.forEach((e) => Executor.releaseTiming(e.timed));
      }
    }
  } finally {
    executor.releaseQueries();
    page.release(start.bench);
  }
  if (request.op === "decode" && caseState.records.length) {
    caseState.records = JSON.parse(page.bench_shares(JSON.stringify(caseState.records)));
    addYours("bandwidth", /** @type {BandwidthRecord[]} */ (caseState.records), true);
  }
  Object.assign(caseState, caseState.failed.length
    ? { status: "error", error: caseState.failed[0] } : { status: "done" });
  return caseState.records;
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
  const link = $("bench-download", HTMLAnchorElement);
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([JSON.stringify(records, null, 1)], { type: "application/json" }));
  link.download = `wgattn-bench-${start.op}.json`;
  link.hidden = false;
}

// The form's fields, by name (index.html's #bench-form), as the URL keeps them: bench_<name>.
const FIELDS = ["op", "impls", "B", "H", "D", "seq_lens", "causal", "rounds", "warmup_s", "repeat"];

/** The form's settings as the URL keeps them (bench_<field>).
 * @param {BenchRequest} request */
function settingsOf(request) {
  return Object.fromEntries(FIELDS.map((name) => [name, String(request[/** @type {keyof BenchRequest} */ (name)])]));
}

/** Check the form as it is typed (Python's checks: PageSession.bench_validate): the message beside
 * the form, the field it names marked; "" when the form is fine.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {HTMLFormElement} form
 * @param {string} errorId
 * @param {Record<string, unknown>} [request] the form's request (the attention form's by default) */
export function checkForm(ctx, form, errorId, request = requestFromForm(form)) {
  const why = ctx.page.bench_validate(JSON.stringify({ ...request, user_agent: navigator.userAgent }));
  const box = $(errorId);
  box.hidden = !why;
  box.textContent = why;
  for (const f of form.querySelectorAll("input[name], select[name]")) {
    const name = /** @type {HTMLInputElement} */ (f).name;
    // Python's message starts with the field ("rounds must be ...", "unknown impl ..."): B*H*S*D marks B.
    if (why && new RegExp(`^(unknown )?${name.replace(/s$/, "")}s?\\b`).test(why)) {
      f.setAttribute("aria-invalid", "true");
      f.setAttribute("aria-errormessage", errorId);
    } else {
      f.removeAttribute("aria-invalid");
      f.removeAttribute("aria-errormessage");
    }
  }
  return why;
}

/** Wire the form: its values checked as they are typed, the URL's settings (bench_<field>) filled
 * in, and with `?bench=OP` a run at once.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {URLSearchParams} [params]
 * @returns {Promise<void>} */
export function setupBench(ctx, params) {
  const form = $("bench-form", HTMLFormElement);
  const button = $("bench-run", HTMLButtonElement);
  const run = async () => {
    const request = requestFromForm(form);
    const why = checkForm(ctx, form, "bench-form-error", request);
    if (why) {
      setStatus("error", `Benchmark not started: ${why}`);
      const bad = form.querySelector("[aria-invalid=true]");
      if (bad instanceof HTMLElement) bad.focus();
      return;
    }
    history.replaceState(null, "", urlWithBench(settingsOf(request)));
    button.disabled = true;
    benchState.cancel = false;
    $("bench-cancel").hidden = false;
    $("bench-progress").hidden = false;
    try {
      await runBench(ctx, request);
    } catch (e) {
      setStatus("error", `Benchmark stopped: ${errorText(e)}`);
    } finally {
      button.disabled = false;
      $("bench-cancel").hidden = true;
      $("bench-progress").hidden = true;  // the bar goes with the run, whatever became of it
    }
  };
  $("bench-cancel").addEventListener("click", () => { benchState.cancel = true; });
  form.addEventListener("input", () => checkForm(ctx, form, "bench-form-error"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run();
  });
  button.disabled = false;
  /** @type {string[]} */
  const notes = [];
  for (const name of FIELDS) {
    const value = params ? params.get(name === "op" ? "bench" : `bench_${name}`) ?? params.get(`bench_${name}`) : null;
    if (value === null) continue;
    const f = field(form, name);
    if (f instanceof HTMLInputElement && f.type === "checkbox") f.checked = !["0", "false", ""].includes(value);
    else if (f instanceof HTMLSelectElement && ![...f.options].some((o) => o.value === value)) {
      notes.push(`The link's ${name === "op" ? "bench" : `bench_${name}`}=${value} is not an op the benchmark has ` +
        `(allowed: ${[...f.options].map((o) => o.value).join(", ")}); the form keeps ${f.value}.`);
    } else f.value = value;
  }
  if (notes.length) setStatus("error", notes.join(" "));
  // The URL's values are checked as typed ones are: a bound a link breaks is said at once.
  if ([...(params || [])].some(([k]) => k.startsWith("bench_"))) checkForm(ctx, form, "bench-form-error");
  const op = params && params.get("bench");
  if (op !== null && op !== undefined && !notes.length) return run();
  return Promise.resolve();
}
