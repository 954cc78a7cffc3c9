// @ts-check
// The live form: the kernel list (what this browser cannot run marked, as Python says), the fields
// of the chosen kernel's interface from wgattn.live's schema, the request they describe, and a
// run's error beside the Run button with the fields it names marked. Python checks every value:
// the form does not validate.

import { $, el } from "./dom.js";
import { ctx, kernelInfo, ready } from "./context.js";

/** Why this browser cannot run the kernel ("" when it can), as Python answered (wgattn.target).
 * @param {KernelInfo} k */
function unavailable(k) {
  if (!ctx.executor) return "no WebGPU";
  return ctx.availability[k.id] || "";
}

/** Mark in the kernel list each kernel this browser cannot run, and why. */
export function markKernels() {
  for (const opt of $("kernel", HTMLSelectElement).options) {
    const k = kernelInfo(opt.value);
    const why = k ? unavailable(k) : "";
    opt.textContent = k && why ? `${k.id} (browser: ${k.requires.length && ctx.executor ? "needs " + k.requires.join(", ") : why})` : opt.value;
    opt.title = why || (k ? k.summary : "");
  }
  describeKernel();
}

/** The chosen kernel's summary, why this browser cannot run it (amber), and its WGSL's link. */
function describeKernel() {
  const k = kernelInfo($("kernel", HTMLSelectElement).value);
  if (!k) return;
  const why = unavailable(k);
  $("kernel-summary").replaceChildren(k.summary, ...(why ? [" ", el("span", { class: "amber" }, `Not run in this browser: ${why}.`)] : []));
  $("kernel-wgsl", HTMLAnchorElement).href = `/shaders/${k.wgsl}`;
}

/** Load the chosen kernel's WGSL into the conformance view's editor, on its interface. */
export async function editKernel() {
  const k = kernelInfo($("kernel", HTMLSelectElement).value);
  if (!k) return;
  const res = await fetch(`/shaders/${k.wgsl}`);
  if (!res.ok) throw new Error(`could not load ${k.wgsl}: HTTP ${res.status}`);
  $("grid-source", HTMLTextAreaElement).value = await res.text();
  $("grid-interface", HTMLSelectElement).value = k.interface;
  $("conformance").scrollIntoView({ block: "start" });
  $("grid-source").focus({ preventScroll: true });
}

/** Fill the kernel list, grouped by interface, from the registry (GET /api/kernels).
 * @param {KernelInfo[]} kernels */
export function fillKernels(kernels) {
  ctx.kernels = kernels;
  /** @type {Record<string, KernelInfo[]>} */
  const byIface = {};
  for (const k of kernels) (byIface[k.interface] = byIface[k.interface] || []).push(k);
  $("kernel").replaceChildren(...Object.entries(byIface).map(([iface, ks]) => el("optgroup", { label: iface },
    ...ks.map((k) => el("option", { value: k.id, title: k.summary }, k.id)))));
  markKernels();
}

/** The named fields of the live form (the selector says their classes). */
function fields() {
  const found = $("config-fields").querySelectorAll("input[name], select[name]");
  return [.../** @type {NodeListOf<HTMLInputElement | HTMLSelectElement>} */ (found)];
}

/** Build the fields of the kernel's interface: plain labels, bounds as min/max, what special values
 * mean beside the field, as Python declares them (wgattn.interfaces.config). Values come from
 * `values` (a URL's) or the defaults: a field never carries another kernel's value over.
 * @param {string} kernelId
 * @param {Record<string, string>} [values] */
export function buildFields(kernelId, values = {}) {
  const k = kernelInfo(kernelId);
  if (!k) throw new Error(`unknown kernel ${kernelId}`);
  const box = $("config-fields");
  const rows = ready().schema[k.interface];
  if (!rows) throw new Error(`the live form has no fields for interface ${k.interface} (wgattn.live.schema)`);
  box.replaceChildren();
  for (const f of rows) {
    const label = document.createElement("label");
    const value = values[f.name] ?? String(f.default);
    let input;
    if (f.choices) {
      input = el("select", {}, ...f.choices.map((c) => new Option(c)));
      input.value = value;
    } else if (f.type === "bool") {
      input = el("input", { type: "checkbox" });
      input.checked = value === "true" || value === "1";
      label.className = "check";
    } else {
      // Bounds the browser shows; Python still checks every value (the form does not validate).
      input = el("input", { type: "number", step: f.type === "int" ? 1 : "any",
        min: f.type === "int" ? f.min : undefined, max: f.type === "int" ? f.max : undefined });
      input.value = value;
    }
    input.name = f.name;
    input.id = `field-${f.name}`;
    input.dataset.type = f.type;
    const bounds = f.min !== undefined && f.max !== undefined && f.type === "int" ? `${f.min} to ${f.max}` : "";
    const special = Object.entries(f.sentinels || {}).map(([v, meaning]) => `${v} = ${meaning}`);
    const hint = [...special, f.hint || ""].filter((x) => x).join("; ");
    input.title = [f.name, bounds, hint].filter((x) => x).join(": ");
    label.append(el("span", {}, f.label || f.name));
    if (f.type === "bool") label.append(el("span", { class: "row" }, input));
    else label.append(input);
    if (special.length) {
      const small = el("small", { class: "muted hint", id: `hint-${f.name}` }, special.join("; "));
      input.setAttribute("aria-describedby", small.id);
      label.append(small);
    }
    box.append(label);
  }
  describeKernel();
  showConfigLine();
}

/** The configuration in one line beside the folded form's summary. */
export function showConfigLine() {
  $("config-line").textContent = fields().map((f) => `${f.name}=${f instanceof HTMLInputElement && f.type === "checkbox" ? f.checked : f.value}`).join(" ");
}

// What a run that did not start greys out: the results of the previous run no longer answer the form.
const STALE = ["verdict", "results", "pictures", "all-section"];

/** A run that did not start: its message next to Run, the fields it names marked, the results
 * of the previous run greyed.
 * @param {string} text */
export function showRunError(text) {
  const box = $("run-error");
  box.hidden = false;
  box.textContent = text;
  let marked = 0;
  for (const f of fields()) {
    if (new RegExp(`\\b${f.name}\\b`).test(text)) {
      f.setAttribute("aria-invalid", "true");
      f.setAttribute("aria-errormessage", "run-error");
      marked += 1;
    }
  }
  if (marked) $("config-details", HTMLDetailsElement).open = true;
  for (const id of STALE) $(id).classList.add("stale");
  box.scrollIntoView({ block: "nearest" });
}

/** A run went ahead: its error, the marked fields and the greying go. */
export function clearRunError() {
  $("run-error").hidden = true;
  for (const f of fields()) {
    f.removeAttribute("aria-invalid");
    f.removeAttribute("aria-errormessage");
  }
  for (const id of STALE) $(id).classList.remove("stale");
}

/** The request the form describes; Python checks every value (text that is no number goes as is).
 * @returns {import("./context.js").LiveRequest} */
export function requestFromForm() {
  /** @type {import("./context.js").Config} */
  const config = {};
  for (const f of fields()) {
    const t = f.dataset.type;
    if (t === "bool" && f instanceof HTMLInputElement) config[f.name] = f.checked;
    else if ((t === "int" || t === "float") && f.value.trim() !== "" && Number.isFinite(Number(f.value))) config[f.name] = Number(f.value);
    else config[f.name] = f.value;
  }
  return { kernel: $("kernel", HTMLSelectElement).value, config };
}
