// @ts-check
// Run every kernel: the live check of each registered kernel on its interface's default
// configuration, one after the other, into one table whose rows expand into their cards; progress
// shown, cancellable between kernels; Python's verdict of them all under the form.

import { $, el, row } from "./dom.js";
import { ctx, kernelInfo, ready } from "./context.js";
import { live, runOnce } from "./run.js";
import { showSummary, stateClass } from "./verdict.js";

/** What a kernel needs of the adapter, in words ("needs shader-f16"), or that it could not run.
 * @param {string} id */
function needs(id) {
  const k = kernelInfo(id);
  return k && k.requires.length ? `needs ${k.requires.join(", ")}` : "see its details";
}

/** A row of the every-kernel table and its folded details (the run's card); a failing row opens.
 * @param {HTMLElement} made
 * @param {LiveResult} result */
function allRow(made, result) {
  const v = result.verdict;
  const browser = result.runtimes.browser || { ok: false };
  const more = el("tr", { class: "more", id: `more-${result.kernel}` }, el("td", { colspan: 5 }, made));
  more.hidden = v.state !== "fail";
  const toggle = el("button", { type: "button", class: "expand", "aria-expanded": String(!more.hidden), "aria-controls": more.id },
    `${more.hidden ? "▸" : "▾"} ${result.kernel}`);
  toggle.addEventListener("click", () => {
    more.hidden = !more.hidden;
    toggle.setAttribute("aria-expanded", String(!more.hidden));
    toggle.textContent = `${more.hidden ? "▸" : "▾"} ${result.kernel}`;
  });
  const ms = browser.timings && browser.timings.wall_ms !== undefined ? browser.timings.wall_ms.toFixed(1) : "";
  const tr = el("tr", { "data-kernel": result.kernel, "data-state": v.state },
    el("td", { class: "l" }, toggle),
    el("td", { class: `l ${stateClass(v.state)}` }, v.word),
    el("td", { class: "l" }, browser.ok ? "ran" : el("span", { class: "skipped" }, browser.skipped ? `not run: ${needs(result.kernel)}` : "error")),
    el("td", {}, typeof v.worst === "number" && Number.isFinite(v.worst) ? `${v.worst.toPrecision(2)}×` : "∞"), el("td", {}, ms));
  $("all-table").append(tr, more);
}

/** The live check of every registered kernel on its interface's default configuration (or
 * `configs[interface]`), one after the other; the verdict says how many passed in all three
 * runtimes, and which ran only natively.
 * @param {{ configs?: Record<string, import("./context.js").Config> }} [options] */
export async function runAll({ configs = {} } = {}) {
  live.cancel = false;
  const kernels = ctx.kernels;
  const bar = $("live-progress", HTMLProgressElement);
  bar.hidden = false;
  bar.max = kernels.length;
  $("live-cancel").hidden = false;
  $("all-section").hidden = false;
  $("all-table").replaceChildren(row("th", [["kernel", "l"], ["verdict", "l"], ["browser", "l"], "worst error / allowance", "browser ms"]));
  /** @type {LiveResult[]} */
  const done = [];
  try {
    for (let i = 0; i < kernels.length; i++) {
      if (live.cancel) {
        $("live-status").textContent = `cancelled after ${i} of ${kernels.length} kernels`;
        return { cancelled: true, results: done };
      }
      const k = kernels[i];
      $("live-status").textContent = `kernel ${i + 1} of ${kernels.length}: ${k.id}`;
      bar.value = i;
      done.push(await runOnce({ kernel: k.id, config: configs[k.interface] || {} },
        { pictures: i === kernels.length - 1, place: allRow }));
    }
    bar.value = kernels.length;
    $("live-status").textContent = "";
    /** @type {LiveSummary} */
    const summary = JSON.parse(ready().page.live_summary(JSON.stringify(done.map((r) => ({ kernel: r.kernel, verdict: r.verdict })))));
    showSummary(summary);
    return { cancelled: false, results: done };
  } finally {
    $("live-cancel").hidden = true;
    bar.hidden = true;
  }
}
