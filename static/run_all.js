// @ts-check
// Run every kernel: the live check of each registered kernel on its interface's default
// configuration, one after the other, into one table that fits its column (a row per kernel: its
// verdict, whether the browser ran it, its worst error; the run's card in the row it expands);
// progress shown where the verdict is, cancellable between kernels; Python's verdict of them all.

import { $, el, row } from "./dom.js";
import { ctx, kernelInfo, ready } from "./context.js";
import { lacking } from "./kernels.js";
import { live, runOnce } from "./run.js";
import { showNotRun, showSummary, stateClass } from "./verdict.js";

/** Python's verdict of the runs `done` (PageSession.live_summary).
 * @param {LiveResult[]} done
 * @returns {LiveSummary} */
function summarise(done) {
  return JSON.parse(ready().page.live_summary(JSON.stringify(done.map((r) => ({ kernel: r.kernel, verdict: r.verdict })))));
}

/** Whether the browser ran the kernel, in a few words: what it lacks when that is why.
 * @param {LiveResult} result */
function browserWords(result) {
  const browser = result.runtimes.browser || { ok: false };
  if (browser.ok) return "ran";
  const k = kernelInfo(result.kernel);
  const missing = k ? lacking(k) : [];
  if (browser.error) return el("span", { class: "fail" }, "error (see details)");
  return el("span", { class: "skipped" }, missing.length ? `not run: lacks ${missing.join(", ")}` : "not run (see details)");
}

/** The worst pair's error over its allowance, or that nothing was compared.
 * @param {LiveResult} result */
function worstWords(result) {
  if (!result.pairs.length) return el("span", { class: "skipped" }, "not compared");
  const w = result.verdict.worst;
  if (typeof w !== "number" || !Number.isFinite(w)) return el("span", { class: "fail" }, "∞ (not finite)");
  return `${w.toPrecision(2)}×`;
}

/** A row of the every-kernel table and its folded details (the run's card); a failing row opens.
 * @param {HTMLElement} made
 * @param {LiveResult} result */
function allRow(made, result) {
  const v = result.verdict;
  const browser = result.runtimes.browser || { ok: false };
  const more = el("tr", { class: "more", id: `more-${result.kernel}` }, el("td", { colspan: 5 }, el("div", { class: "more-box" }, made)));
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
    el("td", { class: "l" }, browserWords(result)),
    el("td", {}, worstWords(result)), el("td", {}, ms));
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
  const head = row("th", [["kernel", "l"], ["verdict", "l"], ["browser", "l"], "worst error ÷ allowance", "browser ms"]);
  head.cells[3].title = "the worst pair's max |error| over its allowance: below 1 passes";
  $("all-table").replaceChildren(el("colgroup", {}, ...["c-kernel", "c-verdict", "c-browser", "c-worst", "c-ms"].map((c) => el("col", { class: c }))),
    head);
  /** @type {LiveResult[]} */
  const done = [];
  try {
    for (let i = 0; i < kernels.length; i++) {
      if (live.cancel) {
        $("live-status").textContent = `cancelled after ${i} of ${kernels.length} kernels`;
        if (done.length) showSummary(summarise(done), `Cancelled after ${i} of ${kernels.length} kernels: `);
        else showNotRun("every kernel: cancelled before the first one finished.");
        return { cancelled: true, results: done };
      }
      const k = kernels[i];
      $("live-status").textContent = `kernel ${i + 1} of ${kernels.length}`;
      bar.value = i;
      done.push(await runOnce({ kernel: k.id, config: configs[k.interface] || {} },
        { pictures: i === kernels.length - 1, place: allRow, label: `every kernel, ${i + 1} of ${kernels.length}: ${k.id}`,
          fresh: ["all-section"] }));
    }
    bar.value = kernels.length;
    $("live-status").textContent = "";
    showSummary(summarise(done));
    return { cancelled: false, results: done };
  } finally {
    $("live-cancel").hidden = true;
    bar.hidden = true;
  }
}
