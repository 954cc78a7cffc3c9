// The precision probe in the page: measures this browser's WebGPU built-ins (exp, log, tanh,
// division, ...) against float64, beside the server's native adapter (GET /api/adapter carries
// its probe). Python (under Pyodide, wgattn.precision) builds the plan and judges; this module
// only executes and draws. Publishes window.wgattn.precision = {browser, native, error?}; the
// section's data-status becomes "done" or "error".

import { runPrepared } from "./webgpu.js";

const $ = (id) => document.getElementById(id);

function section() {
  let s = $("precision");
  if (!s) {
    s = document.createElement("section");
    s.id = "precision";
    s.innerHTML = `<h2>Precision of built-ins</h2>
      <p class="muted">The worst error of each floating-point built-in the kernels use, on the
        arguments they feed it, against float64 (in ulps of the exact result, and absolute). WGSL lets
        a driver's tanh carry exp's error as an absolute error: thousands of ulps near 0. The kernels'
        own softcap (<code>softcap_apply</code>) does not use it.</p>
      <p id="precision-status" class="muted">waiting for WebGPU and Pyodide…</p>
      <table id="precision-table"></table>`;
    const before = $("conformance");
    if (before) before.before(s); else document.body.append(s);
  }
  s.dataset.status = "running";
  return s;
}

function num(x, digits) {
  if (typeof x !== "number") return x === undefined ? "" : String(x);
  return x >= 1e4 || (x !== 0 && x < 1e-2) ? x.toExponential(digits) : x.toFixed(1);
}

function render(browser, native) {
  const rows = (browser || native).functions;
  const nat = native ? Object.fromEntries(native.functions.map((f) => [f.name, f])) : {};
  const verdict = (f) => (f === undefined || f.within_wgsl === null ? "–" : f.within_wgsl ? "yes" : "<span class=fail>NO</span>");
  $("precision-table").innerHTML =
    "<tr><th class=l>function</th><th class=l>arguments</th><th>browser ulps</th><th>browser abs</th>" +
    "<th>native ulps</th><th>native abs</th><th class=l>WGSL allows</th><th>within (browser / native)</th></tr>" +
    rows.map((r) => {
      const b = browser ? browser.functions.find((f) => f.name === r.name) : undefined;
      const n = nat[r.name];
      return `<tr><td class=l><code>${r.expr}</code></td><td class=l>${r.domain}</td>
        <td>${b ? num(b.max_ulps, 2) : ""}</td><td>${b ? num(b.max_abs, 1) : ""}</td>
        <td>${n ? num(n.max_ulps, 2) : ""}</td><td>${n ? num(n.max_abs, 1) : ""}</td>
        <td class=l>${r.wgsl_allows}</td><td>${verdict(b)} / ${verdict(n)}</td></tr>`;
    }).join("");
}

/** Run the probe in this browser (when it has WebGPU) and show it beside the native one. */
export async function runProbe(ctx) {
  const s = section();
  const state = { browser: null, native: null };
  window.wgattn.precision = state;
  const native = fetch("/api/adapter").then(async (r) => (r.ok ? (await r.json()).precision : null)).catch(() => null);
  const notes = [];
  try {
    if (ctx.executor) {
      const page = ctx.page;
      const prepared = JSON.parse(page.probe_prepare());
      await runPrepared(ctx.executor, page, prepared).catch((e) => { page.release(prepared.run); throw e; });
      state.browser = JSON.parse(page.probe_judge(prepared.run, JSON.stringify(ctx.gpu.info)));
    } else {
      notes.push("browser: skipped (no WebGPU here)");
    }
    state.native = await native;
    if (!state.native) notes.push("native: unavailable (the server has no adapter)");
    if (!state.browser && !state.native) throw new Error(notes.join("; "));
    render(state.browser, state.native);
    const samples = (state.browser || state.native).functions[0].samples;
    $("precision-status").textContent = `${samples} arguments per function` + (notes.length ? `; ${notes.join("; ")}` : "");
    s.dataset.status = "done";
  } catch (e) {
    state.error = String(e.message || e);
    $("precision-status").textContent = `The precision probe stopped: ${state.error}`;
    $("precision-status").className = "fail";
    s.dataset.status = "error";
  }
  return state;
}
