// @ts-check
// The conformance view: the `wgattn check` grid run by this browser's WebGPU, for the project's
// kernels of an interface or for WGSL pasted or dropped in. Python (under Pyodide) builds every
// plan and judges every output; this module only executes and draws.
// Publishes window.wgattn.conformance = {interface, cases: [{kernel, case, pass, rows}], passed, failed,
// skipped: [{kernel, case?, reason}], cancelled, precision} (rows of a failing output carry `where`:
// wgattn.localise; a kernel the device cannot run is skipped whole, a case it cannot take alone).
// A progress bar follows the cases; Cancel stops after the case that is running.

import { $, el, errorText, fmt, row } from "./dom.js";
import { CompileError, runPrepared } from "./webgpu.js";

/**
 * The grid's shapes that Python makes (GridStart, GridItem, GridSkip, GridRow, Where, WorstElement:
 * wgattn.page.grid and wgattn.localise) are declared in wire.d.ts, generated from the Python.
 * @typedef {{ interface: string, user: boolean, cases: Array<{ kernel: string, case: string, pass: boolean, rows: GridRow[] }>,
 *   passed: number, failed: number, skipped: GridSkip[], cancelled: boolean, precision: unknown }} GridSummary
 */

const grid = { cancel: false };

/** Where a localised element is: its sequence, row or key, head and column in a packed case, else
 * its index named by the output's axes ("batch 0, head 3, query 5, dim 2").
 * @param {WorstElement} it
 * @param {string[]} axes */
function place(it, axes) {
  if (it.sequence === undefined) return it.index.map((i, n) => `${axes[n] || `axis ${n}`} ${i}`).join(", ");
  const span = it.keys || it.queries || [];
  return `seq ${it.sequence} ${it.key !== undefined ? "key " + it.key : "row " + it.row} head ${it.head}` +
    `${it.column !== undefined ? " col " + it.column : ""} (${it.keys ? "keys" : "queries"} ${span[0]}..${span[1]})`;
}

/** A failing output, localised by Python (wgattn.localise): likely class and worst elements.
 * @param {Where} w */
function whereRow(w) {
  const at = (w.worst || []).slice(0, 3).map((it) => `${place(it, w.axes || [])}: |err| ${fmt(it.err)}`).join("; ");
  const td = el("td", { class: "l wrap", colspan: 5 }, "likely ", el("b", {}, String(w.likely)), ` — ${at}`, el("br"),
    el("span", { class: "muted" }, (w.evidence || []).join("; ")));
  if (w.map) td.append(errorGrid(w.map));
  return el("tr", { class: "where" }, el("td"), td);
}

/** A failing output's error map: |error| / allowance per head (rows) and block of queries or tokens
 * (columns), the axes named as the output has them; over 1 in red, so that a mask edge shows as a
 * column and a bad head as a row.
 * @param {WhereMap} m */
function errorGrid(m) {
  const blocks = m.blocks.map(([a, b]) => (b - a > 1 ? `${a}..${b - 1}` : String(a)));
  const rows = m.ratio.slice(0, 16);
  const what = `|error| ÷ allowance by ${m.rows}${m.blocks_of ? ` and block of ${m.blocks_of}` : ""}`;
  return el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": what }, el("table", { class: "errgrid", "aria-label": what },
    el("caption", {}, what + (m.ratio.length > rows.length ? ` (the first ${rows.length} of ${m.ratio.length})` : "")),
    row("th", [[`${m.rows} ↓  ${m.blocks_of || ""} →`, "l"], ...blocks]),
    ...rows.map((ratios, h) => el("tr", {}, el("th", { class: "l" }, String(h)),
      ...ratios.map((r) => el("td", { class: r > 1 ? "over" : undefined }, r.toPrecision(2)))))));
}

/** One judged output as a table row, every field as text (a compiler's `vec4<f32>` stays text, never a tag).
 * @param {GridRow} r */
function resultRow(r) {
  if (r.skipped) return row("td", [[r.kernel, "l"], [r.case, "l"], [r.output, "l"], "", "", [`skipped: ${r.skipped}`, "skipped"]]);
  return row("td", [[r.kernel, "l"], [r.case, "l"], [r.output, "l"], fmt(r.max_abs_err), fmt(r.allowance),
    [`${r.pass ? "PASS" : "FAIL"}${r.error ? ": " + r.error : ""}`, r.pass ? "pass" : "fail"]]);
}

/** The grid table's header row. */
function headerRow() {
  return row("th", [["kernel", "l"], ["case", "l"], ["output", "l"], "max abs err", "allowance", "verdict"]);
}

/** Run the grid of interface `iface` on the project's kernels, or on WGSL `source`. Resolves to the summary.
 * @param {import("./context.js").ReadyContext} ctx
 * @param {string} iface
 * @param {string} source
 * @returns {Promise<GridSummary>} */
export async function runGrid(ctx, iface, source) {
  const page = ctx.page;
  if (!ctx.executor) throw new Error("the conformance view needs WebGPU, which this browser does not offer");
  /** @type {GridStart} */
  const start = JSON.parse(page.grid_start(JSON.stringify({
    interface: iface, source: source || null })));
  // Kernels this device cannot run are skipped by Python, and listed as skipped (not passed).
  /** @type {GridSummary} */
  const summary = { interface: iface, user: !!source, cases: [], passed: 0, failed: 0, skipped: start.skipped, cancelled: false,
    precision: (window.wgattn.precision || {}).browser || null };  // this browser's built-ins, measured
  window.wgattn.conformance = summary;
  const table = $("grid-table");
  table.replaceChildren(headerRow());
  const bar = $("grid-progress", HTMLProgressElement);
  bar.max = start.items.length;
  bar.value = 0;
  for (let i = 0; i < start.items.length; i++) {
    if (grid.cancel) {
      summary.cancelled = true;
      break;
    }
    bar.value = i;
    const executor = ctx.executor;
    if (!executor) throw new Error("the WebGPU device was lost: start it again (the button above), then rerun the grid");
    $("grid-status").textContent = `case ${i + 1} of ${start.items.length}: ${start.items[i].case}`;
    /** @type {Prepared} */
    const prepared = JSON.parse(page.grid_prepare(start.job, i));
    let error = "";
    let compileError = false;
    try {
      await runPrepared(executor, page, prepared);
    } catch (e) {
      error = errorText(e);
      compileError = e instanceof CompileError;
    }
    /** @type {GridRow[]} */
    const rows = JSON.parse(page.grid_judge(prepared.run, error));
    const skip = rows.find((r) => r.skipped);
    if (skip) {  // the kernel cannot take this case on this device: listed as skipped, never passed
      summary.skipped.push({ kernel: skip.kernel, case: skip.case, reason: skip.skipped || "" });
      table.append(resultRow(skip));
      continue;
    }
    const pass = rows.every((r) => r.pass);
    summary.cases.push({ kernel: start.items[i].kernel, case: start.items[i].case, pass, rows });
    summary[pass ? "passed" : "failed"] += 1;
    for (const r of rows) {
      table.append(resultRow(r));
      if (r.where) table.append(whereRow(r.where));
    }
    if (compileError) {
      page.release(start.job);
      throw new Error(error);  // nothing else will compile either: say so once, plainly
    }
  }
  page.release(start.job);  // a cancelled grid's (one whose every case was judged is freed already)
  bar.value = summary.cases.length;
  const skipped = summary.skipped.map((k) => `${k.kernel}${k.case ? " on " + k.case : ""} skipped: ${k.reason}`).join("; ");
  $("grid-status").textContent = (summary.cancelled ? `cancelled after ${summary.cases.length} of ${start.items.length} cases: ` : "") +
    `${summary.passed} passed, ${summary.failed} failed` + (skipped ? `; ${skipped}` : "");
  return summary;
}

/** Why the grid stopped, next to its Run button.
 * @param {string} text */
function stopped(text) {
  const error = $("grid-error");
  error.textContent = text;
  error.hidden = false;
  error.scrollIntoView({ block: "nearest" });
}

/** Wire the view's form (interface select, WGSL textarea or dropped file, Run button).
 * @param {import("./context.js").ReadyContext} ctx
 * @param {string[]} interfaces */
export function setupConformance(ctx, interfaces) {
  const select = $("grid-interface", HTMLSelectElement);
  select.replaceChildren(...interfaces.map((n) => new Option(n)));
  const area = $("grid-source", HTMLTextAreaElement);
  const run = $("grid-run", HTMLButtonElement);
  $("grid-cancel").addEventListener("click", () => { grid.cancel = true; });
  area.addEventListener("dragover", (ev) => ev.preventDefault());
  area.addEventListener("drop", async (ev) => {
    ev.preventDefault();
    const file = ev.dataTransfer && ev.dataTransfer.files[0];
    if (file) area.value = await file.text();
  });
  $("grid-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const section = $("conformance");
    const error = $("grid-error");
    error.hidden = true;
    if (!ctx.executor) {
      stopped("The conformance view needs WebGPU, which this browser does not offer.");
      section.dataset.status = "error";
      return;
    }
    run.disabled = true;
    grid.cancel = false;
    $("grid-cancel").hidden = false;
    $("grid-progress").hidden = false;
    section.dataset.status = "running";
    try {
      const summary = await runGrid(ctx, select.value, area.value.trim());
      section.dataset.status = summary.cancelled ? "cancelled" : "done";
    } catch (e) {
      stopped(`Conformance run stopped: ${errorText(e)}`);
      $("grid-status").textContent = "stopped: see the message above";
      section.dataset.status = "error";
    } finally {
      run.disabled = false;
      $("grid-cancel").hidden = true;
      $("grid-progress").hidden = true;
    }
  });
}
