// @ts-check
// A line chart of benchmark records as SVG, drawn at the width of its box (its text keeps its size
// on a phone: the drawing is redrawn when the box changes, never scaled), and its legend as HTML
// beside it, in groups: one entry per kernel (colour), per runtime (line), per source of records
// (marker) and per mode (filled or hollow), instead of one per combination. A kernel's legend entry
// shows or hides its lines. The x axis is categories in a given order (shapes, decode cases); the
// y axis linear, or log10 when the figures span more than two decades.

import { el, svgEl } from "./dom.js";

/**
 * @typedef {{ x: number | string, y: number, title: string }} Point
 * @typedef {{ key: string, kernel: string, runtime: string, source: string, mode: string, points: Point[] }} Series
 * @typedef {{ colour: Record<string, string>, dash: Record<string, string>, marker: Record<string, string>,
 *   words: { runtime: Record<string, string>, source: Record<string, string>, mode: Record<string, string> } }} Styles
 * @typedef {{ series: Series[], x: { kind: "category", label: string, order?: string[] }, y: { label: string }, label: string,
 *   folded?: string[] }} ChartSpec `folded`: kernels hidden until the reader shows them
 */

export const COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#57606a", "#bf3989", "#7d4e00",
  "#0a3069", "#4f8a10", "#a40e26"];
/** Line style by runtime: native solid, Chromium dashed, PyTorch dotted, anything else dash-dot. */
export const DASH = /** @type {Record<string, string>} */ ({ native: "none", chromium: "7 4", torch: "2 3", numpy: "2 3" });
const OTHER_DASH = "9 3 2 3";
/** Marker by source of records, in the order they come. */
export const MARKERS = ["circle", "square", "diamond", "triangle"];

/** The styles of `series`: a colour per kernel, a dash per runtime, a marker per source.
 * @param {Series[]} series
 * @param {Styles["words"]} words
 * @returns {Styles} */
export function stylesOf(series, words) {
  /** @type {Styles} */
  const styles = { colour: {}, dash: {}, marker: {}, words };
  for (const s of series) {
    if (!(s.kernel in styles.colour)) styles.colour[s.kernel] = COLOURS[Object.keys(styles.colour).length % COLOURS.length];
    if (!(s.runtime in styles.dash)) styles.dash[s.runtime] = DASH[s.runtime] || OTHER_DASH;
    if (!(s.source in styles.marker)) styles.marker[s.source] = MARKERS[Object.keys(styles.marker).length % MARKERS.length];
  }
  return styles;
}

/** A marker of `shape` at (x, y).
 * @param {string} shape
 * @param {number} x
 * @param {number} y
 * @param {Record<string, string | number>} attrs */
function marker(shape, x, y, attrs) {
  const r = 4;
  if (shape === "square") return svgEl("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, ...attrs });
  if (shape === "diamond") return svgEl("polygon", { points: `${x},${y - r - 1} ${x + r + 1},${y} ${x},${y + r + 1} ${x - r - 1},${y}`, ...attrs });
  if (shape === "triangle") return svgEl("polygon", { points: `${x},${y - r - 1} ${x + r + 1},${y + r} ${x - r - 1},${y + r}`, ...attrs });
  return svgEl("circle", { cx: x, cy: y, r, ...attrs });
}

/** A figure to 3 significant digits (exponent form when tiny or huge).
 * @param {number} x */
export function num(x) {
  if (x === 0) return "0";
  const a = Math.abs(x);
  return a < 1e-3 || a >= 1e5 ? x.toExponential(2) : x.toPrecision(3);
}

/** An axis tick: 1,000 rather than 1.00e+3.
 * @param {number} x */
const tick = (x) => x.toLocaleString("en", { maximumSignificantDigits: 3 });

/** The kernels a reader hid or showed, per chart box (kept across redraws). */
const toggled = new WeakMap();

/** Draw `spec` into `box` at its width (an SVG with role img and a text alternative), its legend
 * into `legend`.
 * @param {HTMLElement} box
 * @param {HTMLElement} legend
 * @param {ChartSpec} spec
 * @param {Styles} styles */
export function drawChart(box, legend, spec, styles) {
  /** @type {Map<string, boolean>} */
  const shownKernels = toggled.get(box) || new Map();
  toggled.set(box, shownKernels);
  const visible = (/** @type {string} */ k) => shownKernels.get(k) ?? !(spec.folded || []).includes(k);
  const all = spec.series;
  spec = { ...spec, series: all.filter((s) => visible(s.kernel)) };
  const points = spec.series.flatMap((s) => s.points);
  const redraw = () => drawChart(box, legend, { ...spec, series: all }, styles);
  if (!points.length) {
    box.replaceChildren();
    drawLegend(legend, all, styles, visible, shownKernels, redraw);
    return;
  }
  const W = Math.max(280, Math.round(box.clientWidth || 600));
  const narrow = W < 480;
  const H = Math.round(Math.min(380, Math.max(230, W * 0.5)));
  const m = { l: narrow ? 48 : 60, r: 14, t: 12, b: 44 };
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": spec.label, class: "chart" });
  // x: the categories in the order given, then in order of first appearance
  const present = new Set(points.map((p) => String(p.x)));
  const cats = [...new Set([...(spec.x.order || []), ...present])].filter((c) => present.has(c));
  const x0 = -0.5, x1 = cats.length - 0.5;
  /** @param {number | string} v */
  const X = (v) => m.l + (cats.indexOf(String(v)) - x0) / (x1 - x0) * (W - m.l - m.r);
  const ys = points.map((p) => p.y).filter((y) => y > 0);
  const logY = ys.length > 1 && Math.max(...ys) / Math.min(...ys) > 100;
  const top = Math.max(...points.map((p) => p.y), 1e-12);
  const step0 = 10 ** Math.floor(Math.log10(top / 4));
  const ystep = [1, 2, 5, 10].map((k) => k * step0).find((s) => top / s <= 5) || 10 * step0;
  const ymax = Math.ceil(top / ystep) * ystep;
  const d0 = logY ? Math.floor(Math.log10(Math.min(...ys))) : 0;
  const d1 = logY ? Math.ceil(Math.log10(Math.max(...ys))) : 1;
  /** @type {(y: number) => number} */
  const Y = logY
    ? (y) => H - m.b - (Math.log10(Math.max(y, 10 ** d0)) - d0) / (d1 - d0) * (H - m.t - m.b)
    : (y) => H - m.b - y / ymax * (H - m.t - m.b);
  const axis = { stroke: "#57606a", "stroke-width": 1 };
  svg.append(svgEl("line", { x1: m.l, y1: H - m.b, x2: W - m.r, y2: H - m.b, ...axis }),
    svgEl("line", { x1: m.l, y1: m.t, x2: m.l, y2: H - m.b, ...axis }));
  const longest = Math.max(...cats.map((c) => c.length));
  const every = Math.max(1, Math.ceil(cats.length / Math.max(1, Math.floor((W - m.l - m.r) / Math.max(40, 7 * Math.min(longest, 14))))));
  cats.forEach((v, i) => {
    svg.append(svgEl("line", { x1: X(v), y1: H - m.b, x2: X(v), y2: H - m.b + 4, ...axis }));
    if (i % every === 0) {
      const text = String(v);
      svg.append(svgEl("text", { x: X(v), y: H - m.b + 16, "text-anchor": "middle", class: "tick" },
        narrow && text.length > 12 ? text.slice(0, 11) + "…" : text));
    }
  });
  /** @type {number[]} */
  const yticks = [];
  if (logY) for (let d = d0; d <= d1; d++) yticks.push(10 ** d);
  else for (let t = 0; t <= ymax * (1 + 1e-9); t += ystep) yticks.push(t);
  for (const t of yticks) {
    svg.append(svgEl("line", { x1: m.l, y1: Y(t), x2: W - m.r, y2: Y(t), stroke: "#eaeef2" }),
      svgEl("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end", class: "tick" }, tick(Number(t.toPrecision(6)))));
  }
  svg.append(svgEl("text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle", class: "axis-label" }, spec.x.label));
  svg.append(svgEl("text", { x: 13, y: (m.t + H - m.b) / 2, "text-anchor": "middle", class: "axis-label",
    transform: `rotate(-90 13 ${(m.t + H - m.b) / 2})` }, logY ? `${spec.y.label} (log scale)` : spec.y.label));
  for (const s of spec.series) {
    const colour = styles.colour[s.kernel];
    const pts = [...s.points].sort((a, b) => X(a.x) - X(b.x));
    const g = svgEl("g", { "data-kernel": s.kernel, "data-runtime": s.runtime, "data-source": s.source, "data-mode": s.mode });
    if (pts.length > 1) {
      g.append(svgEl("polyline", { class: "series", "data-kernel": s.kernel, "data-runtime": s.runtime, "data-source": s.source,
        "data-mode": s.mode, fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": styles.dash[s.runtime],
        points: pts.map((p) => `${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join(" ") }));
    }
    for (const p of pts) {
      const dot = marker(styles.marker[s.source], X(p.x), Y(p.y), { fill: s.mode === "checked" ? "#fff" : colour, stroke: colour,
        "stroke-width": 1.5, class: "point" });
      dot.append(svgEl("title", {}, p.title));
      g.append(dot);
    }
    svg.append(g);
  }
  box.replaceChildren(svg);
  drawLegend(legend, all, styles, visible, shownKernels, redraw);
}

/** The legend in groups: kernels (colour; each a button that shows or hides its lines), runtimes
 * (line), sources (marker), modes (fill).
 * @param {HTMLElement} legend
 * @param {Series[]} series
 * @param {Styles} styles
 * @param {(kernel: string) => boolean} visible
 * @param {Map<string, boolean>} shownKernels
 * @param {() => void} redraw */
function drawLegend(legend, series, styles, visible, shownKernels, redraw) {
  /** @param {string} title @param {HTMLElement[]} items */
  const group = (title, items) => el("div", { class: "legend-group" }, el("span", { class: "legend-title" }, title),
    el("ul", {}, ...items));
  /** @param {Record<string, string | number>} attrs @param {(svg: SVGSVGElement) => void} draw @param {string} text */
  const item = (attrs, draw, text) => {
    const sample = svgEl("svg", { width: 26, height: 12, "aria-hidden": "true", class: "sample" });
    draw(sample);
    return el("li", attrs, sample, text);
  };
  const kernels = [...new Set(series.map((s) => s.kernel))];
  const runtimes = [...new Set(series.map((s) => s.runtime))];
  const sources = [...new Set(series.map((s) => s.source))];
  const modes = [...new Set(series.map((s) => s.mode))].filter((m) => m in styles.words.mode);
  const kernelItem = (/** @type {string} */ k) => {
    const sample = svgEl("svg", { width: 26, height: 12, "aria-hidden": "true", class: "sample" });
    sample.append(svgEl("line", { x1: 1, y1: 6, x2: 25, y2: 6, stroke: styles.colour[k], "stroke-width": 3 }));
    const button = el("button", { type: "button", class: "legend-toggle", "aria-pressed": String(visible(k)),
      title: visible(k) ? "hide its lines" : "show its lines" }, sample, k);
    button.addEventListener("click", () => {
      shownKernels.set(k, !visible(k));
      redraw();
    });
    return el("li", { "data-kernel": k, "data-shown": String(visible(k)) }, button);
  };
  legend.replaceChildren(
    group("kernel (colour; press to show or hide)", kernels.map(kernelItem)),
    group("runtime (line)", runtimes.map((r) => item({ "data-runtime": r },
      (g) => g.append(svgEl("line", { x1: 1, y1: 6, x2: 25, y2: 6, stroke: "#1d232a", "stroke-width": 2, "stroke-dasharray": styles.dash[r] })),
      styles.words.runtime[r] || r))),
    group("measured on (marker)", sources.map((s) => item({ "data-source": s },
      (g) => g.append(marker(styles.marker[s], 13, 6, { fill: "#1d232a", stroke: "#1d232a" })), styles.words.source[s] || s))),
    ...(modes.length ? [group("mode (fill)", modes.map((md) => item({ "data-mode": md },
      (g) => g.append(marker("circle", 13, 6, { fill: md === "checked" ? "#fff" : "#1d232a", stroke: "#1d232a", "stroke-width": 1.5 })),
      styles.words.mode[md])))] : []));
}
