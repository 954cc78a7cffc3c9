// Runs gemm.smx plans (built by bed.py) under Node with Dawn's own bindings (npm `webgpu`,
// dawn.node) on lavapipe's cooperative matrices, through the page's executor (static/webgpu.js)
// the way the page's benchmark does: upload, fill A and B on the GPU, one run, read C back.
//   node bed.mjs JOBS.json RESULTS.json [--toggles allow_unsafe_apis,dump_shaders]
// With dump_shaders, Dawn prints each shader's WGSL and SPIR-V to stdout: lines "@@ job <tag>"
// mark where each job starts.
import { readFileSync, writeFileSync } from "node:fs";
import { Executor } from "../../static/webgpu.js";

const args = process.argv.slice(2);
const [jobsPath, resultsPath] = args;
const at = args.indexOf("--toggles");
const toggles = at >= 0 ? args[at + 1] : "allow_unsafe_apis";
const mod = await import(process.env.WEBGPU_MODULE || "webgpu");
Object.assign(globalThis, mod.globals);
const gpu = mod.create([`enable-dawn-features=${toggles}`]);
const adapter = await gpu.requestAdapter();
const need = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"];
const requiredFeatures = /** @type {GPUFeatureName[]} */ (need.filter((f) => adapter.features.has(f)));
const requiredLimits = { maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
  maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
  maxComputeWorkgroupSizeX: adapter.limits.maxComputeWorkgroupSizeX,
  maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize };
const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
const executor = new Executor(device, { runtime: "browser", vendor: "", architecture: "", device: "", description: "", features: requiredFeatures });
const jobs = JSON.parse(readFileSync(jobsPath, "utf8"));
const results = [];
for (const job of jobs) {
  console.log(`@@ job ${job.tag}`);
  const t0 = performance.now();
  try {
    if (job.plan.unavailable) throw new Error(job.plan.unavailable);
    const timed = await executor.prepareTiming([{ plan: job.plan, initial: (name) => Uint8Array.from(Buffer.from(job.bytes[name], "base64")) }]);
    for (const f of job.fills) await executor.runOnTimed(timed, f);
    await executor.sample(timed, 1, "wall");
    const c = await executor.readTimed(timed, "c");
    Executor.releaseTiming(timed);
    results.push({ tag: job.tag, c: Buffer.from(c).toString("base64"), ms: performance.now() - t0 });
  } catch (e) {
    results.push({ tag: job.tag, error: String(e && e.message || e) });
  }
  console.error(`${job.tag}: ${results.at(-1).error || "ran"} (${(performance.now() - t0).toFixed(0)} ms)`);
}
writeFileSync(resultsPath, JSON.stringify(results));
process.exit(0);
