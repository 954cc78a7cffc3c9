// @ts-check
// The precision probe in the page: measures this browser's WebGPU built-ins (exp, log, tanh,
// division, ...) against float64, beside the server's native adapter (GET /api/adapter carries
// its probe). Python (under Pyodide, wgattn.precision) builds the plan and judges; this module
// only executes and draws. Publishes window.wgattn.precision = {browser, native, error?}; the
// section's data-status becomes "done" or "error".

import { $, el, errorText, row } from "./dom.js";
import { runPrepared } from "./webgpu.js";

/**
 * The probe's report (ProbeReport, FunctionError) is declared in wire.d.ts, generated from
 * wgattn.precision's.
 * @typedef {{ browser: ProbeReport | null, native: ProbeReport | null, error?: string }} ProbeState
 */

/** The section, made before the conformance view on the first run. */
function section() {
  let s = document.getElementById("precision");
  if (!s) {
    s = el("section", { id: "precision", "aria-labelledby": "precision-h" },
      el("h2", { id: "precision-h" }, "Precision of built-ins"),
      el("p", { class: "muted" }, `The worst error of each floating-point built-in the kernels use, on the
        arguments they feed it, against float64 (in ulps of the exact result, and absolute). WGSL lets
        a driver's tanh carry exp's error as an absolute error: thousands of ulps near 0. The kernels'
        own softcap (`, el("code", {}, "softcap_apply"), ") does not use it."),
      el("p", { id: "precision-status", class: "muted" }, "waiting for WebGPU and Pyodide…"),
      el("details", {}, el("summary", {}, "the table: each built-in, browser and native"),
        el("div", { class: "scroll", tabindex: 0 }, el("table", { id: "precision-table" }))));
    const before = document.getElementById("conformance");
    if (before) before.before(s); else document.body.append(s);
  }
  s.dataset.status = "running";
  return s;
}

/** An error figure: exponent form when large or small, else one decimal ("inf" as it is).
 * @param {JsonFloat} x
 * @param {number} digits */
function short(x, digits) {
  if (typeof x !== "number") return x;
  return x >= 1e4 || (x !== 0 && x < 1e-2) ? x.toExponential(digits) : x.toFixed(1);
}

/** The table: a row per function of `rows`, the browser's and the native figures side by side.
 * @param {FunctionError[]} rows
 * @param {ProbeReport | null} browser
 * @param {ProbeReport | null} native */
function render(rows, browser, native) {
  const nat = native ? Object.fromEntries(native.functions.map((f) => [f.name, f])) : {};
  /** @param {FunctionError | undefined} f */
  const verdict = (f) => (f === undefined || f.within_wgsl === null ? "–" : f.within_wgsl ? "yes" : el("span", { class: "fail" }, "NO"));
  $("precision-table").replaceChildren(
    row("th", [["function", "l"], ["arguments", "l"], "browser ulps", "browser abs", "native ulps", "native abs",
      ["WGSL allows", "l"], "within (browser / native)"]),
    ...rows.map((r) => {
      const b = browser ? browser.functions.find((f) => f.name === r.name) : undefined;
      const n = nat[r.name];
      return row("td", [[el("code", {}, r.expr), "l"], [r.domain, "l"], b ? short(b.max_ulps, 2) : "", b ? short(b.max_abs, 1) : "",
        n ? short(n.max_ulps, 2) : "", n ? short(n.max_abs, 1) : "", [r.wgsl_allows, "l"],
        el("span", {}, verdict(b), " / ", verdict(n))]);
    }));
}

/** Run the probe in this browser (when it has WebGPU) and show it beside the native one.
 * @param {import("./context.js").ReadyContext} ctx
 * @returns {Promise<ProbeState>} */
export async function runProbe(ctx) {
  const s = section();
  /** @type {ProbeState} */
  const state = { browser: null, native: null };
  window.wgattn.precision = state;
  /** @type {Promise<ProbeReport | null>} */
  const native = fetch("/api/adapter").then(async (r) => (r.ok ? (await r.json()).precision : null)).catch(() => null);
  const notes = [];
  try {
    const executor = ctx.executor;
    if (executor) {
      const page = ctx.page;
      /** @type {Prepared} */
      const prepared = JSON.parse(page.probe_prepare());
      await runPrepared(executor, page, prepared).catch((e) => {
        page.release(prepared.run);  // a failed run must not stay in the session
        throw e;
      });
      state.browser = JSON.parse(page.probe_judge(prepared.run, JSON.stringify(executor.info)));
    } else {
      notes.push("browser: skipped (no WebGPU here)");
    }
    state.native = await native;
    if (!state.native) notes.push("native: unavailable (the server has no adapter)");
    const report = state.browser || state.native;
    if (!report) throw new Error(notes.join("; "));
    render(report.functions, state.browser, state.native);
    const samples = report.functions[0].samples;
    $("precision-status").textContent = `${samples} arguments per function` + (notes.length ? `; ${notes.join("; ")}` : "");
    s.dataset.status = "done";
  } catch (e) {
    state.error = errorText(e);
    $("precision-status").textContent = `The precision probe stopped: ${state.error}`;
    $("precision-status").className = "fail";
    s.dataset.status = "error";
  }
  return state;
}
