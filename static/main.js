// The demo: run a kernel in this browser's WebGPU, compute the reference under Pyodide, fetch the
// server's native wgpu-py result, and show every pair of runtimes against the tolerance rule.
// Tests read window.wgattn.results and document.body.dataset.status ("done" or "error").
import { Executor, openDevice } from "./webgpu.js";
import { loadPython } from "./python.js";
import { setupConformance } from "./conformance.js";
import { benchState, setupBench } from "./bench.js";
import { runProbe } from "./precision.js";

const $ = (id) => document.getElementById(id);
const NUMERIC = ["batch", "heads", "seq_q", "seq_k", "head_dim", "window", "seed"];
const results = { adapter: null, native_adapter: null, python: null, runs: [] };
const ctx = { gpu: null, executor: null, page: null };
window.wgattn = { results, run: (request) => runOnce(request), bench: benchState };

function showMessage(text, kind = "error") {
  const box = $("message");
  box.hidden = false;
  box.className = kind;
  box.textContent = text;
}

/** The readable part of a Python exception raised through Pyodide (its last line). */
function pyError(e) {
  const lines = String(e && e.message ? e.message : e).trim().split("\n");
  return lines[lines.length - 1];
}

function describe(info) {
  return [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" · ") || "(no details)";
}

function requestFrom(params) {
  const config = {};
  for (const [k, v] of params) {
    if (k === "kernel") continue;
    config[k] = NUMERIC.includes(k) ? Number(v) : v;
  }
  return { kernel: params.get("kernel") || $("kernel").value || "sdpa_arena.seed", config };
}

function fmt(x) {
  return typeof x === "number" ? x.toExponential(2) : String(x);
}

function render(result) {
  const run = document.createElement("div");
  run.className = "run";
  const c = result.config;
  run.innerHTML = `<h3>${result.kernel} — B=${c.batch} H=${c.heads} Sq=${c.seq_q} Sk=${c.seq_k} D=${c.head_dim}
    ${c.layout} mask=${c.mask}${c.mask === "window" ? ` (${c.window})` : ""} seed=${c.seed}
    <span class="${result.pass ? "pass" : "fail"}">${result.pass ? "PASS" : "FAIL"}</span></h3>`;
  const pairs = document.createElement("table");
  pairs.className = "pairs";
  pairs.innerHTML = "<tr><th class=l>runtimes</th><th class=l>output</th><th>max abs err</th><th>allowance</th><th>verdict</th></tr>" +
    result.pairs.map((p) => `<tr><td class=l>${p.a} ↔ ${p.b}</td><td class=l>${p.output}</td><td>${fmt(p.max_abs_err)}</td>
      <td>${fmt(p.allowance)}</td><td class="${p.pass ? "pass" : "fail"}">${p.pass ? "PASS" : "FAIL"}</td></tr>`).join("");
  const times = document.createElement("table");
  times.innerHTML = "<tr><th class=l>runtime</th><th class=l>status</th><th>wall ms</th><th>GPU ms</th></tr>" +
    Object.entries(result.runtimes).map(([name, r]) => {
      const t = r.timings || {};
      const wall = t.wall_ms ?? t.reference_ms;
      const status = r.ok ? "ok" : r.skipped ? `<span class=muted>skipped: ${r.skipped}</span>` : `<span class=fail>${r.error}</span>`;
      return `<tr><td class=l>${name}</td><td class=l>${status}</td>
        <td>${wall === undefined ? "" : wall.toFixed(2)}</td><td>${t.gpu_ms === undefined ? "" : t.gpu_ms.toFixed(3)}</td></tr>`;
    }).join("");
  run.append(pairs, times);
  const note = document.createElement("p");
  note.className = "muted";
  note.textContent = `inputs sha256 ${result.digest.slice(0, 16)}…; naive float32 error ${Object.entries(result.naive_f32_err).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}`;
  run.append(note);
  const placeholder = $("results-placeholder");
  if (placeholder) placeholder.remove();
  $("results").prepend(run);
}

/** One run across the three runtimes; resolves to the comparison, throws on bad input. */
async function runOnce(request) {
  const page = ctx.page;
  let prepared;
  try {
    prepared = JSON.parse(page.prepare(JSON.stringify(request)));
  } catch (e) {
    throw new Error(`invalid configuration: ${pyError(e)}`);
  }
  const id = prepared.run;
  let browser = { skipped: ctx.gpu && ctx.gpu.error ? `no WebGPU: ${ctx.gpu.error}` : "no WebGPU" };
  if (ctx.executor) {
    try {
      const out = await ctx.executor.run(prepared.plan, (name) => {
        const proxy = page.plan_bytes(id, name);
        const bytes = proxy.toJs();
        proxy.destroy();
        return bytes;
      });
      for (const [name, bytes] of Object.entries(out.raw)) page.add_buffer(id, name, bytes);
      browser = { timings: out.timings };
    } catch (e) {
      browser = { error: String(e.message || e) };
    }
  }
  let native;
  try {
    const res = await fetch("/api/run", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ kernel: request.kernel, config: prepared.config }),
    });
    const text = await res.text();
    native = res.ok ? text : JSON.stringify({ error: `HTTP ${res.status}: ${JSON.stringify(JSON.parse(text).detail)}` });
  } catch (e) {
    native = JSON.stringify({ error: `server unreachable: ${e.message}` });
  }
  const result = JSON.parse(page.finish(id, JSON.stringify(browser), native));
  results.runs.push({
    kernel: result.kernel, config: result.config, pass: result.pass, runtimes: result.runtimes,
    pairs: result.pairs.map(({ a, b, output, max_abs_err, allowance, pass }) => ({ a, b, output, max_abs_err, allowance, pass })),
  });
  render(result);
  return result;
}

async function main() {
  // The native adapter and kernel list come from the server while the page sets itself up.
  const nativeInfo = fetch("/api/adapter").then(async (r) => {
    const body = await r.json();
    if (!r.ok) throw new Error(body.detail);
    return body;
  });
  const registry = fetch("/api/kernels").then((r) => r.json());
  registry.then(({ kernels }) => {
    // The demo form drives sdpa_arena kernels; the conformance view covers every interface.
    $("kernel").innerHTML = kernels.filter((k) => k.interface === "sdpa_arena")
      .map((k) => `<option value="${k.id}" title="${k.summary}">${k.id}</option>`).join("");
  });

  try {
    ctx.gpu = await openDevice((msg) => showMessage(msg));
  } catch (e) {
    ctx.gpu = { error: `WebGPU device request failed: ${e.message}` };
  }
  if (ctx.gpu.error) {
    $("browser-adapter").textContent = ctx.gpu.error;
    showMessage(`WebGPU is missing: ${ctx.gpu.error} The reference and the native run still go ahead.`, "info");
  } else {
    results.adapter = ctx.gpu.info;
    $("browser-adapter").textContent = describe(ctx.gpu.info) + ` — features: ${ctx.gpu.info.features.join(", ") || "none"}`;
    ctx.executor = new Executor(ctx.gpu.device);
    ctx.gpu.device.addEventListener("uncapturederror", (ev) => showMessage(`WebGPU error: ${ev.error.message}`));
  }
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
  results.python = python.version;

  const params = new URLSearchParams(location.search);
  const form = $("config");
  for (const [k, v] of params) if (form.elements[k]) form.elements[k].value = v;
  const first = requestFrom(new URLSearchParams(new FormData(form)));
  await nativeInfo.catch(() => null);
  await runOnce(first);
  $("run").disabled = false;
  setupConformance(ctx, Object.keys((await registry).interfaces), showMessage);
  $("grid-run").disabled = false;
  // The benchmark runs only on its Run button, or at once with ?bench=OP in the URL (after the
  // demo's first run, which it would otherwise slow down); main() does not wait for it.
  setupBench(ctx, params);
  runProbe(ctx);  // the built-ins' precision, browser and native; sets #precision's data-status
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("run").disabled = true;
    document.body.dataset.status = "running";
    try {
      await runOnce(requestFrom(new URLSearchParams(new FormData(form))));
      $("message").hidden = true;
      document.body.dataset.status = "done";
    } catch (e) {
      showMessage(e.message);
      document.body.dataset.status = "error";
    } finally {
      $("run").disabled = false;
    }
  });
}

main().then(
  () => { document.body.dataset.status = "done"; },
  (e) => {
    showMessage(`The demo stopped: ${e.message}`);
    document.body.dataset.status = "error";
  },
);
