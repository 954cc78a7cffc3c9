// What the page's modules get from outside themselves, for the type checker (tsconfig.json): the
// Pyodide runtime that /pyodide/pyodide.js defines, the wgattn.page session it hands back as a proxy,
// and what the page publishes on window for the tests. These are declarations the checker trusts;
// tests/test_page_types.py holds WgattnPage's methods and parameters to wgattn.page.PageSession's.

/** A Python object seen from JavaScript (Pyodide 0.17): copied out with toJs(), freed with destroy(). */
interface PyProxy<T = unknown> {
  toJs(): T;
  destroy(): void;
}

/** The Pyodide 0.17 runtime, as far as python.js uses it. runPython's value is foreign (any Python
 * object, converted or proxied), hence unknown: the caller says what its code returns. */
interface Pyodide {
  loadPackage(names: string[]): Promise<unknown>;
  runPython(code: string): unknown;
  runPythonAsync(code: string): Promise<unknown>;
  globals: { set(name: string, value: unknown): void; delete(name: string): void };
}

/** Defined by /pyodide/pyodide.js once python.js has loaded it; absent before. */
declare var loadPyodide: ((options: { indexURL: string }) => Promise<Pyodide>) | undefined;

/** The page's wgattn.page.PageSession under Pyodide (py/wgattn/page/session.py): JSON in, JSON out;
 * runs and jobs are numbered, and the session frees each when it completes or is released. */
interface WgattnPage {
  live_schema(): string;
  prepare(request_json: string): string;
  use_limits(limits_json: string): void;
  plan_bytes(run: number, buffer: string): PyProxy<Uint8Array>;
  add_buffer(run: number, name: string, data: Uint8Array): void;
  finish(run: number, browser_json: string, native_json: string | null): string;
  heatmap(run: number, head: number): string;
  error_map(run: number, output: string, a: string, b: string, head: number): string;
  grid_start(request_json: string): string;
  grid_prepare(job: number, index: number): string;
  grid_judge(run: number, error: string): string;
  probe_prepare(): string;
  probe_judge(run: number, adapter_json: string): string;
  bench_start(request_json: string): string;
  bench_plan(bench_id: number, index: number, plan_index: number): string;
  bench_release(run: number): void;
  bench_schedule(bench_id: number, n_entries: number): string;
  bench_warm(bench_id: number, state_json: string): string;
  bench_calibrate(bench_id: number, state_json: string): string;
  bench_record(bench_id: number, index: number, payload_json: string): string;
  bench_import(text: string): string;
  /** Free a run or job the page will not complete (false: already gone). */
  release(id: number): boolean;
  /** JSON {kind: count} of what the session holds. */
  stats(): string;
}

interface Window {
  /** The page's state for the e2e tests (main.js makes it; the views add their parts). */
  wgattn: import("./main.js").PageState;
  /** The self-test page's outcome (selftest.js). */
  wgattnSelftest?: import("./selftest.js").SelftestResult;
}
