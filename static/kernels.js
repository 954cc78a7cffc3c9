// @ts-check
// The kernels: the table of every registered kernel (what it computes, what it needs of the GPU,
// whether this browser can run it), filled from the server's catalogue as soon as it arrives, and
// the answer to "can this browser run it?". Python decides that answer (wgattn.target, once Pyodide
// is ready: features, subgroup-matrix configurations, sizes); until then the page says what the
// adapter's feature list alone shows, and says that Python's full check is still to come.

import { $, el, row } from "./dom.js";
import { ctx } from "./context.js";

/**
 * Whether this browser can run a kernel: "yes", "no" (with why), or "unknown" (WebGPU not asked yet).
 * `final` is false while only the adapter's features were compared (Python's check is to come).
 * @typedef {{ can: "yes" | "no" | "unknown", why: string, short: string, final: boolean }} BrowserCan
 */

/** Whether this browser can run kernel `k`, as far as the page knows yet.
 * @param {KernelInfo} k
 * @returns {BrowserCan} */
export function browserCan(k) {
  const gpu = ctx.gpu;
  if (!gpu) return { can: "unknown", why: "asking this browser's WebGPU…", short: "asking WebGPU…", final: false };
  if (gpu.error !== undefined || !ctx.executor) {
    const why = gpu.error !== undefined ? gpu.error : "the WebGPU device was lost";
    return { can: "no", why, short: "no WebGPU here", final: true };
  }
  if (ctx.page) {  // Python's answer (wgattn.target.Target.lacks)
    const why = ctx.availability[k.id] || "";
    const missing = lacking(k);
    return why ? { can: "no", why, short: missing.length ? `no: lacks ${missing.join(", ")}` : `no: ${why}`, final: true }
      : { can: "yes", why: "", short: "yes", final: true };
  }
  const missing = lacking(k);
  if (missing.length) {
    return { can: "no", why: `${k.id} needs adapter features ${missing.join(", ")}, which this browser's adapter lacks`,
      short: `no: lacks ${missing.join(", ")}`, final: true };
  }
  return { can: "yes", why: "", short: "has its features", final: false };
}

/** The features kernel `k` needs that this browser's adapter does not offer.
 * @param {KernelInfo} k */
export function lacking(k) {
  const gpu = ctx.gpu;
  const has = gpu && gpu.error === undefined ? gpu.info.features : [];
  return k.requires.filter((f) => !has.includes(f));
}

/** Fill the table of kernels (the catalogue's, with this browser's answer for each). */
export function showKernelTable() {
  const table = $("kernel-table");
  const head = row("th", [["kernel", "l"], ["computes", "l"], ["precision", "l"], ["needs", "l"], ["this browser", "l"]]);
  table.replaceChildren(head, ...ctx.kernels.map((k) => {
    const can = browserCan(k);
    const iface = ctx.interfaces[k.interface];
    const computes = iface ? firstSentence(iface.summary.replace(/^Seed [A-Z]'s interface: /, "")) : k.interface;
    const answer = el("span", { class: can.can === "no" ? "skipped" : can.can === "yes" && can.final ? "pass" : "muted" }, can.short);
    return el("tr", { "data-kernel": k.id, "data-can": can.can, "data-final": String(can.final) },
      el("td", { class: "l" }, el("a", { href: `/shaders/${k.wgsl}`, title: k.summary }, k.id)),
      el("td", { class: "l wrap" }, el("code", {}, `${iface ? iface.reference : k.interface}()`), `: ${computes}`),
      el("td", { class: "l" }, k.precision), el("td", { class: "l" }, k.requires.join(", ") || "no optional feature"),
      el("td", { class: "l" }, answer));
  }));
}

/** A text's first sentence.
 * @param {string} text */
function firstSentence(text) {
  const end = text.search(/[.;] /);
  return end < 0 ? text : text.slice(0, end + 1);
}
