// @ts-check
// The live check's shared state: what the page has learnt (the browser's WebGPU, the page's
// Python, the registry, which kernels this browser can run) and what the tests read
// (window.wgattn.results). Every module of the live check reads it from here.

/**
 * The page's shapes that Python makes (KernelInfo, SchemaField, LivePrepared, LiveResult, Verdict,
 * Pair, RuntimeReport, TargetJson, ...) are declared in wire.d.ts, generated from the Python.
 * @typedef {Record<string, SchemaField[]>} Schema the live form's fields per interface (wgattn.live.schema)
 * @typedef {Record<string, unknown>} Config
 * @typedef {{ kernel: string, config: Config }} LiveRequest
 * @typedef {"browser" | "pyodide" | "native"} Runtime
 * @typedef {{ vendor?: string, architecture?: string, device?: string, description?: string,
 *   unavailable?: Record<string, string> }} NativeAdapter
 */

/**
 * The page's state: `page` and `schema` once Pyodide is ready (ReadyContext), `executor` while
 * the browser has a WebGPU device.
 * @typedef {{ gpu: import("./webgpu.js").Gpu | import("./webgpu.js").NoGpu | null,
 *   executor: import("./webgpu.js").Executor | null, page: WgattnPage | null, schema: Schema | null,
 *   kernels: KernelInfo[], availability: Record<string, string> }} Context
 * @typedef {Context & { page: WgattnPage, schema: Schema }} ReadyContext
 */

/**
 * What the tests read: window.wgattn.results.
 * @typedef {{ adapter: import("./webgpu.js").AdapterInfo | null, native_adapter: NativeAdapter | null,
 *   python: string | null, runs: Array<Omit<LiveResult, "outputs" | "heads" | "naive_err" | "naive_f32_err" | "precision">>,
 *   first_result_ms: number | null, gpu_errors: string[] }} Results
 */

/** What the tests read of the live check (window.wgattn.results).
 * @type {Results} */
export const results = { adapter: null, native_adapter: null, python: null, runs: [], first_result_ms: null, gpu_errors: [] };

/** The page's state, filled in as WebGPU, Pyodide and the registry arrive.
 * @type {Context} */
export const ctx = { gpu: null, executor: null, page: null, schema: null, kernels: [], availability: {} };

/** The page's Python, or why there is none yet (a run asked for through window.wgattn too early).
 * @returns {ReadyContext} */
export function ready() {
  if (!ctx.page || !ctx.schema) throw new Error("Pyodide is still loading: wait for the first result");
  return /** @type {ReadyContext} */ (ctx);
}

/** The registered kernel `id`, if there is one.
 * @param {string} id */
export function kernelInfo(id) {
  return ctx.kernels.find((k) => k.id === id);
}
