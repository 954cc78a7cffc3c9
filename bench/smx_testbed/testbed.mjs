// The test bed's Node half: the page's own WebGPU code (static/webgpu.js: openDevice, Executor)
// under Dawn's Node bindings (npm `webgpu`, dawn.node) instead of a browser. On Mesa >= 25.1's
// lavapipe Dawn offers chromium-experimental-subgroup-matrix (f16 x f16 -> f32 at 8x8x8, subgroup
// size 8) under the toggle allow_unsafe_apis: real subgroup matrices on a machine without a GPU.
// It makes no numerical judgement: jobs.py plans for the device reported here and judges the bytes.
//   node testbed.mjs target TARGET.json          the device as the page reports it (TargetJson)
//   node testbed.mjs run JOBS.json RESULTS.json  every job's output bytes, or why it failed
// WEBGPU_MODULE: the `webgpu` package's index.js (default: resolved from here); DAWN_TOGGLES:
// Dawn's toggles (default allow_unsafe_apis).
import { readFileSync, writeFileSync } from "node:fs";
import { Executor, openDevice } from "../../static/webgpu.js";

const [verb, ...paths] = process.argv.slice(2);
if (!((verb === "target" && paths.length === 1) || (verb === "run" && paths.length === 2))) {
  console.error("usage: node testbed.mjs target TARGET.json | run JOBS.json RESULTS.json");
  process.exit(2);
}
const dawn = await import(process.env.WEBGPU_MODULE || "webgpu");
Object.assign(globalThis, dawn.globals);
const toggles = process.env.DAWN_TOGGLES || "allow_unsafe_apis";
const gpuObject = dawn.create([`enable-dawn-features=${toggles}`]);
Object.defineProperty(globalThis, "navigator", { value: { gpu: gpuObject }, configurable: true });
/** @type {string[]} */
const lost = [];
const gpu = await openDevice((why) => lost.push(why));
if (gpu.error) {
  console.error(gpu.error);
  process.exit(1);
}
if (verb === "target") {
  writeFileSync(paths[0], JSON.stringify(gpu.target));
  console.error(`${paths[0]}: ${gpu.target.name}; subgroup matrices ${JSON.stringify(gpu.target.subgroup_matrix_configs)}`);
  process.exit(0);
}
const jobs = JSON.parse(readFileSync(paths[0], "utf8"));
if (JSON.stringify(jobs.target) !== JSON.stringify(gpu.target)) {
  console.error(`${paths[0]} was planned for another device (${jobs.target.name}), not ${gpu.target.name}: build it again`);
  process.exit(1);
}
const executor = new Executor(gpu.device, gpu.info);
/** @type {Record<string, { raw: Record<string, string> } | { error: string }>} */
const results = {};
for (const job of jobs.jobs) {
  if (job.refused) continue;
  try {
    const { raw } = await executor.run(job.plan, (name) => Buffer.from(job.bytes[name], "base64"));
    results[job.name] = { raw: Object.fromEntries(Object.entries(raw).map(([b, bytes]) => [b, Buffer.from(bytes).toString("base64")])) };
  } catch (e) {
    const error = String(/** @type {any} */ (e).message || e);
    results[job.name] = { error };
    console.error(`${job.name}: ${error.slice(0, 400)}`);
  }
}
writeFileSync(paths[1], JSON.stringify({ results, lost }));
console.error(`${paths[1]}: ${Object.keys(results).length} cases run${lost.length ? `; device lost: ${lost.join("; ")}` : ""}`);
process.exit(0);
