// @ts-check
// A live run: the plan Python prepares, run in the browser's WebGPU and on the server at the same
// time, compared and judged by Python (PageSession.finish), its card, verdict and pictures shown.
// The state of the live check's runs is here: whether one is going (the Run buttons are disabled
// meanwhile) and whether a run of every kernel was asked to stop.

import { $, errorText, pyError } from "./dom.js";
import { runPrepared } from "./webgpu.js";
import { bytesReceived, ctx, ready, results } from "./context.js";
import { clearRunError, showRunError } from "./form.js";
import { showMessage } from "./message.js";
import { drawPictures } from "./pictures.js";
import { urlFor } from "./url_state.js";
import { card, showNotRun, showRunVerdict, showRunning, showStep } from "./verdict.js";

/**
 * @typedef {import("./context.js").LiveRequest} LiveRequest
 * @typedef {{ timings?: import("./webgpu.js").Timings, skipped?: string, error?: string }} BrowserRun
 */

/** The live check's runs: one goes at a time; `cancel` stops a run of every kernel between kernels. */
export const live = { busy: false, cancel: false };

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

/** Let the browser draw what the page just said (the step of a run) before Python takes the
 * main thread: a frame, and a timer for a page in the background (no frames there). */
function drawn() {
  return new Promise((resolve) => {
    let done = false;
    const go = () => { if (!done) { done = true; resolve(undefined); } };
    requestAnimationFrame(() => setTimeout(go, 0));
    setTimeout(go, 100);
  });
}

/** One run across the three runtimes; resolves to the judged comparison, throws on bad input. While
 * it goes, the verdict says so (the kernel, or `label`, its step and its time). Its card goes on top
 * of the details and its verdict under the form, unless `place` puts the card elsewhere.
 * @param {LiveRequest} request
 * @param {{ pictures?: boolean, place?: (card: HTMLElement, result: LiveResult) => void, label?: string,
 *   fresh?: string[] }} [options] `fresh`: the views this run fills (not greyed while it goes)
 * @returns {Promise<LiveResult>} */
export async function runOnce(request, { pictures = true, place, label, fresh = [] } = {}) {
  const { page } = ready();
  const what = label || request.kernel;
  showRunning(what, "step 1 of 3: drawing the seeded inputs and planning the dispatches (Python)", fresh);
  await drawn();
  /** @type {LivePrepared} */
  let prepared;
  try {
    prepared = JSON.parse(page.prepare(JSON.stringify(request)));
  } catch (e) {
    const why = `invalid configuration: ${pyError(e)}`;
    if (!place) showNotRun(`${request.kernel}: the configuration above did not start (the message beside Run says why).`);
    throw new Error(why);
  }
  showStep(`step 2 of 3: ${ctx.executor && !prepared.plan.unavailable ? "your browser's WebGPU and " : ""}the native server run it`);
  // The browser and the server run at the same time; the reference runs in finish().
  const [browser, native] = await Promise.all([runBrowser(page, prepared), runNative(request, prepared)]);
  showStep("step 3 of 3: the float64 reference and the comparison (Python)");
  await drawn();
  /** @type {LiveResult} */
  const result = JSON.parse(page.finish(prepared.run, JSON.stringify(browser), native));
  results.runs.push({
    kernel: result.kernel, interface: result.interface, config: result.config, digest: result.digest,
    pass: result.pass, verdict: result.verdict, runtimes: result.runtimes, run: result.run,
    pairs: result.pairs.map(({ a, b, output, max_abs_err, allowance, pass }) => ({ a, b, output, max_abs_err, allowance, pass })),
  });
  clearRunError();
  const made = card(result);
  if (place) {
    place(made, result);
  } else {
    const placeholder = document.getElementById("results-placeholder");
    if (placeholder) placeholder.remove();
    $("results").prepend(made);
    showRunVerdict(result);
  }
  if (results.first_result_ms === null && !place) {
    results.first_result_ms = performance.now();
    results.first_result_bytes = bytesReceived();
  }
  if (pictures) showPictures(result);
  return result;
}

/** Draw a finished run's pictures; the pictures' choices go into the URL.
 * @param {LiveResult} result
 * @param {URLSearchParams} [params] the pictures' choices (head, output, pair) */
function showPictures(result, params = new URLSearchParams(location.search)) {
  try {
    drawPictures(ready().page, result, params, (picks) => history.replaceState(null, "", urlFor(
      { kernel: result.kernel, config: result.config }, picks)));
  } catch (e) {
    showMessage(`Could not draw the pictures: ${pyError(e)}`);
  }
}

/** Run `fn` unless a run is going; the run buttons are disabled meanwhile, and <body
 * data-status> says "running", then "done" or "error" (its message beside Run).
 * @param {() => Promise<unknown>} fn */
export async function busy(fn) {
  if (live.busy) return;
  live.busy = true;
  enableRuns(false);
  document.body.dataset.status = "running";
  try {
    await fn();
    document.body.dataset.status = "done";
  } catch (e) {
    showRunError(errorText(e));
    // A run that stopped part way: the verdict says so, not "running".
    if ($("verdict").dataset.state === "running") showNotRun(`the run stopped: ${errorText(e)}`);
    document.body.dataset.status = "error";
  } finally {
    live.busy = false;
    enableRuns(true);
  }
}

/** Enable or disable the live check's Run buttons.
 * @param {boolean} on */
export function enableRuns(on) {
  for (const id of ["run", "run-all"]) $(id, HTMLButtonElement).disabled = !on;
}
