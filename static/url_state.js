// @ts-check
// A live run's state in the URL: the kernel and its configuration (and the pictures' choices), so
// a run can be shared and reopened. Python checks what a URL asks for, as it checks the form; a
// link made before a kernel was renamed or a bound changed opens on the defaults for what it got
// wrong, and says so (main.js).

import { ctx, kernelInfo } from "./context.js";

// The kernel a URL that names none (or an unknown one) opens on.
export const DEFAULT_KERNEL = "sdpa_arena.seed";

/** The request a URL's query describes (config fields of any interface go to Python, which says
 * which do not apply); the default kernel when the URL names none or one that is not registered,
 * with `badKernel` the name it gave. Keys are looked up in a Map: in a plain object `constructor`
 * or `toString` from the URL would find Object's own members.
 * @param {URLSearchParams} params
 * @returns {{ request: import("./context.js").LiveRequest, badKernel: string | null }} */
export function requestFromParams(params) {
  const asked = params.get("kernel");
  const known = asked !== null && kernelInfo(asked) !== undefined;
  const kernel = known && asked !== null ? asked : DEFAULT_KERNEL;
  const all = Object.values(ctx.schema || {}).flat();
  const types = new Map(all.map((f) => [f.name, f.type]));
  /** @type {import("./context.js").Config} */
  const config = {};
  for (const [k, v] of params) {
    const t = types.get(k);
    if (!t) continue;
    if (t === "bool") config[k] = ["1", "true", "on"].includes(v);
    else if ((t === "int" || t === "float") && v.trim() !== "" && Number.isFinite(Number(v))) config[k] = Number(v);
    else config[k] = v;
  }
  // Another kernel's fields say nothing about the default one: a bad kernel's link keeps none.
  return { request: { kernel, config: known || asked === null ? config : {} }, badKernel: known ? null : asked };
}

/** The page's URL for `request` (and the pictures' choices, `extra`), keeping the benchmark's
 * settings (bench_*) the URL holds.
 * @param {import("./context.js").LiveRequest} request
 * @param {Partial<Record<string, string | null>>} [extra] */
export function urlFor(request, extra = {}) {
  const q = new URLSearchParams({ kernel: request.kernel });
  for (const [k, v] of Object.entries(request.config)) q.set(k, String(v));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null) q.set(k, String(v));
  for (const [k, v] of new URLSearchParams(location.search)) if (k.startsWith("bench_")) q.set(k, v);
  return `${location.pathname}?${q}`;
}

/** The URL with the benchmark's settings `settings` (bench_<field>) replacing the ones it held.
 * @param {Record<string, string>} settings */
export function urlWithBench(settings) {
  const q = new URLSearchParams(location.search);
  for (const k of [...q.keys()]) if (k.startsWith("bench_") || k === "bench") q.delete(k);
  for (const [k, v] of Object.entries(settings)) q.set(`bench_${k}`, v);
  return `${location.pathname}?${q}`;
}
