// @ts-check
// The live form: the kernel list (what this browser cannot run marked), the fields of the chosen
// kernel's interface from the server's catalogue (GET /api/kernels carries wgattn.live's schema:
// the form works before Pyodide is loaded), the request they describe, and a run's error beside the
// Run button with the fields it names marked and the first of them focused. Python checks every
// value: the form does not validate.

import { $, el } from "./dom.js";
import { ctx, kernelInfo } from "./context.js";
import { browserCan, showKernelTable } from "./kernels.js";

/** Mark in the kernel list each kernel this browser cannot run, and why; the table says it too. */
export function markKernels() {
  for (const opt of $("kernel", HTMLSelectElement).options) {
    const k = kernelInfo(opt.value);
    if (!k) continue;
    const can = browserCan(k);
    opt.textContent = can.can === "no" ? `${k.id} (browser: ${can.short.replace(/^no: /, "")})` : k.id;
    opt.title = can.why || k.summary;
  }
  describeKernel();
  showKernelTable();
}

/** The chosen kernel's summary, why this browser cannot run it (amber), and its WGSL's link. */
function describeKernel() {
  const k = kernelInfo($("kernel", HTMLSelectElement).value);
  if (!k) return;
  const can = browserCan(k);
  $("kernel-summary").replaceChildren(k.summary, ...(can.can === "no" ? [" ", el("span", { class: "amber" }, `Not run in this browser: ${can.why}.`)] : []));
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

/** Fill the kernel list, grouped by interface, from the server's catalogue (GET /api/kernels).
 * @param {Catalogue} catalogue */
export function fillKernels(catalogue) {
  ctx.kernels = catalogue.kernels;
  ctx.interfaces = catalogue.interfaces;
  ctx.schema = catalogue.configs;
  /** @type {Record<string, KernelInfo[]>} */
  const byIface = {};
  for (const k of catalogue.kernels) (byIface[k.interface] = byIface[k.interface] || []).push(k);
  $("kernel").replaceChildren(...Object.entries(byIface).map(([iface, ks]) => el("optgroup", { label: iface },
    ...ks.map((k) => el("option", { value: k.id, title: k.summary }, k.id)))));
  markKernels();
}

/** Whether the configuration's fields show: as the reader chose (the toggle), else on wide
 * screens only (CSS decides, so nothing moves once the page is drawn). */
export function wireConfigToggle() {
  const toggle = $("config-toggle");
  const box = $("check");
  const shown = () => box.dataset.config === "open" || (box.dataset.config !== "closed" && matchMedia("(min-width: 60rem)").matches);
  const say = () => toggle.setAttribute("aria-expanded", String(shown()));
  toggle.addEventListener("click", () => {
    box.dataset.config = shown() ? "closed" : "open";
    say();
  });
  matchMedia("(min-width: 60rem)").addEventListener("change", say);
  say();
}

/** Show the configuration's fields (a run's error names one of them). */
function openConfig() {
  $("check").dataset.config = "open";
  $("config-toggle").setAttribute("aria-expanded", "true");
}

/** The named fields of the live form (the selector says their classes). */
function fields() {
  const found = $("config-fields").querySelectorAll("input[name], select[name]");
  return [.../** @type {NodeListOf<HTMLInputElement | HTMLSelectElement>} */ (found)];
}

/** The fields of interface `iface` (the catalogue's schema).
 * @param {string} iface
 * @returns {SchemaField[]} */
export function schemaOf(iface) {
  const rows = ctx.schema && ctx.schema[iface];
  if (!rows) throw new Error(`the live form has no fields for interface ${iface} (wgattn.live.schema)`);
  return rows;
}

/** Build `rows` (a configuration's fields) into `box`: plain labels, bounds as min/max, what
 * special values mean beside the field, as Python declares them (wgattn.interfaces.config). Values
 * come from `values` (a URL's) or the defaults. Ids are `${prefix}-${name}`.
 * @param {HTMLElement} box
 * @param {SchemaField[]} rows
 * @param {Record<string, string>} values
 * @param {string} prefix */
export function buildConfigFields(box, rows, values, prefix) {
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
    input.id = `${prefix}-${f.name}`;
    input.dataset.type = f.type;
    const bounds = f.min !== undefined && f.max !== undefined && f.type === "int" ? `${f.min} to ${f.max}` : "";
    const special = Object.entries(f.sentinels || {}).map(([v, meaning]) => `${v} = ${meaning}`);
    const hint = [...special, f.hint || ""].filter((x) => x).join("; ");
    input.title = [f.name, bounds, hint].filter((x) => x).join(": ");
    label.append(el("span", {}, f.label || f.name));
    if (f.type === "bool") label.append(el("span", { class: "row" }, input));
    else label.append(input);
    if (special.length) {
      const small = el("small", { class: "muted hint", id: `${prefix}-hint-${f.name}` }, special.join("; "));
      input.setAttribute("aria-describedby", small.id);
      label.append(small);
    }
    box.append(label);
  }
}

/** Build the fields of the kernel's interface. Values come from `values` (a URL's) or the
 * defaults: a field never carries another kernel's value over.
 * @param {string} kernelId
 * @param {Record<string, string>} [values] */
export function buildFields(kernelId, values = {}) {
  const k = kernelInfo(kernelId);
  if (!k) throw new Error(`unknown kernel ${kernelId}`);
  buildConfigFields($("config-fields"), schemaOf(k.interface), values, "field");
  describeKernel();
  showConfigLine();
}

/** The configuration in one line beside the toggle. */
export function showConfigLine() {
  $("config-line").textContent = fields().map((f) => `${f.name}=${f instanceof HTMLInputElement && f.type === "checkbox" ? f.checked : f.value}`).join(" ");
}

/** The fields of `box` that `text` (Python's message) names.
 * @param {Iterable<HTMLInputElement | HTMLSelectElement>} candidates
 * @param {string} text */
function namedIn(candidates, text) {
  return [...candidates].filter((f) => new RegExp(`\\b${f.name}\\b`).test(text));
}

/** A run that did not start: its message next to Run, the fields it names marked and the first
 * of them focused (the configuration shown).
 * @param {string} text */
export function showRunError(text) {
  const box = $("run-error");
  box.hidden = false;
  box.textContent = text;
  const named = namedIn(fields(), text);
  for (const f of named) {
    f.setAttribute("aria-invalid", "true");
    f.setAttribute("aria-errormessage", "run-error");
  }
  if (named.length) {
    openConfig();
    named[0].focus({ preventScroll: true });
  }
  box.scrollIntoView({ block: "nearest" });
}

/** A run went ahead: its error and the marked fields go. */
export function clearRunError() {
  $("run-error").hidden = true;
  for (const f of fields()) {
    f.removeAttribute("aria-invalid");
    f.removeAttribute("aria-errormessage");
  }
}

/** The request the form describes; Python checks every value (text that is no number goes as is).
 * @returns {import("./context.js").LiveRequest} */
export function requestFromForm() {
  return { kernel: $("kernel", HTMLSelectElement).value, config: configOf(fields()) };
}

/** The configuration `inputs` describe (numbers as numbers, checkboxes as booleans, the rest as typed).
 * @param {Array<HTMLInputElement | HTMLSelectElement>} inputs
 * @returns {import("./context.js").Config} */
export function configOf(inputs) {
  /** @type {import("./context.js").Config} */
  const config = {};
  for (const f of inputs) {
    const t = f.dataset.type;
    if (t === "bool" && f instanceof HTMLInputElement) config[f.name] = f.checked;
    else if ((t === "int" || t === "float") && f.value.trim() !== "" && Number.isFinite(Number(f.value))) config[f.name] = Number(f.value);
    else config[f.name] = f.value;
  }
  return config;
}
