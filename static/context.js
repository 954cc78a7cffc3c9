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
 * The page's state: `schema` and `kernels` once the server's catalogue arrived (GET /api/kernels:
 * the form works from then on), `page` once Pyodide is ready (ReadyContext), `executor` while the
 * browser has a WebGPU device. `availability` is Python's answer of which kernels this browser
 * can run ({} until Python is ready).
 * @typedef {{ gpu: import("./webgpu.js").Gpu | import("./webgpu.js").NoGpu | null,
 *   executor: import("./webgpu.js").Executor | null, page: WgattnPage | null, schema: Schema | null,
 *   kernels: KernelInfo[], interfaces: Record<string, InterfaceInfo>, availability: Record<string, string> }} Context
 * @typedef {Context & { page: WgattnPage, schema: Schema }} ReadyContext
 */

/**
 * What the tests read: window.wgattn.results. `first_result_ms` is when the first verdict was shown
 * (performance.now()), `first_result_bytes` what the page had received by then (the transfer sizes
 * of its document and every resource), `form_ms` when the kernel list and form were filled.
 * @typedef {{ adapter: import("./webgpu.js").AdapterInfo | null, native_adapter: NativeAdapter | null,
 *   python: string | null, runs: Array<Omit<LiveResult, "outputs" | "heads" | "naive_err" | "naive_f32_err" | "precision">>,
 *   first_result_ms: number | null, first_result_bytes: number | null, form_ms: number | null,
 *   gpu_errors: string[] }} Results
 */

/** What the tests read of the live check (window.wgattn.results).
 * @type {Results} */
export const results = { adapter: null, native_adapter: null, python: null, runs: [], first_result_ms: null,
  first_result_bytes: null, form_ms: null, gpu_errors: [] };

/** The bytes the page has received so far: its document's and every resource's transfer size
 * (0 for what came from the browser's cache). */
export function bytesReceived() {
  const entries = /** @type {PerformanceResourceTiming[]} */ ([...performance.getEntriesByType("navigation"),
    ...performance.getEntriesByType("resource")]);
  return entries.reduce((sum, e) => sum + (e.transferSize || 0), 0);
}

/** The page's state, filled in as WebGPU, Pyodide and the registry arrive.
 * @type {Context} */
export const ctx = { gpu: null, executor: null, page: null, schema: null, kernels: [], interfaces: {}, availability: {} };

/** @type {(ctx: ReadyContext) => void} */
let resolvePython = () => {};
/** Resolves once the page's Python is ready (what waits for it: an import dropped before). */
export const pythonReady = /** @type {Promise<ReadyContext>} */ (new Promise((resolve) => { resolvePython = resolve; }));

/** The page's Python is ready: `page` is its session. */
export function setPython(/** @type {WgattnPage} */ page) {
  ctx.page = page;
  resolvePython(ready());
}

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
