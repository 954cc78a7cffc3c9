// The page: the live check of any registered kernel (browser WebGPU, the float64 reference under
// Pyodide, the server's native wgpu-py run, every pair on every output), with pictures of the run,
// the conformance grid and the benchmark. Python (wgattn.page under Pyodide) builds every plan and
// makes every judgement; this module moves bytes and draws.
// Tests read window.wgattn.results and document.body.dataset.status ("done" or "error").
import { Executor, openDevice, runPrepared } from "./webgpu.js";
import { loadPython } from "./python.js";
import { setupConformance } from "./conformance.js";
import { benchState, setupBench } from "./bench.js";
import { runProbe } from "./precision.js";
import { drawPictures } from "./pictures.js";

const $ = (id) => document.getElementById(id);
const results = { adapter: null, native_adapter: null, python: null, runs: [], first_result_ms: null, gpu_errors: [] };
const ctx = { gpu: null, executor: null, page: null, schema: null, kernels: [] };
const live = { cancel: false, busy: false };
window.wgattn = { results, run: (request) => runOnce(request), runAll: (opts) => runAll(opts), bench: benchState, ctx };

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

/** Show a message; a `transient` one (a failed run) goes away when the next run succeeds. */
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

/** The readable part of a Python exception raised through Pyodide (its last line). */
function pyError(e) {
  const lines = String(e && e.message ? e.message : e).trim().split("\n");
  return lines[lines.length - 1].replace(/^ValueError: /, "");
}

function describe(info) {
  return [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" · ") || "(no details)";
}

const fmt = (x) => (typeof x === "number" ? x.toExponential(2) : String(x));

// --- WebGPU: open, report uncaptured errors, recover from device loss ------------------------

function onLost(message) {
  ctx.executor = null;
  results.adapter = null;
  document.body.dataset.gpu = "lost";
  $("browser-adapter").textContent = message;
  showMessage(`${message}. The browser runs are skipped until WebGPU starts again.`, "error",
    { id: "gpu-restart", label: "Start WebGPU again", onclick: () => startGpu().then(() => { $("message").hidden = true; }) });
}

// Plans are built for the browser's device: tile shapes fit its workgroup storage and invocations.
function syncLimits() {
  if (!ctx.page || !ctx.gpu || !ctx.gpu.limits) return;
  // A software adapter (SwiftShader, lavapipe) runs invocations as CPU lanes: other tiles win there.
  const cpu = /swiftshader|llvmpipe|lavapipe/i.test(`${ctx.gpu.info.architecture} ${ctx.gpu.info.description} ${ctx.gpu.info.device}`);
  ctx.page.use_limits(JSON.stringify({ ...ctx.gpu.limits, cpu }));
}

async function startGpu() {
  try {
    ctx.gpu = await openDevice(onLost);
  } catch (e) {
    ctx.gpu = { error: `WebGPU device request failed: ${e.message}` };
  }
  if (ctx.gpu.error) {
    ctx.executor = null;
    $("browser-adapter").textContent = ctx.gpu.error;
    showMessage(`WebGPU is missing: ${ctx.gpu.error} The reference and the native run still go ahead.`, "info");
    document.body.dataset.gpu = "missing";
    return;
  }
  results.adapter = ctx.gpu.info;
  $("browser-adapter").textContent = describe(ctx.gpu.info) + ` — features: ${ctx.gpu.info.features.join(", ") || "none"}`;
  ctx.executor = new Executor(ctx.gpu.device);
  syncLimits();
  // webgpu-samples' rule: an error nobody captured is shown, never swallowed (nor only logged).
  ctx.gpu.device.addEventListener("uncapturederror", (ev) => {
    ev.preventDefault();
    results.gpu_errors.push(ev.error.message);
    showMessage(`WebGPU error (uncaptured): ${ev.error.message}`);
  });
  document.body.dataset.gpu = "ready";
  markKernels();
}

// --- The live form: fields from wgattn.live's schema, state in the URL ------------------------

const PICTURE_PARAMS = ["head", "output", "pair"];

function kernelInfo(id) {
  return ctx.kernels.find((k) => k.id === id);
}

/** Why this browser cannot run the kernel ("" when it can). */
function unavailable(k) {
  if (!ctx.executor) return "no WebGPU";
  const missing = k.requires.filter((f) => !ctx.gpu.info.features.includes(f));
  return missing.length ? `needs ${missing.join(", ")}, which this browser's adapter lacks` : "";
}

function markKernels() {
  for (const opt of $("kernel").options) {
    const k = kernelInfo(opt.value);
    const why = k ? unavailable(k) : "";
    opt.textContent = why ? `${k.id} (browser: ${why.startsWith("needs") ? "needs " + k.requires.join(", ") : why})` : opt.value;
  }
}

function fillKernels(kernels) {
  ctx.kernels = kernels;
  const byIface = {};
  for (const k of kernels) (byIface[k.interface] = byIface[k.interface] || []).push(k);
  $("kernel").innerHTML = Object.entries(byIface).map(([iface, ks]) => `<optgroup label="${esc(iface)}">` +
    ks.map((k) => `<option value="${esc(k.id)}" title="${esc(k.summary)}">${esc(k.id)}</option>`).join("") + "</optgroup>").join("");
  markKernels();
}

/** Build the fields of the kernel's interface, keeping values of fields that stay. */
function buildFields(kernelId, values = {}) {
  const k = kernelInfo(kernelId);
  const box = $("config-fields");
  const old = Object.fromEntries([...box.querySelectorAll("[name]")].map((el) => [el.name, el.type === "checkbox" ? String(el.checked) : el.value]));
  const rows = ctx.schema[k.interface];
  box.innerHTML = "";
  for (const f of rows) {
    const label = document.createElement("label");
    const value = values[f.name] ?? old[f.name] ?? String(f.default);
    let input;
    if (f.choices) {
      input = document.createElement("select");
      input.innerHTML = f.choices.map((c) => `<option>${esc(c)}</option>`).join("");
      input.value = value;
    } else if (f.type === "bool") {
      input = document.createElement("input");
      input.type = "checkbox";
      input.checked = value === true || value === "true" || value === "1";
      label.className = "check";
    } else {
      input = document.createElement("input");
      input.type = "text";
      input.inputMode = "decimal";
      input.size = 7;
      input.value = value;
    }
    input.name = f.name;
    input.dataset.type = f.type;
    label.append(Object.assign(document.createElement("span"), { textContent: f.name }), input);
    box.append(label);
  }
}

/** The request the form describes; Python checks every value (text that is no number goes as is). */
function requestFromForm() {
  const config = {};
  for (const el of $("config-fields").querySelectorAll("[name]")) {
    const t = el.dataset.type;
    if (t === "bool") config[el.name] = el.checked;
    else if ((t === "int" || t === "float") && el.value.trim() !== "" && Number.isFinite(Number(el.value))) config[el.name] = Number(el.value);
    else config[el.name] = el.value;
  }
  return { kernel: $("kernel").value, config };
}

/** The request a URL's query describes (config fields of any interface go to Python, which says
 * which do not apply); null when the URL names no configuration. */
function requestFromParams(params) {
  const kernel = params.get("kernel") || "sdpa_arena.seed";
  const known = new Set(Object.values(ctx.schema).flat().map((f) => f.name));
  const types = Object.fromEntries(Object.values(ctx.schema).flat().map((f) => [f.name, f.type]));
  const config = {};
  for (const [k, v] of params) {
    if (!known.has(k)) continue;
    const t = types[k];
    if (t === "bool") config[k] = ["1", "true", "on"].includes(v);
    else if ((t === "int" || t === "float") && v.trim() !== "" && Number.isFinite(Number(v))) config[k] = Number(v);
    else config[k] = v;
  }
  return { kernel, config };
}

function urlFor(request, extra = {}) {
  const q = new URLSearchParams({ kernel: request.kernel });
  for (const [k, v] of Object.entries(request.config)) q.set(k, String(v));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null) q.set(k, String(v));
  return `${location.pathname}?${q}`;
}

// --- One live run -----------------------------------------------------------------------------

function render(result) {
  const run = document.createElement("div");
  run.className = "run";
  run.dataset.kernel = result.kernel;
  run.dataset.pass = String(result.pass);
  const c = result.config;
  const cfg = Object.entries(c).map(([k, v]) => `${k}=${v}`).join(" ");
  const link = urlFor({ kernel: result.kernel, config: c });
  run.innerHTML = `<h3>${esc(result.kernel)} <span class="${result.pass ? "pass" : "fail"}">${result.pass ? "PASS" : "FAIL"}</span>
    <a class="share" href="${esc(link)}" title="reopen this run">link</a></h3><p class="muted cfg">${esc(cfg)}</p>`;
  const pairs = document.createElement("table");
  pairs.className = "pairs";
  pairs.innerHTML = "<tr><th class=l>runtimes</th><th class=l>output</th><th>max abs err</th><th>allowance</th><th>verdict</th></tr>" +
    result.pairs.map((p) => `<tr><td class=l>${p.a} ↔ ${p.b}</td><td class=l>${p.output}</td><td>${fmt(p.max_abs_err)}</td>
      <td>${fmt(p.allowance)}</td><td class="${p.pass ? "pass" : "fail"}">${p.pass ? "PASS" : "FAIL"}</td></tr>`).join("");
  const times = document.createElement("table");
  times.innerHTML = "<tr><th class=l>runtime</th><th class=l>status</th><th>wall ms</th><th>GPU ms</th></tr>" +
    ["browser", "pyodide", "native"].map((name) => {
      const r = result.runtimes[name];
      const t = r.timings || {};
      const wall = t.wall_ms ?? t.reference_ms;
      const status = r.ok ? "ok" : r.skipped ? `<span class="skipped">unavailable here: ${esc(r.skipped)}</span>` : `<span class=fail>${esc(r.error)}</span>`;
      return `<tr data-runtime="${name}"><td class=l>${name}</td><td class=l>${status}</td>
        <td>${wall === undefined ? "" : wall.toFixed(2)}</td><td>${t.gpu_ms === undefined ? "" : t.gpu_ms.toFixed(3)}</td></tr>`;
    }).join("");
  run.append(pairs, times);
  const note = document.createElement("p");
  note.className = "muted";
  const yard = result.precision === "f16" ? "naive float16" : "naive float32";
  note.textContent = `inputs sha256 ${result.digest.slice(0, 16)}…; ${yard} error ${Object.entries(result.naive_err).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}`;
  run.append(note);
  const placeholder = $("results-placeholder");
  if (placeholder) placeholder.remove();
  $("results").prepend(run);
}

async function runBrowser(prepared) {
  const page = ctx.page;
  if (!ctx.executor) return { skipped: ctx.gpu && ctx.gpu.error ? `no WebGPU: ${ctx.gpu.error}` : "no WebGPU (device lost: start it again)" };
  const why = ctx.executor.check(prepared.plan);
  if (why) return { skipped: why };
  try {
    const out = await runPrepared(ctx.executor, page, prepared);
    return { timings: out.timings };
  } catch (e) {
    return { error: String(e.message || e) };
  }
}

async function runNative(request, prepared) {
  try {
    const res = await fetch("/api/run", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ kernel: request.kernel, config: prepared.config }),
    });
    const text = await res.text();
    if (res.ok) return text;
    let detail = text;
    try { detail = JSON.stringify(JSON.parse(text).detail); } catch (e) { /* not JSON: keep the text */ }
    return JSON.stringify({ error: `HTTP ${res.status}: ${detail}` });
  } catch (e) {
    return JSON.stringify({ error: `server unreachable: ${e.message}` });
  }
}

/** One run across the three runtimes; resolves to the comparison, throws on bad input. */
async function runOnce(request, { pictures = true } = {}) {
  const page = ctx.page;
  let prepared;
  try {
    prepared = JSON.parse(page.prepare(JSON.stringify(request)));
  } catch (e) {
    throw new Error(`invalid configuration: ${pyError(e)}`);
  }
  // The browser and the server run at the same time; the reference runs in finish().
  const [browser, native] = await Promise.all([runBrowser(prepared), runNative(request, prepared)]);
  const result = JSON.parse(page.finish(prepared.run, JSON.stringify(browser), native));
  results.runs.push({
    kernel: result.kernel, interface: result.interface, config: result.config, digest: result.digest,
    pass: result.pass, runtimes: result.runtimes, run: result.run,
    pairs: result.pairs.map(({ a, b, output, max_abs_err, allowance, pass }) => ({ a, b, output, max_abs_err, allowance, pass })),
  });
  if (results.first_result_ms === null && result.pass) results.first_result_ms = performance.now();
  render(result);
  if (pictures) showPictures(result);
  return result;
}

function showPictures(result, params = new URLSearchParams(location.search)) {
  try {
    drawPictures(ctx.page, result, params, (picks) => history.replaceState(null, "", urlFor(
      { kernel: result.kernel, config: result.config }, picks)));
  } catch (e) {
    showMessage(`Could not draw the pictures: ${pyError(e)}`);
  }
}

/** The live check of every registered kernel on its interface's default configuration (or
 * `configs[interface]`), one after the other; progress shown, cancellable between kernels. */
async function runAll({ configs = {} } = {}) {
  live.cancel = false;
  const kernels = ctx.kernels;
  const bar = $("live-progress");
  bar.hidden = false;
  bar.max = kernels.length;
  $("live-cancel").hidden = false;
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
      done.push(await runOnce({ kernel: k.id, config: configs[k.interface] || {} }, { pictures: i === kernels.length - 1 }));
    }
    bar.value = kernels.length;
    const failed = done.filter((r) => !r.pass).map((r) => r.kernel);
    $("live-status").textContent = `${done.length - failed.length} of ${done.length} kernels pass` + (failed.length ? `; failing: ${failed.join(", ")}` : "");
    return { cancelled: false, results: done };
  } finally {
    $("live-cancel").hidden = true;
  }
}

async function busy(fn) {
  if (live.busy) return;
  live.busy = true;
  $("run").disabled = true;
  $("run-all").disabled = true;
  document.body.dataset.status = "running";
  try {
    await fn();
    if ($("message").dataset.transient) $("message").hidden = true;
    document.body.dataset.status = "done";
  } catch (e) {
    showMessage(e.message, "error", null, true);
    document.body.dataset.status = "error";
  } finally {
    live.busy = false;
    $("run").disabled = false;
    $("run-all").disabled = false;
  }
}

async function main() {
  // The native adapter and kernel list come from the server while the page sets itself up.
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
  }, (e) => { $("native-adapter").textContent = `unavailable: ${e.message}`; });

  const python = await loadPython((step, total, text) => {
    $("py-progress").value = step;
    $("py-progress").max = total;
    $("py-status").textContent = text;
  });
  ctx.page = python.page;
  syncLimits();
  results.python = python.version;
  ctx.schema = JSON.parse(ctx.page.live_schema());
  const reg = await registry;
  fillKernels(reg.kernels);

  const params = new URLSearchParams(location.search);
  const first = requestFromParams(params);
  if (!kernelInfo(first.kernel)) throw new Error(`unknown kernel ${first.kernel} in the URL; registered: ${ctx.kernels.map((k) => k.id).join(", ")}`);
  $("kernel").value = first.kernel;
  buildFields(first.kernel, Object.fromEntries(Object.entries(first.config).map(([k, v]) => [k, String(v)])));
  $("kernel").addEventListener("change", () => buildFields($("kernel").value));
  await nativeInfo.catch(() => null);
  // A bad configuration in the URL is a message; the rest of the page still works.
  let firstError = null;
  try {
    await runOnce(first);
  } catch (e) {
    firstError = e;
    showMessage(e.message, "error", null, true);
  }
  $("run").disabled = false;
  $("run-all").disabled = false;
  setupConformance(ctx, Object.keys(reg.interfaces), showMessage);
  $("grid-run").disabled = false;
  // The benchmark runs only on its Run button, or at once with ?bench=OP in the URL (after the
  // first run, which it would otherwise slow down); main() does not wait for it.
  setupBench(ctx, params);
  runProbe(ctx);  // the built-ins' precision, browser and native; sets #precision's data-status
  $("config").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const request = requestFromForm();
    busy(async () => {
      const r = await runOnce(request);
      history.replaceState(null, "", urlFor({ kernel: r.kernel, config: r.config }));
    });
  });
  $("run-all").addEventListener("click", () => busy(() => runAll()));
  $("live-cancel").addEventListener("click", () => { live.cancel = true; });
  if (firstError) throw firstError;
}

main().then(
  () => { document.body.dataset.status = "done"; },
  (e) => {
    if ($("message").hidden) showMessage(`The page stopped: ${e.message}`);
    document.body.dataset.status = "error";
  },
);
