// @ts-check
// What a live run showed: its verdict under the form and its card among the details. Python
// judges (wgattn.page.verdict: LiveResult.verdict, and PageSession.live_summary for a run of every
// kernel); this module only shows the words it sends.

import { $, el, fmt, row } from "./dom.js";
import { urlFor } from "./url_state.js";

/** The CSS class of a verdict's state: green, red, or amber for what did not run.
 * @param {Verdict["state"]} state */
export const stateClass = (state) => (state === "pass" ? "pass" : state === "fail" ? "fail" : "skipped");

/** Show a verdict under the form: its word, a sentence, amber notes.
 * @param {{ state: Verdict["state"], word: string, notes: string[] }} verdict
 * @param {Array<Node | string>} line what follows the word
 * @param {"one" | "all"} scope one run, or a run of every kernel */
function showVerdict(verdict, line, scope) {
  const box = $("verdict");
  box.dataset.state = verdict.state;
  box.dataset.scope = scope;
  box.replaceChildren(el("p", { id: "verdict-line" }, el("span", { class: "word" }, verdict.word), ...line),
    ...verdict.notes.map((n) => el("p", { class: "amber" }, n)));
}

/** The verdict of one run, with a link to its details.
 * @param {LiveResult} result */
export function showRunVerdict(result) {
  const v = result.verdict;
  showVerdict(v, [`${result.kernel}: ${v.text} `, el("a", { href: "#results-section", class: "small" }, "details")], "one");
}

/** The verdict of a run of every kernel.
 * @param {LiveSummary} summary */
export function showSummary(summary) {
  showVerdict(summary, [summary.text], "all");
}

/** The verdict when no run took place: the URL's configuration is not valid (its message is
 * beside the Run button). */
export function showNotRun() {
  showVerdict({ state: "fail", word: "NOT RUN", notes: [] }, ["the configuration in the URL is not valid: see the message above."], "one");
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
      const tr = row("td", [[name, "l"], [status, "l"], wall === undefined ? "" : wall.toFixed(2), t.gpu_ms === undefined ? "" : t.gpu_ms.toFixed(3)]);
      tr.dataset.runtime = name;
      return tr;
    }));
  const yard = result.precision === "f16" ? "naive float16" : "naive float32";
  const note = el("p", { class: "muted" },
    `inputs sha256 ${result.digest.slice(0, 16)}…; ${yard} error ${Object.entries(result.naive_err).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}`);
  return el("div", { class: "run", "data-kernel": result.kernel, "data-pass": String(result.pass) },
    el("h3", {}, `${result.kernel} `, el("span", { class: stateClass(result.verdict.state) }, result.verdict.word), " ",
      el("a", { class: "share", href: link, title: "reopen this run" }, "link")),
    el("p", { class: "muted cfg" }, cfg), el("div", { class: "scroll", tabindex: 0 }, pairs), el("div", { class: "scroll", tabindex: 0 }, times), note);
}
