// The harness under Node with Dawn's own bindings (npm `webgpu`, dawn.node): runs a job file's
// correctness plans (and, with --timing, its timing plans) on the adapter Dawn picks and writes a
// results file for jobs.py to judge. Made for a machine without a GPU: Mesa >= 25.1's lavapipe
// exposes VK_KHR_cooperative_matrix (f16 x f16 -> f32 at 8x8x8, subgroup size 8), which Dawn
// turns into chromium-experimental-subgroup-matrix with the toggle allow_unsafe_apis.
//   node testbed.mjs JOBS.json RESULTS.json [--timing] [--toggles allow_unsafe_apis,...]
// WEBGPU_MODULE: the path of the `webgpu` package's index.js (default: resolved from here).
import { readFileSync, writeFileSync } from "node:fs";
import { adapterReport, missing, offers, openDevice, prepareTimed, runCorrectness, timeRounds } from "./smx.js";

const args = process.argv.slice(2);
const [jobsPath, resultsPath] = args;
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const toggles = opt("--toggles", "allow_unsafe_apis");
const mod = await import(process.env.WEBGPU_MODULE || "webgpu");
Object.assign(globalThis, mod.globals);
const gpu = mod.create([`enable-dawn-features=${toggles}`]);
const adapter = await gpu.requestAdapter();
const log = (line) => console.error(line);
const results = { adapter: adapterReport(adapter), toggles, configs: {}, timing: {} };
const why = missing(results.adapter);
if (why) {
  results.error = why;
} else {
  const jobs = JSON.parse(readFileSync(jobsPath, "utf8"));
  const { executor } = await openDevice(adapter);
  for (const entry of jobs.configs) {
    if (entry.refused) continue;
    if (!offers(results.adapter, entry.config)) {
      results.configs[entry.tag] = { skipped: `the adapter does not list f16 -> f32 ${entry.tag}` };
      continue;
    }
    const t0 = performance.now();
    results.configs[entry.tag] = { correctness: await runCorrectness(executor, entry, log) };
    log(`${entry.tag}: ${entry.correctness.length} plans in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
    if (args.includes("--timing")) {
      for (const shape of jobs.timed) {
        const same = entry.timing.filter((j) => j.shape.join() === shape.join());
        const prep = await prepareTimed(executor, same);
        results.timing[`${entry.tag}:${shape.join("x")}`] = { errors: prep.errors, rows: await timeRounds(prep.timed, { warmMs: 200, rounds: 3, targetMs: 200 }) };
        prep.free();
      }
    }
  }
}
writeFileSync(resultsPath, JSON.stringify(results));
log(results.error || `wrote ${resultsPath}`);
process.exit(0);
