// @ts-check
// The bench page: runs a job file (jobs.py build; ?jobs=URL, default out/jobs.json) in this
// browser's WebGPU and leaves everything in window.__report (window.__done once finished) for
// cdp.py to read over the DevTools protocol. Query: jobs=URL, mode=NAME (a label), timing=0
// (correctness only), quick=1 (the quick correctness cases), variants=a,b and tags=t,u (only
// those timing variants and job entries), gemm=0 (no GEMM ceiling).
import { runJobs } from "./smx.js";

/** @type {any} */
const report = { errors: [] };
/** @type {any} */ (window).__report = report;

/** @param {string} line */
function log(line) {
  const el = document.getElementById("log");
  if (el) el.textContent += line + "\n";
  console.log(line);
}

/** @param {string} text */
function status(text) {
  const el = document.getElementById("status");
  if (el) el.textContent = text;
}

async function main() {
  const q = new URLSearchParams(location.search);
  report.mode = q.get("mode") || "";
  if (!navigator.gpu) throw new Error("no navigator.gpu: WebGPU needs a secure context (http://127.0.0.1) and, in Chromium on Linux, --enable-unsafe-webgpu");
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("no WebGPU adapter");
  const getJobs = async () => (await fetch(q.get("jobs") || "out/jobs.json")).json();
  const list = (/** @type {string} */ name) => (q.get(name) ? String(q.get(name)).split(",") : null);
  await runJobs(adapter, getJobs, report, {
    timing: q.get("timing") !== "0", quick: q.get("quick") === "1", variants: list("variants"), tags: list("tags"),
    gemm: q.get("gemm") !== "0", log, status,
  });
}

main().catch((e) => {
  report.errors.push(String((e && e.stack) || e));
  status(`error: ${(e && e.message) || e}`);
}).finally(() => { /** @type {any} */ (window).__done = true; log("done"); });
