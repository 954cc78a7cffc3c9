// @ts-check
// The runtimes: the browser's WebGPU opened (uncaptured errors shown, a lost device reported and
// restartable), the server's native adapter asked for, each described on its card. Python says
// which kernels the browser's device can run (wgattn.target); this module hands it the device.

import { $, errorText } from "./dom.js";
import { Executor, adapterWords, openDevice } from "./webgpu.js";
import { ctx, results } from "./context.js";
import { markKernels } from "./form.js";
import { showMessage } from "./message.js";

/** An adapter's names for the runtime cards.
 * @param {import("./webgpu.js").AdapterInfo | import("./context.js").NativeAdapter} info */
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

/** @param {string} message */
function onLost(message) {
  ctx.executor = null;
  results.adapter = null;
  document.body.dataset.gpu = "lost";
  $("browser-adapter").textContent = message;
  showMessage(`${message}. The browser runs are skipped until WebGPU starts again.`, "error",
    { id: "gpu-restart", label: "Start WebGPU again", onclick: () => startGpu().then(() => { $("message").hidden = true; }) });
}

/** Build the page's plans for the browser's device (its features, limits and kind, as webgpu.js
 * reports them) once both it and Python are there; Python says which kernels it can run, and why
 * not the others. */
export function syncTarget() {
  if (!ctx.page || !ctx.gpu || !ctx.gpu.target) return;
  ctx.page.use_target(JSON.stringify(ctx.gpu.target));
  ctx.availability = JSON.parse(ctx.page.availability());
  markKernels();
}

/** Open the browser's WebGPU device (again, after a loss) and describe it; without one, say so:
 * the reference and the native run still go ahead. */
export async function startGpu() {
  let gpu;
  try {
    gpu = await openDevice(onLost);
  } catch (e) {
    gpu = { error: `WebGPU's device request failed: ${errorText(e)}.` };
  }
  ctx.gpu = gpu;
  if (gpu.error !== undefined) {
    ctx.executor = null;
    $("browser-adapter").textContent = gpu.error;
    // The error is a whole sentence saying what is missing (webgpu.js): no API, no adapter, no device.
    showMessage(`${gpu.error} The reference and the native run still go ahead.`, "info");
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

/** The server's native adapter (GET /api/adapter), shown on its card once it answers; the
 * promise rejects with the server's reason.
 * @returns {Promise<import("./context.js").NativeAdapter>} */
export function askNative() {
  const asked = fetch("/api/adapter").then(async (r) => {
    const body = await r.json();
    if (!r.ok) throw new Error(body.detail);
    return /** @type {import("./context.js").NativeAdapter} */ (body);
  });
  asked.then((info) => {
    results.native_adapter = info;
    $("native-adapter").textContent = describe(info);
  }, (e) => { $("native-adapter").textContent = `unavailable: ${errorText(e)}`; });
  return asked;
}
