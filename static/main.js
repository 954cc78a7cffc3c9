// @ts-check
// The page: the live check of any registered kernel (browser WebGPU, the float64 reference under
// Pyodide, the server's native wgpu-py run, every pair on every output), with pictures of the run,
// the conformance grid and the benchmark. Python (wgattn.page under Pyodide) builds every plan and
// makes every judgement; the modules move bytes and draw. This one starts them in order and
// publishes window.wgattn; tests read window.wgattn.results and document.body.dataset.status
// ("done" or "error").
//
//   context.js    the shared state: ctx (WebGPU, Python, the registry), results (what tests read)
//   runtimes.js   the browser's WebGPU and the server's adapter, on their cards
//   form.js       the kernel list and the fields of its interface; a run's error beside Run
//   url_state.js  a run's kernel and configuration in the URL
//   run.js        one live run across the three runtimes; whether one is going
//   verdict.js    what Python judged, under the form, and each run's card
//   run_all.js    every kernel, one after the other, into one table
import { $, errorText, runPage } from "./dom.js";
import { loadPython, showProgress } from "./python.js";
import { setupConformance } from "./conformance.js";
import { benchState, decodeState, runBench, runDecodeBench, setupBench } from "./bench.js";
import { runProbe } from "./precision.js";
import { ctx, kernelInfo, ready, results } from "./context.js";
import { askNative, startGpu, syncTarget } from "./runtimes.js";
import { buildFields, editKernel, fillKernels, requestFromForm, showConfigLine, showRunError } from "./form.js";
import { requestFromParams, urlFor } from "./url_state.js";
import { busy, enableRuns, live, runOnce } from "./run.js";
import { runAll } from "./run_all.js";
import { showNotRun } from "./verdict.js";
import { showMessage } from "./message.js";

/**
 * What the page publishes on window for the tests: window.wgattn.
 * @typedef {{ results: import("./context.js").Results, run: (request: import("./context.js").LiveRequest) => Promise<LiveResult>,
 *   runAll: (options?: { configs?: Record<string, import("./context.js").Config> }) => Promise<{ cancelled: boolean, results: LiveResult[] }>,
 *   bench: import("./bench.js").BenchState, ctx: import("./context.js").Context,
 *   benchRun: (request: import("./bench.js").BenchRequest) => Promise<BenchRecord[]>,
 *   decode: import("./bench.js").DecodeState,
 *   decodeBench: (request: Parameters<typeof runDecodeBench>[1]) => Promise<Array<Record<string, any>>>,
 *   conformance?: import("./conformance.js").GridSummary, precision?: import("./precision.js").ProbeState,
 *   pictures?: import("./pictures.js").PictureState }} PageState
 */

window.wgattn = { results, run: (request) => runOnce(request), runAll: (opts) => runAll(opts), bench: benchState, ctx,
  benchRun: (request) => runBench(ready(), request), decode: decodeState,
  decodeBench: (request) => runDecodeBench(ready(), request) };

async function main() {
  // The native adapter and kernel list come from the server while the page sets itself up.
  const nativeInfo = askNative();
  const registry = fetch("/api/kernels").then((r) => r.json());
  await startGpu();

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
    showNotRun();
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
