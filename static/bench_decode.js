// @ts-check
// The decode benchmark's form, beside the attention one: the configuration of the interface that
// serves decode (labelled fields, as Python declares them: PageSession.bench_schema), the kernels,
// rounds and warm-up; checked by Python as it is typed; Run times it (bench.js's runCaseBench)
// into a table of GB/s and share of the copy, and its records join the decode chart.

import { $, errorText, row } from "./dom.js";
import { buildConfigFields, configOf } from "./form.js";
import { caseState, checkForm, runCaseBench } from "./bench.js";
import { num } from "./chart.js";

/** The decode form's request.
 * @param {HTMLFormElement} form */
function requestOf(form) {
  const inputs = /** @type {Array<HTMLInputElement | HTMLSelectElement>} */ ([...$("decode-fields").querySelectorAll("input[name], select[name]")]);
  /** @param {string} name */
  const value = (name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value;
  return { op: "decode", config: configOf(inputs), impls: value("impls").trim(), rounds: value("rounds"), warmup_s: value("warmup_s") };
}

/** The records of a decode benchmark as a table.
 * @param {Array<Record<string, any>>} records */
function showTable(records) {
  const head = row("th", [["kernel [mode]", "l"], ["cache", "l"], "GB/s", "% of the copy", "median ms", "IQR", ["checked", "l"]]);
  $("decode-table").replaceChildren(head, ...records.map((r) => {
    const v = r.verified;
    const tr = row("td", [[`${r.impl}${r.mode ? ` [${r.mode}]` : ""}`, "l"], [r.dtype, "l"], num(r.gbps),
      r.kind === "copy" ? "100 (the copy)" : r.pct_of_copy ? r.pct_of_copy.toFixed(1) : "no copy", r.median_ms.toFixed(3),
      `±${(100 * r.spread).toFixed(1)}%`, [v ? `max |err| ${num(v.max_abs_err)} ≤ ${num(v.allowed)}` : "(a copy: nothing to check)", "l"]]);
    tr.dataset.impl = r.impl;
    return tr;
  }));
}

/** Wire the decode form (once Python is ready: its fields come from Python).
 * @param {import("./context.js").ReadyContext} ctx */
export function setupDecodeBench(ctx) {
  const form = $("decode-form", HTMLFormElement);
  const button = $("decode-run", HTMLButtonElement);
  /** @type {{ interface: string, fields: SchemaField[] }} */
  const schema = JSON.parse(ctx.page.bench_schema("decode"));
  buildConfigFields($("decode-fields"), schema.fields, {}, "decode");
  const check = () => checkForm(ctx, form, "decode-form-error", requestOf(form));
  form.addEventListener("input", check);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const request = requestOf(form);
    const why = check();
    const error = $("decode-error");
    if (why) {
      error.hidden = false;
      error.textContent = `Decode benchmark not started: ${why}`;
      const bad = form.querySelector("[aria-invalid=true]");
      if (bad instanceof HTMLElement) bad.focus();
      return;
    }
    error.hidden = true;
    button.disabled = true;
    const bar = $("decode-progress", HTMLProgressElement);
    bar.hidden = false;
    $("decode").dataset.status = "running";
    try {
      const records = await runCaseBench(ctx, request, (text, done, total) => {
        $("decode-status").textContent = text;
        bar.max = total;
        bar.value = done;
      });
      showTable(records);
      const skipped = caseState.skipped.map((s) => `${s.impl} skipped: ${s.reason}`);
      $("decode-status").textContent = `${records.length} record${records.length === 1 ? "" : "s"}` +
        (skipped.length ? `; ${skipped.join("; ")}` : "");
      if (caseState.error) {
        error.hidden = false;
        error.textContent = caseState.error;
      }
    } catch (e) {
      error.hidden = false;
      error.textContent = `Decode benchmark stopped: ${errorText(e)}`;
    } finally {
      bar.hidden = true;
      button.disabled = false;
      $("decode").dataset.status = caseState.status;
    }
  });
  button.disabled = false;
}
