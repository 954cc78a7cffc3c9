// @ts-check
// What the live check says, where its verdict is: while Python loads, how much has arrived; while a
// run goes, which kernel, which step and for how long, with the previous result kept below, marked
// stale and never green; then the verdict Python judged (wgattn.page.verdict: LiveResult.verdict,
// and PageSession.live_summary for a run of every kernel), which this module only shows. Each run
// also gets its card among the details.

import { $, el, fmt, row } from "./dom.js";
import { urlFor } from "./url_state.js";

/** The CSS class of a verdict's state: green, red, or amber for what did not run.
 * @param {Verdict["state"]} state */
export const stateClass = (state) => (state === "pass" ? "pass" : state === "fail" ? "fail" : "skipped");

// What greys out while a run goes or after one did not start: the results of the previous run no
// longer answer the form.
const STALE = ["results", "pictures", "all-section"];

/** The verdict box's state: the line shown before this run (kept, marked stale, while it goes). */
/** @type {{ previous: HTMLElement | null, timer: number }} */
const shown = { previous: null, timer: 0 };

/** Show a verdict under the form: its word, a sentence, amber notes.
 * @param {{ state: Verdict["state"], word: string, notes: string[] }} verdict
 * @param {Array<Node | string>} line what follows the word
 * @param {"one" | "all"} scope one run, or a run of every kernel */
function showVerdict(verdict, line, scope) {
  stopClock();
  const box = $("verdict");
  box.dataset.state = verdict.state;
  box.dataset.scope = scope;
  box.replaceChildren(el("p", { id: "verdict-line" }, el("span", { class: "word" }, verdict.word), ...line),
    ...verdict.notes.map((n) => el("p", { class: "amber" }, n)));
  shown.previous = null;
  for (const id of STALE) $(id).classList.remove("stale");
}

/** While Python loads (before the first verdict): what is loading and how much has arrived.
 * @param {string} text
 * @param {number} loaded bytes
 * @param {number} total bytes (0: not known yet) */
export function showLoading(text, loaded, total) {
  const box = $("verdict");
  if (box.dataset.state !== "waiting" && box.dataset.state !== "loading") return;
  box.dataset.state = "loading";
  $("verdict-line").replaceChildren(el("span", { class: "word" }, "Loading"), text);
  $("verdict-more").textContent = total ? `${mb(loaded)} of ${mb(total)} MB` +
    (loaded >= total ? "; starting Python (compiling, then importing NumPy and wgattn)" : "") : "";
  const bar = $("load-progress", HTMLProgressElement);
  bar.max = total || 1;
  bar.value = Math.min(loaded, total || 0);
}

/** @param {number} bytes */
const mb = (bytes) => (bytes / 1e6).toFixed(1);

/** A run has started: where the verdict is, the kernel, its step and the seconds since it
 * started; the previous verdict stays below it, marked stale (never green); the previous run's
 * details and pictures grey.
 * @param {string} what the kernel (or "every kernel: 3 of 15, flash_fwd.tiled")
 * @param {string} step
 * @param {string[]} [fresh] ids of views this run fills, not greyed */
export function showRunning(what, step, fresh = []) {
  const box = $("verdict");
  const t0 = performance.now();
  if (box.dataset.state !== "running") {
    const before = document.getElementById("verdict-line");
    const had = ["pass", "partial", "fail"].includes(box.dataset.state || "") && before;
    shown.previous = had ? el("p", { class: "previous stale", id: "verdict-previous" },
      el("span", { class: "stale-label" }, "Previous result, stale: "), ...[...before.childNodes].map((n) => n.cloneNode(true))) : null;
    box.dataset.state = "running";
    box.dataset.scope = "one";
    stopClock();
    shown.timer = window.setInterval(() => tick(t0), 250);
    for (const id of STALE) $(id).classList.toggle("stale", !fresh.includes(id));
  }
  const clock = el("span", { id: "verdict-clock", "aria-hidden": "true" }, "0.0 s");
  box.replaceChildren(el("p", { id: "verdict-line" }, el("span", { class: "word" }, "Running"), what),
    el("p", { id: "verdict-more", class: "small" }, `${step} · `, clock), ...(shown.previous ? [shown.previous] : []));
  box.dataset.started = String(t0);
}

/** The step of the run that is going (its clock keeps running).
 * @param {string} step */
export function showStep(step) {
  const more = document.getElementById("verdict-more");
  const clock = document.getElementById("verdict-clock");
  if (!more || !clock) return;
  more.replaceChildren(`${step} · `, clock);
}

/** @param {number} t0 */
function tick(t0) {
  const clock = document.getElementById("verdict-clock");
  const box = document.getElementById("verdict");
  if (!clock || !box || box.dataset.state !== "running") return stopClock();
  clock.textContent = `${((performance.now() - Number(box.dataset.started || t0)) / 1000).toFixed(1)} s`;
}

function stopClock() {
  if (shown.timer) window.clearInterval(shown.timer);
  shown.timer = 0;
}

/** The verdict of one run, with a link to its details.
 * @param {LiveResult} result */
export function showRunVerdict(result) {
  const v = result.verdict;
  showVerdict(v, [`${result.kernel}: ${v.text} `, el("a", { href: "#results-section", class: "small" }, "details")], "one");
}

/** The verdict of a run of every kernel (`prefix` before it: a cancelled one's).
 * @param {LiveSummary} summary
 * @param {string} [prefix] */
export function showSummary(summary, prefix = "") {
  showVerdict(summary, [prefix + summary.text], "all");
}

/** A run that did not start (its message is beside the Run button): said where the verdict is,
 * the previous result below it marked stale.
 * @param {string} why */
export function showNotRun(why) {
  stopClock();
  const box = $("verdict");
  const before = document.getElementById("verdict-line");
  const previous = shown.previous || (["pass", "partial", "fail"].includes(box.dataset.state || "") && before
    ? el("p", { class: "previous stale", id: "verdict-previous" }, el("span", { class: "stale-label" }, "Previous result, stale: "),
      ...[...before.childNodes].map((n) => n.cloneNode(true))) : null);
  box.dataset.state = "notrun";
  box.replaceChildren(el("p", { id: "verdict-line" }, el("span", { class: "word" }, "NOT RUN"), why),
    ...(previous ? [previous] : []));
  shown.previous = previous;
  for (const id of STALE) $(id).classList.add("stale");
}

/** @param {boolean} pass */
const pairWord = (pass) => /** @type {[string, string]} */ ([pass ? "PASS" : "FAIL", pass ? "pass" : "fail"]);

/** A live run's card: its verdict, share link, every pair, every runtime.
 * @param {LiveResult} result */
export function card(result) {
  const c = result.config;
  const cfg = Object.entries(c).map(([k, v]) => `${k}=${v}`).join(" ");
  const link = urlFor({ kernel: result.kernel, config: c });
  const pairs = el("table", { class: "pairs", "aria-label": `${result.kernel}: pairs of runtimes` },
    row("th", [["runtimes", "l"], ["output", "l"], "max abs err", "allowance", "verdict"]),
    ...result.pairs.map((p) => row("td", [[`${p.a} ↔ ${p.b}`, "l"], [p.output, "l"], fmt(p.max_abs_err), fmt(p.allowance), pairWord(p.pass)])));
  /** @type {import("./context.js").Runtime[]} */
  const names = ["browser", "pyodide", "native"];
  const times = el("table", { "aria-label": `${result.kernel}: runtimes` }, row("th", [["runtime", "l"], ["status", "l"], "wall ms", "GPU ms"]),
    ...names.map((name) => {
      const r = result.runtimes[name];
      const t = r.timings || {};
      const wall = t.wall_ms ?? t.reference_ms;
      const status = r.ok ? "ok" : r.skipped ? el("span", { class: "skipped" }, `unavailable here: ${r.skipped}`) : el("span", { class: "fail" }, String(r.error));
      const tr = row("td", [[name, "l"], [status, "l wrap"], wall === undefined ? "" : wall.toFixed(2), t.gpu_ms === undefined ? "" : t.gpu_ms.toFixed(3)]);
      tr.dataset.runtime = name;
      return tr;
    }));
  const yard = result.precision === "f16" ? "naive float16" : "naive float32";
  const note = el("p", { class: "muted" },
    `inputs sha256 ${result.digest.slice(0, 16)}…; ${yard} error ${Object.entries(result.naive_err).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}`);
  const empty = result.pairs.length ? [] : [el("p", { class: "skipped" }, "No comparison: fewer than two runtimes produced outputs.")];
  return el("div", { class: "run", "data-kernel": result.kernel, "data-pass": String(result.pass) },
    el("h3", {}, `${result.kernel} `, el("span", { class: stateClass(result.verdict.state) }, result.verdict.word), " ",
      el("a", { class: "share", href: link, title: "reopen this run" }, "link")),
    el("p", { class: "muted cfg" }, cfg), ...empty, ...(result.pairs.length ? [el("div", { class: "scroll", tabindex: 0, role: "region",
      "aria-label": `${result.kernel}: pairs` }, pairs)] : []),
    el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": `${result.kernel}: runtimes` }, times), note);
}
