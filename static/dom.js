// @ts-check
// The page's DOM helpers, written once: look an element up by id, build elements from text (never
// from HTML: the page sets no innerHTML, so a kernel name or a compiler message is always text),
// format numbers the way every table of the page shows them, say what a caught error says, and
// mark a page's outcome for the tests.

/**
 * The element with id `id`, of class `type` (HTMLElement unless given). Throws when the page has no
 * such element, or one of another class: a renamed id fails here by name, not later as "null".
 * @template {HTMLElement} [T=HTMLElement]
 * @param {string} id
 * @param {{ new (): T; prototype: T }} [type]
 * @returns {T}
 */
export function $(id, type) {
  /** @type {Element | null} */
  const found = document.getElementById(id);
  const want = type || HTMLElement;
  if (!(found instanceof want)) {
    throw new Error(found ? `#${id} is a ${found.constructor.name}, not a ${want.name}` : `the page has no #${id}`);
  }
  return /** @type {T} */ (found);
}

/** @typedef {string | number | boolean | undefined} AttrValue attribute values; undefined and false leave it out */
/** @typedef {Node | string} Child */

/**
 * An HTML element with attributes `attrs` (set as attributes: "class", "data-kernel", "colspan")
 * and `children` (strings become text nodes).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue>} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  e.append(...children);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";

/**
 * An SVG element, as el() makes HTML ones.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue>} [attrs]
 * @param {...Child} children
 * @returns {SVGElementTagNameMap[K]}
 */
export function svgEl(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  setAttrs(e, attrs);
  e.append(...children);
  return e;
}

/**
 * @param {Element} e
 * @param {Record<string, AttrValue>} attrs
 */
function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : String(v));
  }
}

/**
 * A table row of cells: a string or node is a right-aligned cell; `[content, className]` a cell
 * with that class ("l" aligns left, "pass"/"fail" colour a verdict).
 * @param {"td" | "th"} tag
 * @param {Array<Child | [Child, string]>} cells
 * @returns {HTMLTableRowElement}
 */
export function row(tag, cells) {
  return el("tr", {}, ...cells.map((c) => (Array.isArray(c) ? el(tag, { class: c[1] || undefined }, c[0]) : el(tag, {}, c))));
}

/**
 * Run a page's `main` and mark its outcome on <body data-status>, "done" or "error" (what the
 * tests wait for); `stopped(text)` shows why it failed.
 * @param {() => Promise<void>} main
 * @param {(why: string) => void} stopped
 */
export function runPage(main, stopped) {
  main().then(
    () => { document.body.dataset.status = "done"; },
    (e) => {
      stopped(errorText(e));
      document.body.dataset.status = "error";
    },
  );
}

/**
 * A number as the page's tables show errors and allowances: 2 digits, exponent form.
 * @param {unknown} x
 * @returns {string}
 */
export const fmt = (x) => (typeof x === "number" ? x.toExponential(2) : String(x));

/**
 * The readable part of a Python exception raised through Pyodide (its last line).
 * @param {unknown} e
 * @returns {string}
 */
export function pyError(e) {
  const lines = errorText(e).trim().split("\n");
  return lines[lines.length - 1].replace(/^ValueError: /, "");
}

/**
 * What a caught value says: an Error's message, anything else as text.
 * @param {unknown} e
 * @returns {string}
 */
export function errorText(e) {
  const message = e && typeof e === "object" && "message" in e ? e.message : undefined;
  return message ? String(message) : String(e);
}
