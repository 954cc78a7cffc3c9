// The harness under Node with Dawn's own bindings (npm `webgpu`, dawn.node): runs a job file on the
// adapter Dawn picks and writes a results file for jobs.py to judge, as the bench page does in a
// browser. Made for a machine without a GPU: Mesa >= 25.1's lavapipe exposes
// VK_KHR_cooperative_matrix (f16 x f16 -> f32 at 8x8x8, subgroup size 8), which Dawn turns into
// chromium-experimental-subgroup-matrix under the toggle allow_unsafe_apis (testbed.sh sets it up).
//   node testbed.mjs JOBS.json RESULTS.json [--timing] [--toggles allow_unsafe_apis,...]
// WEBGPU_MODULE: the path of the `webgpu` package's index.js (default: resolved from here).
import { readFileSync, writeFileSync } from "node:fs";
import { runJobs } from "./smx.js";

const args = process.argv.slice(2);
const [jobsPath, resultsPath] = args;
const at = args.indexOf("--toggles");
const toggles = at >= 0 ? args[at + 1] : "allow_unsafe_apis";
const mod = await import(process.env.WEBGPU_MODULE || "webgpu");
Object.assign(globalThis, mod.globals);
const gpu = mod.create([`enable-dawn-features=${toggles}`]);
const adapter = await gpu.requestAdapter();
const report = { toggles, errors: [] };
const getJobs = async () => JSON.parse(readFileSync(jobsPath, "utf8"));
await runJobs(adapter, getJobs, report, {
  timing: args.includes("--timing"), log: (line) => console.error(line),
  timeOpts: { warmMs: 200, rounds: 3, targetMs: 200 },
});
writeFileSync(resultsPath, JSON.stringify(report));
console.error(report.no_smx || `wrote ${resultsPath}`);
process.exit(0);
