// What the page's modules get from outside themselves, for the type checker (tsconfig.json): the
// Pyodide runtime that /pyodide/pyodide.js defines, the wgattn.page session it hands back as a proxy,
// and what the page publishes on window for the tests. These are declarations the checker trusts;
// The session's methods (WgattnPage) and the JSON they return are declared in wire.d.ts, generated
// from the Python (wgattn.typescript).

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

// WgattnPage, the page's wgattn.page.PageSession, is declared in wire.d.ts: generated from it.

interface Window {
  /** The page's state for the e2e tests (main.js makes it; the views add their parts). */
  wgattn: import("./main.js").PageState;
  /** The self-test page's outcome (selftest.js). */
  wgattnSelftest?: import("./selftest.js").SelftestResult;
}
