// The conformance view: the `wgattn check` grid run by this browser's WebGPU, for the project's
// kernels of an interface or for WGSL pasted or dropped in. Python (under Pyodide) builds every
// plan and judges every output; this module only executes and draws.
// Publishes window.wgattn.conformance = {interface, cases: [{kernel, case, pass, rows}], passed, failed,
// cancelled, precision} (rows of a failing output carry `where`: wgattn.localise). A progress
// bar follows the cases; Cancel stops after the case that is running.

import { CompileError, runPrepared } from "./webgpu.js";

const $ = (id) => document.getElementById(id);
const grid = { cancel: false };

function fmt(x) {
  return typeof x === "number" ? x.toExponential(2) : String(x);
}

/** A table cell holding `text` verbatim (textContent: a compiler's `vec4<f32>` stays text, never a tag). */
function cell(text, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

/** A failing output, localised by Python (wgattn.localise): likely class and worst elements. */
function whereRow(w) {
  const tr = document.createElement("tr");
  tr.className = "where";
  const at = (w.worst || []).slice(0, 3).map((it) => ("sequence" in it
    ? `seq ${it.sequence} ${"key" in it ? "key " + it.key : "row " + it.row} head ${it.head}` +
      `${"column" in it ? " col " + it.column : ""} (${"keys" in it ? "keys" : "queries"} ` +
      `${(it.keys || it.queries)[0]}..${(it.keys || it.queries)[1]})`
    : `index [${it.index}]`) + `: |err| ${fmt(it.err)}`).join("; ");
  const td = cell("", "l");
  td.colSpan = 5;
  const likely = document.createElement("b");
  likely.textContent = String(w.likely);
  const evidence = document.createElement("span");
  evidence.className = "muted";
  evidence.textContent = (w.evidence || []).join("; ");
  td.append("likely ", likely, ` — ${at}`, document.createElement("br"), evidence);
  tr.append(cell(""), td);
  return tr;
}

/** One judged output as a table row, every field as text. */
function resultRow(r) {
  const tr = document.createElement("tr");
  tr.append(cell(r.kernel, "l"), cell(r.case, "l"), cell(r.output, "l"), cell(fmt(r.max_abs_err)),
    cell(fmt(r.allowance)), cell(`${r.pass ? "PASS" : "FAIL"}${r.error ? ": " + r.error : ""}`, r.pass ? "pass" : "fail"));
  return tr;
}

/** The grid table's header row. */
function headerRow() {
  const tr = document.createElement("tr");
  for (const [text, left] of [["kernel", 1], ["case", 1], ["output", 1], ["max abs err", 0], ["allowance", 0], ["verdict", 0]]) {
    const th = document.createElement("th");
    if (left) th.className = "l";
    th.textContent = text;
    tr.append(th);
  }
  return tr;
}

/** Run the grid; `ctx` = {page, executor}. Resolves to the summary. */
export async function runGrid(ctx, iface, source) {
  const page = ctx.page;
  const start = JSON.parse(page.grid_start(JSON.stringify({
    interface: iface, source: source || null, features: ctx.gpu.info.features })));
  // Kernels needing features this adapter lacks are skipped, and listed as skipped (not passed).
  const summary = { interface: iface, user: !!source, cases: [], passed: 0, failed: 0, skipped: start.skipped, cancelled: false,
    precision: (window.wgattn.precision || {}).browser || null };  // this browser's built-ins, measured
  window.wgattn.conformance = summary;
  const table = $("grid-table");
  table.replaceChildren(headerRow());
  const bar = $("grid-progress");
  bar.max = start.items.length;
  bar.value = 0;
  for (let i = 0; i < start.items.length; i++) {
    if (grid.cancel) {
      summary.cancelled = true;
      break;
    }
    bar.value = i;
    if (!ctx.executor) throw new Error("the WebGPU device was lost: start it again (the button above), then rerun the grid");
    $("grid-status").textContent = `case ${i + 1} of ${start.items.length}: ${start.items[i].case}`;
    const prepared = JSON.parse(page.grid_prepare(start.job, i));
    let error = "";
    let compileError = false;
    try {
      await runPrepared(ctx.executor, page, prepared);
    } catch (e) {
      error = String(e.message || e);
      compileError = e instanceof CompileError;
    }
    const rows = JSON.parse(page.grid_judge(prepared.run, error));
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
  const skipped = start.skipped.map((k) => `${k.kernel} skipped: ${k.reason}`).join("; ");
  $("grid-status").textContent = (summary.cancelled ? `cancelled after ${summary.cases.length} of ${start.items.length} cases: ` : "") +
    `${summary.passed} passed, ${summary.failed} failed` + (skipped ? `; ${skipped}` : "");
  return summary;
}

/** Wire the view's form (interface select, WGSL textarea or dropped file, Run button). */
export function setupConformance(ctx, interfaces, showMessage) {
  $("grid-interface").replaceChildren(...interfaces.map((n) => new Option(n)));
  const area = $("grid-source");
  $("grid-cancel").addEventListener("click", () => { grid.cancel = true; });
  area.addEventListener("dragover", (ev) => ev.preventDefault());
  area.addEventListener("drop", async (ev) => {
    ev.preventDefault();
    const file = ev.dataTransfer.files[0];
    if (file) area.value = await file.text();
  });
  $("grid-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const section = $("conformance");
    if (!ctx.executor) {
      showMessage("The conformance view needs WebGPU, which this browser does not offer.");
      section.dataset.status = "error";
      return;
    }
    $("grid-run").disabled = true;
    grid.cancel = false;
    $("grid-cancel").hidden = false;
    $("grid-progress").hidden = false;
    section.dataset.status = "running";
    try {
      const summary = await runGrid(ctx, $("grid-interface").value, area.value.trim());
      section.dataset.status = summary.cancelled ? "cancelled" : "done";
    } catch (e) {
      showMessage(`Conformance run stopped: ${e.message}`);
      section.dataset.status = "error";
    } finally {
      $("grid-run").disabled = false;
      $("grid-cancel").hidden = true;
    }
  });
}
