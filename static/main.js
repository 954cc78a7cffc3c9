// @ts-check
// The page: the live check of any registered kernel (browser WebGPU, the float64 reference under
// Pyodide, the server's native wgpu-py run, every pair on every output), with pictures of the run,
// the conformance grid and the benchmark. Python (wgattn.page under Pyodide) builds every plan and
// makes every judgement; this module moves bytes and draws.
// Tests read window.wgattn.results and document.body.dataset.status ("done" or "error").
import { $, el, errorText, fmt, pyError, row, runPage } from "./dom.js";
import { Executor, adapterWords, openDevice, runPrepared } from "./webgpu.js";
import { loadPython, showProgress } from "./python.js";
import { setupConformance } from "./conformance.js";
import { benchState, decodeState, runBench, runDecodeBench, setupBench } from "./bench.js";
import { runProbe } from "./precision.js";
import { drawPictures } from "./pictures.js";

/**
 * The page's shapes that Python makes (KernelInfo, SchemaField, LivePrepared, LiveResult, Pair,
 * RuntimeReport, TargetJson, ...) are declared in wire.d.ts, generated from the Python.
 * @typedef {Record<string, SchemaField[]>} Schema the live form's fields per interface (wgattn.live.schema)
 * @typedef {Record<string, unknown>} Config
 * @typedef {{ kernel: string, config: Config }} LiveRequest
 * @typedef {"browser" | "pyodide" | "native"} Runtime
 * @typedef {{ timings?: import("./webgpu.js").Timings, skipped?: string, error?: string }} BrowserRun
 * @typedef {{ vendor?: string, architecture?: string, device?: string, description?: string,
 *   unavailable?: Record<string, string> }} NativeAdapter
 */

/**
 * The page's state: `page` and `schema` once Pyodide is ready (ReadyContext), `executor` while
 * the browser has a WebGPU device.
 * @typedef {{ gpu: import("./webgpu.js").Gpu | import("./webgpu.js").NoGpu | null,
 *   executor: Executor | null, page: WgattnPage | null, schema: Schema | null, kernels: KernelInfo[],
 *   availability: Record<string, string> }} Context
 * @typedef {Context & { page: WgattnPage, schema: Schema }} ReadyContext
 * @typedef {(text: string, kind?: string, action?: { id: string, label: string, onclick: () => void } | null,
 *   transient?: boolean) => void} ShowMessage
 */

/**
 * What the tests read: window.wgattn.
 * @typedef {{ adapter: import("./webgpu.js").AdapterInfo | null, native_adapter: NativeAdapter | null,
 *   python: string | null, runs: Array<Omit<LiveResult, "outputs" | "heads" | "naive_err" | "naive_f32_err" | "precision">>,
 *   first_result_ms: number | null, gpu_errors: string[] }} Results
 * @typedef {{ results: Results, run: (request: LiveRequest) => Promise<LiveResult>,
 *   runAll: (options?: { configs?: Record<string, Config> }) => Promise<{ cancelled: boolean, results: LiveResult[] }>,
 *   bench: import("./bench.js").BenchState, ctx: Context,
 *   benchRun: (request: import("./bench.js").BenchRequest) => Promise<BenchRecord[]>,
 *   decode: import("./bench.js").DecodeState,
 *   decodeBench: (request: Parameters<typeof runDecodeBench>[1]) => Promise<Array<Record<string, any>>>,
 *   conformance?: import("./conformance.js").GridSummary, precision?: import("./precision.js").ProbeState,
 *   pictures?: import("./pictures.js").PictureState }} PageState
 */

/** @type {Results} */
const results = { adapter: null, native_adapter: null, python: null, runs: [], first_result_ms: null, gpu_errors: [] };
/** @type {Context} */
const ctx = { gpu: null, executor: null, page: null, schema: null, kernels: [], availability: {} };
const live = { cancel: false, busy: false };
window.wgattn = { results, run: (request) => runOnce(request), runAll: (opts) => runAll(opts), bench: benchState, ctx,
  benchRun: (request) => runBench(ready(), request), decode: decodeState,
  decodeBench: (request) => runDecodeBench(ready(), request) };

/** The page's Python, or why there is none yet (a run asked for through window.wgattn too early).
 * @returns {ReadyContext} */
function ready() {
  if (!ctx.page || !ctx.schema) throw new Error("Pyodide is still loading: wait for the first result");
  return /** @type {ReadyContext} */ (ctx);
}

/** Show a message; a `transient` one (a failed run) goes away when the next run succeeds.
 * @type {ShowMessage} */
function showMessage(text, kind = "error", action = null, transient = false) {
  const box = $("message");
  box.hidden = false;
  box.className = kind;
  box.dataset.transient = transient ? "1" : "";
  box.textContent = text;
  if (action) {
    const button = document.createElement("button");
    button.type = "button";
    button.id = action.id;
    button.textContent = action.label;
    button.addEventListener("click", action.onclick);
    box.append(" ", button);
  }
}

/** An adapter's names for the runtime cards.
 * @param {import("./webgpu.js").AdapterInfo | NativeAdapter} info */
function describe(info) {
  return adapterWords(info).join(" · ") || "(no details)";
}

// What each optional feature gives the kernels, and how a browser that lacks it may get it.
const FEATURE_WORDS = /** @type {const} */ ([
  ["shader-f16", "f16 kernels", "Chrome offers it on GPUs with half precision (not on software renderers; "
    + "on Linux with NVIDIA only with --enable-unsafe-webgpu --enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia)"],
  ["subgroups", "subgroup kernels", "Chrome 134+ offers it on most GPUs"],
  ["chromium-experimental-subgroup-matrix", "subgroup-matrix kernels",
    "Chrome offers it behind chrome://flags/#enable-unsafe-webgpu (--enable-unsafe-webgpu) on GPUs with matrix units; "
    + "on Linux with NVIDIA its f16 configurations also need "
    + "--enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia (Dawn keeps f16 off there by default)"],
  ["timestamp-query", "GPU timings", "Chrome offers it on most GPUs"],
]);

/** What the browser's adapter offers the kernels, in words; for each feature it lacks, what would enable it.
 * @param {string[]} features
 * @param {unknown[]} matrices its subgroup matrix configurations */
function offers(features, matrices) {
  const has = FEATURE_WORDS.filter(([f]) => features.includes(f)).map(([f, what]) =>
    `${f} (${what}${f === "chromium-experimental-subgroup-matrix" ? `, ${matrices.length} configurations` : ""})`);
  const lacks = FEATURE_WORDS.filter(([f]) => !features.includes(f)).map(([f, , how]) => `${f}: ${how}`);
  return `Offers: ${has.join(", ") || "no optional feature"}.` + (lacks.length ? ` Lacks ${lacks.join("; ")}.` : "");
}

// --- WebGPU: open, report uncaptured errors, recover from device loss ------------------------

/** @param {string} message */
function onLost(message) {
  ctx.executor = null;
  results.adapter = null;
  document.body.dataset.gpu = "lost";
  $("browser-adapter").textContent = message;
  showMessage(`${message}. The browser runs are skipped until WebGPU starts again.`, "error",
    { id: "gpu-restart", label: "Start WebGPU again", onclick: () => startGpu().then(() => { $("message").hidden = true; }) });
}

// Plans are built for the browser's device (its features, limits and kind, as webgpu.js reports
// them); Python says which kernels it can run, and why not the others.
function syncTarget() {
  if (!ctx.page || !ctx.gpu || !ctx.gpu.target) return;
  ctx.page.use_target(JSON.stringify(ctx.gpu.target));
  ctx.availability = JSON.parse(ctx.page.availability());
  markKernels();
}

async function startGpu() {
  let gpu;
  try {
    gpu = await openDevice(onLost);
  } catch (e) {
    gpu = { error: `WebGPU device request failed: ${errorText(e)}` };
  }
  ctx.gpu = gpu;
  if (gpu.error !== undefined) {
    ctx.executor = null;
    $("browser-adapter").textContent = gpu.error;
    showMessage(`WebGPU is missing: ${gpu.error} The reference and the native run still go ahead.`, "info");
    document.body.dataset.gpu = "missing";
    return;
  }
  results.adapter = gpu.info;
  $("browser-adapter").textContent = describe(gpu.info);
  $("browser-offers").textContent = offers(gpu.info.features, gpu.target.subgroup_matrix_configs || []);
  ctx.executor = new Executor(gpu.device, gpu.info);
  syncTarget();
  // webgpu-samples' rule: an error nobody captured is shown, never swallowed (nor only logged).
  gpu.device.addEventListener("uncapturederror", (ev) => {
    ev.preventDefault();
    results.gpu_errors.push(ev.error.message);
    showMessage(`WebGPU error (uncaptured): ${ev.error.message}`);
  });
  document.body.dataset.gpu = "ready";
  markKernels();
}

// --- The live form: fields from wgattn.live's schema, state in the URL ------------------------

/** @param {string} id */
function kernelInfo(id) {
  return ctx.kernels.find((k) => k.id === id);
}

/** Why this browser cannot run the kernel ("" when it can), as Python answered (wgattn.target).
 * @param {KernelInfo} k */
function unavailable(k) {
  if (!ctx.executor) return "no WebGPU";
  return ctx.availability[k.id] || "";
}

function markKernels() {
  for (const opt of $("kernel", HTMLSelectElement).options) {
    const k = kernelInfo(opt.value);
    const why = k ? unavailable(k) : "";
    opt.textContent = k && why ? `${k.id} (browser: ${k.requires.length && ctx.executor ? "needs " + k.requires.join(", ") : why})` : opt.value;
    opt.title = why || (k ? k.summary : "");
  }
  describeKernel();
}

/** The chosen kernel's summary, why this browser cannot run it (amber), and its WGSL's link. */
function describeKernel() {
  const k = kernelInfo($("kernel", HTMLSelectElement).value);
  if (!k) return;
  const why = unavailable(k);
  $("kernel-summary").replaceChildren(k.summary, ...(why ? [" ", el("span", { class: "amber" }, `Not run in this browser: ${why}.`)] : []));
  $("kernel-wgsl", HTMLAnchorElement).href = `/shaders/${k.wgsl}`;
}

/** Load the chosen kernel's WGSL into the conformance view's editor, on its interface. */
async function editKernel() {
  const k = kernelInfo($("kernel", HTMLSelectElement).value);
  if (!k) return;
  const res = await fetch(`/shaders/${k.wgsl}`);
  if (!res.ok) throw new Error(`could not load ${k.wgsl}: HTTP ${res.status}`);
  $("grid-source", HTMLTextAreaElement).value = await res.text();
  $("grid-interface", HTMLSelectElement).value = k.interface;
  $("conformance").scrollIntoView({ block: "start" });
  $("grid-source").focus({ preventScroll: true });
}

/** @param {KernelInfo[]} kernels */
function fillKernels(kernels) {
  ctx.kernels = kernels;
  /** @type {Record<string, KernelInfo[]>} */
  const byIface = {};
  for (const k of kernels) (byIface[k.interface] = byIface[k.interface] || []).push(k);
  $("kernel").replaceChildren(...Object.entries(byIface).map(([iface, ks]) => el("optgroup", { label: iface },
    ...ks.map((k) => el("option", { value: k.id, title: k.summary }, k.id)))));
  markKernels();
}

/** The named fields of the live form (the selector says their classes). */
function fields() {
  const found = $("config-fields").querySelectorAll("input[name], select[name]");
  return [.../** @type {NodeListOf<HTMLInputElement | HTMLSelectElement>} */ (found)];
}

/** Build the fields of the kernel's interface: plain labels, bounds as min/max, what special values
 * mean beside the field, as Python declares them (wgattn.interfaces.config). Values come from
 * `values` (a URL's) or the defaults: a field never carries another kernel's value over.
 * @param {string} kernelId
 * @param {Record<string, string>} [values] */
function buildFields(kernelId, values = {}) {
  const k = kernelInfo(kernelId);
  if (!k) throw new Error(`unknown kernel ${kernelId}`);
  const box = $("config-fields");
  const rows = ready().schema[k.interface];
  if (!rows) throw new Error(`the live form has no fields for interface ${k.interface} (wgattn.live.schema)`);
  box.replaceChildren();
  for (const f of rows) {
    const label = document.createElement("label");
    const value = values[f.name] ?? String(f.default);
    let input;
    if (f.choices) {
      input = el("select", {}, ...f.choices.map((c) => new Option(c)));
      input.value = value;
    } else if (f.type === "bool") {
      input = el("input", { type: "checkbox" });
      input.checked = value === "true" || value === "1";
      label.className = "check";
    } else {
      // Bounds the browser shows; Python still checks every value (the form does not validate).
      input = el("input", { type: "number", step: f.type === "int" ? 1 : "any",
        min: f.type === "int" ? f.min : undefined, max: f.type === "int" ? f.max : undefined });
      input.value = value;
    }
    input.name = f.name;
    input.id = `field-${f.name}`;
    input.dataset.type = f.type;
    const bounds = f.min !== undefined && f.max !== undefined && f.type === "int" ? `${f.min} to ${f.max}` : "";
    const special = Object.entries(f.sentinels || {}).map(([v, meaning]) => `${v} = ${meaning}`);
    const hint = [...special, f.hint || ""].filter((x) => x).join("; ");
    input.title = [f.name, bounds, hint].filter((x) => x).join(": ");
    label.append(el("span", {}, f.label || f.name));
    if (f.type === "bool") label.append(el("span", { class: "row" }, input));
    else label.append(input);
    if (special.length) {
      const small = el("small", { class: "muted hint", id: `hint-${f.name}` }, special.join("; "));
      input.setAttribute("aria-describedby", small.id);
      label.append(small);
    }
    box.append(label);
  }
  describeKernel();
  showConfigLine();
}

/** The configuration in one line beside the folded form's summary. */
function showConfigLine() {
  $("config-line").textContent = fields().map((f) => `${f.name}=${f instanceof HTMLInputElement && f.type === "checkbox" ? f.checked : f.value}`).join(" ");
}

// --- Errors beside what caused them ------------------------------------------------------------

const STALE = ["verdict", "results", "pictures", "all-section"];

/** A run that did not start: its message next to Run, the fields it names marked, the results
 * of the previous run greyed (they no longer answer the form).
 * @param {string} text */
function showRunError(text) {
  const box = $("run-error");
  box.hidden = false;
  box.textContent = text;
  let marked = 0;
  for (const f of fields()) {
    if (new RegExp(`\\b${f.name}\\b`).test(text)) {
      f.setAttribute("aria-invalid", "true");
      f.setAttribute("aria-errormessage", "run-error");
      marked += 1;
    }
  }
  if (marked) $("config-details", HTMLDetailsElement).open = true;
  for (const id of STALE) $(id).classList.add("stale");
  box.scrollIntoView({ block: "nearest" });
}

function clearRunError() {
  $("run-error").hidden = true;
  for (const f of fields()) {
    f.removeAttribute("aria-invalid");
    f.removeAttribute("aria-errormessage");
  }
  for (const id of STALE) $(id).classList.remove("stale");
}

/** The request the form describes; Python checks every value (text that is no number goes as is).
 * @returns {LiveRequest} */
function requestFromForm() {
  /** @type {Config} */
  const config = {};
  for (const f of fields()) {
    const t = f.dataset.type;
    if (t === "bool" && f instanceof HTMLInputElement) config[f.name] = f.checked;
    else if ((t === "int" || t === "float") && f.value.trim() !== "" && Number.isFinite(Number(f.value))) config[f.name] = Number(f.value);
    else config[f.name] = f.value;
  }
  return { kernel: $("kernel", HTMLSelectElement).value, config };
}

/** The request a URL's query describes (config fields of any interface go to Python, which says
 * which do not apply); the default kernel when the URL names none. Keys are looked up in a Map:
 * in a plain object `constructor` or `toString` from the URL would find Object's own members.
 * @param {URLSearchParams} params
 * @returns {LiveRequest} */
function requestFromParams(params) {
  const kernel = params.get("kernel") || "sdpa_arena.seed";
  const all = Object.values(ready().schema).flat();
  const types = new Map(all.map((f) => [f.name, f.type]));
  /** @type {Config} */
  const config = {};
  for (const [k, v] of params) {
    const t = types.get(k);
    if (!t) continue;
    if (t === "bool") config[k] = ["1", "true", "on"].includes(v);
    else if ((t === "int" || t === "float") && v.trim() !== "" && Number.isFinite(Number(v))) config[k] = Number(v);
    else config[k] = v;
  }
  return { kernel, config };
}

/** The page's URL for `request` (and the pictures' choices, `extra`).
 * @param {LiveRequest} request
 * @param {Partial<Record<string, string | null>>} [extra] */
function urlFor(request, extra = {}) {
  const q = new URLSearchParams({ kernel: request.kernel });
  for (const [k, v] of Object.entries(request.config)) q.set(k, String(v));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null) q.set(k, String(v));
  return `${location.pathname}?${q}`;
}

// --- One live run -----------------------------------------------------------------------------

/** @param {boolean} pass */
const verdict = (pass) => /** @type {[string, string]} */ ([pass ? "PASS" : "FAIL", pass ? "pass" : "fail"]);

/** A live run's card: verdict, share link, every pair, every runtime.
 * @param {LiveResult} result */
function card(result) {
  const c = result.config;
  const cfg = Object.entries(c).map(([k, v]) => `${k}=${v}`).join(" ");
  const link = urlFor({ kernel: result.kernel, config: c });
  const [word, cls] = verdict(result.pass);
  const pairs = el("table", { class: "pairs", "aria-label": `${result.kernel}: pairs of runtimes` },
    row("th", [["runtimes", "l"], ["output", "l"], "max abs err", "allowance", "verdict"]),
    ...result.pairs.map((p) => row("td", [[`${p.a} ↔ ${p.b}`, "l"], [p.output, "l"], fmt(p.max_abs_err), fmt(p.allowance), verdict(p.pass)])));
  /** @type {Runtime[]} */
  const names = ["browser", "pyodide", "native"];
  const times = el("table", { "aria-label": `${result.kernel}: runtimes` }, row("th", [["runtime", "l"], ["status", "l"], "wall ms", "GPU ms"]),
    ...names.map((name) => {
      const r = result.runtimes[name];
      const t = r.timings || {};
      const wall = t.wall_ms ?? t.reference_ms;
      const status = r.ok ? "ok" : r.skipped ? el("span", { class: "skipped" }, `unavailable here: ${r.skipped}`) : el("span", { class: "fail" }, String(r.error));
      const tr = row("td", [[name, "l"], [status, "l"], wall === undefined ? "" : wall.toFixed(2), t.gpu_ms === undefined ? "" : t.gpu_ms.toFixed(3)]);
      tr.dataset.runtime = name;
      return tr;
    }));
  const yard = result.precision === "f16" ? "naive float16" : "naive float32";
  const note = el("p", { class: "muted" },
    `inputs sha256 ${result.digest.slice(0, 16)}…; ${yard} error ${Object.entries(result.naive_err).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}`);
  const run = el("div", { class: "run", "data-kernel": result.kernel, "data-pass": String(result.pass) },
    el("h3", {}, `${result.kernel} `, el("span", { class: cls }, word), " ",
      el("a", { class: "share", href: link, title: "reopen this run" }, "link")),
    el("p", { class: "muted cfg" }, cfg), el("div", { class: "scroll", tabindex: 0 }, pairs), el("div", { class: "scroll", tabindex: 0 }, times), note);
  return run;
}

// --- The verdict line: what agreed with what, in words -----------------------------------------

const WORDS = { browser: "your browser's WebGPU", pyodide: "the float64 reference (NumPy in this page)", native: "native wgpu-py on the server" };
const SHORT = { browser: "browser", pyodide: "reference", native: "native" };
/** @type {Runtime[]} */
const RUNTIMES = ["browser", "pyodide", "native"];

/** A pair's error as a multiple of its allowance (Infinity for "inf" or NaN).
 * @param {Pair} p */
function ratio(p) {
  const e = typeof p.max_abs_err === "number" ? p.max_abs_err : Infinity;
  const a = typeof p.allowance === "number" ? p.allowance : Infinity;
  return a > 0 ? e / a : e > 0 ? Infinity : 0;
}

/** "a, b and c"
 * @param {string[]} xs */
const and = (xs) => (xs.length < 2 ? xs.join("") : `${xs.slice(0, -1).join(", ")} and ${xs[xs.length - 1]}`);

/** A run's verdict: "pass" (every runtime ran, every pair agrees), "partial" (every pair that ran
 * agrees, but a runtime did not run: never counted as passing there) or "fail"; with its words.
 * @param {LiveResult} result
 * @returns {{ state: "pass" | "partial" | "fail", word: string, text: string, notes: string[], worst: number, unchecked: boolean }} */
function judge(result) {
  const ran = RUNTIMES.filter((n) => result.runtimes[n] && result.runtimes[n].ok);
  const notRun = RUNTIMES.filter((n) => !ran.includes(n));
  const failing = result.pairs.filter((p) => !p.pass);
  const worst = Math.max(0, ...result.pairs.map(ratio));
  const errored = RUNTIMES.some((n) => result.runtimes[n] && result.runtimes[n].error);
  // Fewer than two runtimes ran and none failed (the kernel needs what neither the browser nor the
  // server offers): nothing was compared, so "partial", never a pass, and not a failure either.
  const unchecked = ran.length < 2 && !errored && !failing.length;
  const state = unchecked ? "partial" : !result.pass || failing.length ? "fail" : notRun.length ? "partial" : "pass";
  const outputs = and(result.outputs);
  let text;
  if (failing.length) {
    text = and(failing.map((p) => `${SHORT[/** @type {Runtime} */ (p.a)]} and ${SHORT[/** @type {Runtime} */ (p.b)]} disagree on ` +
      `${p.output} (max |error| ${fmt(p.max_abs_err)}, allowed ${fmt(p.allowance)})`)) + ".";
  } else if (ran.length >= 2) {
    text = `${and(ran.map((n) => WORDS[n]))} agree on ${outputs}: the worst error is ${worst.toPrecision(2)}× its allowance.`;
  } else {
    text = `only ${and(ran.map((n) => WORDS[n])) || "no runtime"} ran: nothing to compare.`;
  }
  const notes = notRun.map((n) => {
    const r = result.runtimes[n] || { ok: false };
    return `Not run in ${WORDS[n]}: ${r.skipped || r.error || "no result"}` +
      (n === "browser" && state !== "fail" ? ". It does not count as passing in this browser." : ".");
  });
  const word = unchecked ? "NOT CHECKED HERE" : { pass: "PASS", partial: "PASS where it ran", fail: "FAIL" }[state];
  return { state, word, text, notes, worst, unchecked };
}

/** Show a verdict under the form: its word, a sentence, amber notes, a link to the details.
 * @param {"pass" | "partial" | "fail"} state
 * @param {Array<Node | string>} line
 * @param {string[]} notes
 * @param {string} scope "one" or "all" */
function showVerdict(state, line, notes, scope) {
  const box = $("verdict");
  box.dataset.state = state;
  box.dataset.scope = scope;
  box.replaceChildren(el("p", { id: "verdict-line" }, ...line), ...notes.map((n) => el("p", { class: "amber" }, n)));
}

/** The verdict of one run.
 * @param {LiveResult} result */
function verdictOf(result) {
  const v = judge(result);
  showVerdict(v.state, [el("span", { class: "word" }, v.word), `${result.kernel}: ${v.text} `,
    el("a", { href: "#results-section", class: "small" }, "details")], v.notes, "one");
}

/** The browser's part of a live run: what wgattn.page.finish expects as browser_json.
 * @param {WgattnPage} page
 * @param {LivePrepared} prepared
 * @returns {Promise<BrowserRun>} */
async function runBrowser(page, prepared) {
  if (!ctx.executor) return { skipped: ctx.gpu && ctx.gpu.error ? `no WebGPU: ${ctx.gpu.error}` : "no WebGPU (device lost: start it again)" };
  if (prepared.plan.unavailable) return { skipped: prepared.plan.unavailable };
  try {
    const out = await runPrepared(ctx.executor, page, prepared);
    return { timings: out.timings };
  } catch (e) {
    return { error: errorText(e) };
  }
}

/** The server's native run of the same configuration, as JSON text (an {error} when it has none).
 * @param {LiveRequest} request
 * @param {LivePrepared} prepared
 * @returns {Promise<string>} */
async function runNative(request, prepared) {
  const cannot = ((results.native_adapter || {}).unavailable || {})[request.kernel];
  if (cannot) return JSON.stringify({ skipped: cannot });  // the server said its adapter cannot run it
  try {
    const res = await fetch("/api/run", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ kernel: request.kernel, config: prepared.config }),
    });
    const text = await res.text();
    if (res.ok) return text;
    let detail = text;
    let unavailable = false;
    try {
      const body = JSON.parse(text);
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      unavailable = body.unavailable === true;
    } catch { /* not JSON: keep the text */ }
    // A kernel the server's adapter cannot run (a feature it lacks) is not run there, not failed.
    return JSON.stringify(unavailable ? { skipped: detail } : { error: `HTTP ${res.status}: ${detail}` });
  } catch (e) {
    return JSON.stringify({ error: `server unreachable: ${errorText(e)}` });
  }
}

/** One run across the three runtimes; resolves to the comparison, throws on bad input. Its card
 * goes on top of the details and its verdict under the form, unless `place` puts the card elsewhere.
 * @param {LiveRequest} request
 * @param {{ pictures?: boolean, place?: (card: HTMLElement, result: LiveResult) => void }} [options]
 * @returns {Promise<LiveResult>} */
async function runOnce(request, { pictures = true, place } = {}) {
  const { page } = ready();
  /** @type {LivePrepared} */
  let prepared;
  try {
    prepared = JSON.parse(page.prepare(JSON.stringify(request)));
  } catch (e) {
    throw new Error(`invalid configuration: ${pyError(e)}`);
  }
  // The browser and the server run at the same time; the reference runs in finish().
  const [browser, native] = await Promise.all([runBrowser(page, prepared), runNative(request, prepared)]);
  /** @type {LiveResult} */
  const result = JSON.parse(page.finish(prepared.run, JSON.stringify(browser), native));
  results.runs.push({
    kernel: result.kernel, interface: result.interface, config: result.config, digest: result.digest,
    pass: result.pass, runtimes: result.runtimes, run: result.run,
    pairs: result.pairs.map(({ a, b, output, max_abs_err, allowance, pass }) => ({ a, b, output, max_abs_err, allowance, pass })),
  });
  if (results.first_result_ms === null && result.pass) results.first_result_ms = performance.now();
  clearRunError();
  const made = card(result);
  if (place) {
    place(made, result);
  } else {
    const placeholder = document.getElementById("results-placeholder");
    if (placeholder) placeholder.remove();
    $("results").prepend(made);
    verdictOf(result);
  }
  if (pictures) showPictures(result);
  return result;
}

/** @param {LiveResult} result
 * @param {URLSearchParams} [params] the pictures' choices (head, output, pair) */
function showPictures(result, params = new URLSearchParams(location.search)) {
  try {
    drawPictures(ready().page, result, params, (picks) => history.replaceState(null, "", urlFor(
      { kernel: result.kernel, config: result.config }, picks)));
  } catch (e) {
    showMessage(`Could not draw the pictures: ${pyError(e)}`);
  }
}

/** What a kernel needs of the adapter, in words ("needs shader-f16"), or that it could not run.
 * @param {string} id */
function needs(id) {
  const k = kernelInfo(id);
  return k && k.requires.length ? `needs ${k.requires.join(", ")}` : "see its details";
}

/** A row of the every-kernel table and its folded details (the run's card); a failing row opens.
 * @param {HTMLElement} made
 * @param {LiveResult} result */
function allRow(made, result) {
  const v = judge(result);
  const browser = result.runtimes.browser || { ok: false };
  const more = el("tr", { class: "more", id: `more-${result.kernel}` }, el("td", { colspan: 5 }, made));
  more.hidden = v.state !== "fail";
  const toggle = el("button", { type: "button", class: "expand", "aria-expanded": String(!more.hidden), "aria-controls": more.id },
    `${more.hidden ? "▸" : "▾"} ${result.kernel}`);
  toggle.addEventListener("click", () => {
    more.hidden = !more.hidden;
    toggle.setAttribute("aria-expanded", String(!more.hidden));
    toggle.textContent = `${more.hidden ? "▸" : "▾"} ${result.kernel}`;
  });
  const ms = browser.timings && browser.timings.wall_ms !== undefined ? browser.timings.wall_ms.toFixed(1) : "";
  const tr = el("tr", { "data-kernel": result.kernel, "data-state": v.state },
    el("td", { class: "l" }, toggle),
    el("td", { class: `l ${v.state === "pass" ? "pass" : v.state === "fail" ? "fail" : "skipped"}` }, v.word),
    el("td", { class: "l" }, browser.ok ? "ran" : el("span", { class: "skipped" }, browser.skipped ? `not run: ${needs(result.kernel)}` : "error")),
    el("td", {}, Number.isFinite(v.worst) ? `${v.worst.toPrecision(2)}×` : "∞"), el("td", {}, ms));
  $("all-table").append(tr, more);
}

/** The live check of every registered kernel on its interface's default configuration (or
 * `configs[interface]`), one after the other, into one table whose rows expand; progress shown,
 * cancellable between kernels. The verdict says how many passed in all three runtimes, and
 * which ran only natively.
 * @param {{ configs?: Record<string, Config> }} [options] */
async function runAll({ configs = {} } = {}) {
  live.cancel = false;
  const kernels = ctx.kernels;
  const bar = $("live-progress", HTMLProgressElement);
  bar.hidden = false;
  bar.max = kernels.length;
  $("live-cancel").hidden = false;
  $("all-section").hidden = false;
  $("all-table").replaceChildren(row("th", [["kernel", "l"], ["verdict", "l"], ["browser", "l"], "worst error / allowance", "browser ms"]));
  /** @type {LiveResult[]} */
  const done = [];
  try {
    for (let i = 0; i < kernels.length; i++) {
      if (live.cancel) {
        $("live-status").textContent = `cancelled after ${i} of ${kernels.length} kernels`;
        return { cancelled: true, results: done };
      }
      const k = kernels[i];
      $("live-status").textContent = `kernel ${i + 1} of ${kernels.length}: ${k.id}`;
      bar.value = i;
      done.push(await runOnce({ kernel: k.id, config: configs[k.interface] || {} },
        { pictures: i === kernels.length - 1, place: allRow }));
    }
    bar.value = kernels.length;
    $("live-status").textContent = "";
    const verdicts = done.map((r) => ({ r, v: judge(r) }));
    const of = (/** @type {string} */ st) => verdicts.filter((x) => x.v.state === st).map((x) => x.r.kernel);
    const [passed, partial, failed] = [of("pass"), of("partial"), of("fail")];
    const unchecked = verdicts.filter((x) => x.v.unchecked).map((x) => x.r.kernel);
    const native = partial.filter((k) => !unchecked.includes(k));
    const state = failed.length ? "fail" : partial.length ? "partial" : "pass";
    const line = `${passed.length} of ${done.length} kernels pass in all three runtimes` +
      (failed.length ? `; failing: ${failed.join(", ")}` : "") + ".";
    const notes = [];
    if (native.length) notes.push(`${native.length} not run in this browser, checked only between the reference and native ` +
      `wgpu-py (not counted as passing here): ${native.join(", ")}.`);
    if (unchecked.length) notes.push(`${unchecked.length} not checked here: neither this browser nor the server's adapter ` +
      `can run ${unchecked.length > 1 ? "them" : "it"} (its details say what each lacks): ${unchecked.join(", ")}.`);
    showVerdict(state, [el("span", { class: "word" }, { pass: "PASS", partial: "PASS where it ran", fail: "FAIL" }[state]), line], notes, "all");
    return { cancelled: false, results: done };
  } finally {
    $("live-cancel").hidden = true;
    bar.hidden = true;
  }
}

/** Run `fn` unless a run is going; the run buttons are disabled meanwhile.
 * @param {() => Promise<unknown>} fn */
async function busy(fn) {
  if (live.busy) return;
  live.busy = true;
  enableRuns(false);
  document.body.dataset.status = "running";
  try {
    await fn();
    if ($("message").dataset.transient) $("message").hidden = true;
    document.body.dataset.status = "done";
  } catch (e) {
    showRunError(errorText(e));
    document.body.dataset.status = "error";
  } finally {
    live.busy = false;
    enableRuns(true);
  }
}

/** @param {boolean} on */
function enableRuns(on) {
  for (const id of ["run", "run-all"]) $(id, HTMLButtonElement).disabled = !on;
}

async function main() {
  // The native adapter and kernel list come from the server while the page sets itself up.
  /** @type {Promise<NativeAdapter>} */
  const nativeInfo = fetch("/api/adapter").then(async (r) => {
    const body = await r.json();
    if (!r.ok) throw new Error(body.detail);
    return body;
  });
  const registry = fetch("/api/kernels").then((r) => r.json());
  await startGpu();
  nativeInfo.then((info) => {
    results.native_adapter = info;
    $("native-adapter").textContent = describe(info);
  }, (e) => { $("native-adapter").textContent = `unavailable: ${errorText(e)}`; });

  const python = await loadPython(showProgress);
  ctx.page = python.page;
  syncTarget();
  results.python = python.version;
  ctx.schema = JSON.parse(python.page.live_schema());
  const now = ready();
  /** @type {Catalogue} */
  const reg = await registry;
  fillKernels(reg.kernels);

  const params = new URLSearchParams(location.search);
  const first = requestFromParams(params);
  if (!kernelInfo(first.kernel)) throw new Error(`unknown kernel ${first.kernel} in the URL; registered: ${ctx.kernels.map((k) => k.id).join(", ")}`);
  const kernel = $("kernel", HTMLSelectElement);
  kernel.value = first.kernel;
  buildFields(first.kernel, Object.fromEntries(Object.entries(first.config).map(([k, v]) => [k, String(v)])));
  kernel.addEventListener("change", () => buildFields(kernel.value));
  $("config-fields").addEventListener("input", showConfigLine);
  // Wide screens show the configuration; phones fold it (the verdict must stay in view).
  $("config-details", HTMLDetailsElement).open = matchMedia("(min-width: 60rem)").matches;
  $("kernel-wgsl").addEventListener("click", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;  // a new tab shows the file itself
    ev.preventDefault();
    editKernel().catch((e) => showRunError(errorText(e)));
  });
  await nativeInfo.catch(() => null);
  // A bad configuration in the URL is a message; the rest of the page still works.
  let firstError = null;
  try {
    await runOnce(first);
  } catch (e) {
    firstError = e;
    showRunError(errorText(e));
    showVerdict("fail", [el("span", { class: "word" }, "NOT RUN"), "the configuration in the URL is not valid: see the message above."], [], "one");
  }
  enableRuns(true);
  setupConformance(now, Object.keys(reg.interfaces));
  $("grid-run", HTMLButtonElement).disabled = false;
  // The benchmark runs only on its Run button, or at once with ?bench=OP in the URL (after the
  // first run, which it would otherwise slow down); main() does not wait for it.
  setupBench(now, params);
  runProbe(now);  // the built-ins' precision, browser and native; sets #precision's data-status
  $("config").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const request = requestFromForm();
    busy(async () => {
      const r = await runOnce(request);
      history.replaceState(null, "", urlFor({ kernel: r.kernel, config: r.config }));
      $("verdict").scrollIntoView({ block: "nearest" });  // the new result, in view
    });
  });
  $("run-all").addEventListener("click", () => busy(async () => {
    await runAll();
    $("verdict").scrollIntoView({ block: "nearest" });
  }));
  $("live-cancel").addEventListener("click", () => { live.cancel = true; });
  if (firstError) throw firstError;
}

// A message already shown (a bad URL's, say) says more than this one.
runPage(main, (why) => { if ($("message").hidden && $("run-error").hidden) showMessage(`The page stopped: ${why}`); });
