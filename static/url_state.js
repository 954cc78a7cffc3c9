// @ts-check
// A live run's state in the URL: the kernel and its configuration (and the pictures' choices), so
// a run can be shared and reopened. Python checks what a URL asks for, as it checks the form.

import { ready } from "./context.js";

// The kernel a URL that names none opens on.
const DEFAULT_KERNEL = "sdpa_arena.seed";

/** The request a URL's query describes (config fields of any interface go to Python, which says
 * which do not apply); the default kernel when the URL names none. Keys are looked up in a Map:
 * in a plain object `constructor` or `toString` from the URL would find Object's own members.
 * @param {URLSearchParams} params
 * @returns {import("./context.js").LiveRequest} */
export function requestFromParams(params) {
  const kernel = params.get("kernel") || DEFAULT_KERNEL;
  const all = Object.values(ready().schema).flat();
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
  return { kernel, config };
}

/** The page's URL for `request` (and the pictures' choices, `extra`).
 * @param {import("./context.js").LiveRequest} request
 * @param {Partial<Record<string, string | null>>} [extra] */
export function urlFor(request, extra = {}) {
  const q = new URLSearchParams({ kernel: request.kernel });
  for (const [k, v] of Object.entries(request.config)) q.set(k, String(v));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== null) q.set(k, String(v));
  return `${location.pathname}?${q}`;
}
