// @ts-check
// The page: the live check of any registered kernel (browser WebGPU, the float64 reference under
// Pyodide, the server's native wgpu-py run, every pair on every output), with pictures of the run,
// the kernels, what the project measured on a GPU, the conformance grid and the benchmark. Python
// (wgattn.page under Pyodide) builds every plan and makes every judgement; the modules move bytes
// and draw. This one starts them in order and publishes window.wgattn; tests read
// window.wgattn.results and document.body.dataset.status ("done" or "error").
//
// What needs no Python comes first: the server's catalogue fills the kernel list, the form and the
// kernels' table, and the committed benchmark records are charted, while WebGPU opens and Pyodide
// loads (its progress in MB where the verdict will be). The first run goes once Python is ready.
//
//   context.js    the shared state: ctx (WebGPU, Python, the registry), results (what tests read)
//   runtimes.js   the browser's WebGPU and the server's adapter, on their cards
//   kernels.js    the kernels' table; whether this browser can run each
//   form.js       the kernel list and the fields of its interface; a run's error beside Run
//   url_state.js  a run's kernel and configuration in the URL
//   run.js        one live run across the three runtimes; whether one is going
//   verdict.js    loading, running, then what Python judged, under the form; each run's card
//   run_all.js    every kernel, one after the other, into one table
//   records.js    the committed records and the visitor's, charted (chart.js draws)
import { $, errorText, runPage } from "./dom.js";
import { loadPython, showProgress } from "./python.js";
import { setupConformance } from "./conformance.js";
import { benchState, caseState, runBench, runCaseBench, setupBench } from "./bench.js";
import { setupDecodeBench } from "./bench_decode.js";
import { runProbe } from "./precision.js";
import { ctx, kernelInfo, ready, results, setPython } from "./context.js";
import { askNative, startGpu, syncTarget } from "./runtimes.js";
import { buildFields, editKernel, fillKernels, markKernels, requestFromForm, showConfigLine, showRunError,
  wireConfigToggle } from "./form.js";
import { DEFAULT_KERNEL, requestFromParams, urlFor } from "./url_state.js";
import { busy, enableRuns, live, runOnce } from "./run.js";
import { runAll } from "./run_all.js";
import { loadRecords, setupImports } from "./records.js";
import { showMessage } from "./message.js";
import { showLoading } from "./verdict.js";

/**
 * What the page publishes on window for the tests: window.wgattn.
 * @typedef {{ results: import("./context.js").Results, run: (request: import("./context.js").LiveRequest) => Promise<LiveResult>,
 *   runAll: (options?: { configs?: Record<string, import("./context.js").Config> }) => Promise<{ cancelled: boolean, results: LiveResult[] }>,
 *   bench: import("./bench.js").BenchState, ctx: import("./context.js").Context,
 *   benchRun: (request: import("./bench.js").BenchRequest) => Promise<BenchRecord[]>,
 *   cases: import("./bench.js").CaseState,
 *   caseBench: (request: Parameters<typeof runCaseBench>[1]) => Promise<Array<Record<string, any>>>,
 *   records?: import("./records.js").RecordsState,
 *   conformance?: import("./conformance.js").GridSummary, precision?: import("./precision.js").ProbeState,
 *   pictures?: import("./pictures.js").PictureState }} PageState
 */

window.wgattn = { results, run: (request) => runOnce(request), runAll: (opts) => runAll(opts), bench: benchState, ctx,
  benchRun: (request) => runBench(ready(), request), cases: caseState,
  caseBench: (request) => runCaseBench(ready(), request) };

/** A URL value the page could not use, said beside the form (the page carries on with defaults).
 * @param {string[]} notes */
function showUrlNotes(notes) {
  const box = $("url-note");
  box.hidden = !notes.length;
  box.textContent = notes.join(" ");
}

/** The first run: the URL's request, with what Python refused of it replaced by the defaults (each
 * said, naming the field and what is allowed), so that an old link still opens a working page.
 * @param {import("./context.js").LiveRequest} request
 * @param {string[]} notes */
async function firstRun(request, notes) {
  let config = { ...request.config };
  for (let tries = 0; ; tries++) {
    try {
      return await runOnce({ kernel: request.kernel, config });
    } catch (e) {
      const why = errorText(e).replace(/^invalid configuration: /, "");
      const named = Object.keys(config).filter((n) => new RegExp(`\\b${n}\\b`).test(why));
      if (!named.length || tries >= 4) throw e;  // nothing of the URL's to drop: the message says why
      notes.push(`The link's ${named.map((n) => `${n}=${config[n]}`).join(", ")} could not be used (${why}); ` +
        `the page ran ${named.length > 1 ? "their defaults" : "its default"} instead.`);
      config = Object.fromEntries(Object.entries(config).filter(([k]) => !named.includes(k)));
      buildFields(request.kernel, Object.fromEntries(Object.entries(config).map(([k, v]) => [k, String(v)])));
      showUrlNotes(notes);
    }
  }
}

async function main() {
  // What needs no Python starts at once and in parallel: the catalogue (the form), the records
  // (the chart), WebGPU, the native adapter and Pyodide's download.
  wireConfigToggle();
  const catalogue = fetch("/api/kernels").then((r) => {
    if (!r.ok) throw new Error(`the server's kernel list (GET /api/kernels) answered HTTP ${r.status}`);
    return /** @type {Promise<Catalogue>} */ (r.json());
  });
  const records = loadRecords();
  const nativeInfo = askNative();
  const gpu = startGpu();
  const python = loadPython((text, loaded, total) => {
    showProgress(text, loaded, total);
    showLoading(text, loaded, total);
  });
  python.catch(() => {});  // said once awaited below

  /** @type {Catalogue} */
  const reg = await catalogue;
  fillKernels(reg);
  const params = new URLSearchParams(location.search);
  const { request: first, badKernel } = requestFromParams(params);
  /** @type {string[]} */
  const notes = [];
  if (badKernel !== null) {
    notes.push(`The link's kernel=${badKernel} is not a registered kernel (allowed: one of the ${ctx.kernels.length} in the list: ` +
      `${ctx.kernels.map((k) => k.id).join(", ")}); the page opened on ${DEFAULT_KERNEL} with its default configuration instead.`);
  }
  showUrlNotes(notes);
  const kernel = $("kernel", HTMLSelectElement);
  kernel.value = first.kernel;
  buildFields(first.kernel, Object.fromEntries(Object.entries(first.config).map(([k, v]) => [k, String(v)])));
  kernel.addEventListener("change", () => buildFields(kernel.value));
  $("config-fields").addEventListener("input", showConfigLine);
  $("kernel-wgsl").addEventListener("click", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;  // a new tab shows the file itself
    ev.preventDefault();
    editKernel().catch((e) => showRunError(errorText(e)));
  });
  results.form_ms = performance.now();
  setupImports();
  await gpu;
  await records.catch(() => null);

  const py = await python;
  setPython(py.page);
  syncTarget();
  markKernels();
  results.python = py.version;
  const now = ready();
  await nativeInfo.catch(() => null);
  // The first run: the URL's request as the form holds it now (the reader may have changed it
  // while Python loaded); what Python refuses of the URL's goes back to its default, said.
  const asked = kernelInfo(kernel.value) && kernel.value !== first.kernel ? requestFromForm() : first;
  let firstError = null;
  document.body.dataset.status = "running";
  try {
    const r = await firstRun(asked, notes);
    if (notes.length) history.replaceState(null, "", urlFor({ kernel: r.kernel, config: r.config }));
  } catch (e) {
    firstError = e;
    showRunError(errorText(e));
  }
  enableRuns(true);
  setupConformance(now, Object.keys(reg.interfaces));
  $("grid-run", HTMLButtonElement).disabled = false;
  // The benchmark runs only on its Run button, or at once with ?bench=OP in the URL (after the
  // first run, which it would otherwise slow down); main() does not wait for it.
  setupBench(now, params);
  setupDecodeBench(now);
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
