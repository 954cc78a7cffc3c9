// @ts-check
// The subgroup-matrix attention harness's executor, shared by the bench page (a browser) and
// testbed.mjs (Node with Dawn): opens a device with the features flash_fwd.smx needs, runs the
// correctness plans of a job file (built by jobs.py) and returns their output bytes, times the
// timing plans (warm-up by time, interleaved rounds), and times a subgroup-matrix GEMM of its own
// as the ceiling. It makes no numerical judgement: jobs.py judges the bytes with the project's
// reference and tolerance. Plans run through the page's own executor (static/webgpu.js).

import { Executor } from "../../static/webgpu.js";

const NEED = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"];
const LIMITS = ["maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupsPerDimension"];
// What a Chromium on Linux/NVIDIA needs today for f16 subgroup matrices (Dawn keeps f16 off there).
export const FLAGS_HINT = "--enable-unsafe-webgpu --enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia";

/** The adapter as plain data: names, features, subgroup sizes, matrix configurations, limits.
 * @param {GPUAdapter} adapter */
export function adapterReport(adapter) {
  /** @type {any} */
  const i = adapter.info || {};
  return {
    vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    subgroupMinSize: i.subgroupMinSize, subgroupMaxSize: i.subgroupMaxSize,
    features: Array.from(adapter.features).sort(),
    configs: Array.from(i.subgroupMatrixConfigs || []).map((/** @type {any} */ c) => ({
      componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K })),
    limits: Object.fromEntries(LIMITS.map((k) => [k, /** @type {any} */ (adapter.limits)[k]])),
  };
}

/** Why this adapter cannot run flash_fwd.smx, or "" when it can.
 * @param {ReturnType<typeof adapterReport>} rep */
export function missing(rep) {
  const lacks = NEED.filter((f) => !rep.features.includes(f));
  if (lacks.length) return `the adapter lacks ${lacks.join(", ")} (no subgroup-matrix path); in Chromium on Linux/NVIDIA start it with ${FLAGS_HINT}`;
  if (!rep.configs.some((c) => c.componentType === "f16" && c.resultComponentType === "f32")) {
    return `the adapter lists no f16 x f16 -> f32 subgroup-matrix configuration (it lists ${JSON.stringify(rep.configs)}); ${FLAGS_HINT}`;
  }
  return "";
}

/** A device with the features flash_fwd.smx needs (plus timestamp-query when offered) and the
 * adapter's largest limits.
 * @param {GPUAdapter} adapter */
export async function openDevice(adapter) {
  const requiredFeatures = /** @type {GPUFeatureName[]} */ (NEED.concat(["timestamp-query"]).filter((f) => adapter.features.has(f)));
  const requiredLimits = Object.fromEntries(LIMITS.map((k) => [k, /** @type {any} */ (adapter.limits)[k]]));
  const device = await adapter.requestDevice({ label: "smx", requiredFeatures, requiredLimits });
  const info = { runtime: /** @type {"browser"} */ ("browser"), vendor: "", architecture: "", device: "", description: "", features: requiredFeatures };
  return { device, executor: new Executor(device, info) };
}

/** @param {string} s */
function fromB64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** @param {Uint8Array} b */
function toB64(b) {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, Array.from(b.subarray(i, i + 0x8000)));
  return btoa(s);
}

/** Whether the adapter lists the job entry's configuration as f16 x f16 -> f32.
 * @param {ReturnType<typeof adapterReport>} rep
 * @param {{ M: number, N: number, K: number }} cfg */
export function offers(rep, cfg) {
  return rep.configs.some((c) => c.componentType === "f16" && c.resultComponentType === "f32" && c.M === cfg.M && c.N === cfg.N && c.K === cfg.K);
}

/** Run every correctness plan of one configuration entry; {name: {raw: {buffer: base64}}} or {error}.
 * @param {Executor} executor
 * @param {any} entry
 * @param {(line: string) => void} log */
export async function runCorrectness(executor, entry, log) {
  /** @type {Record<string, any>} */
  const out = {};
  for (const job of entry.correctness) {
    if (job.refused) continue;
    try {
      const why = executor.check(job.plan);
      if (why) throw new Error(why);
      const { raw } = await executor.run(job.plan, (name) => fromB64(job.bytes[name]));
      out[job.name] = { raw: Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, toB64(v)])) };
    } catch (e) {
      out[job.name] = { error: String(/** @type {any} */ (e).message || e) };
      log(`${entry.tag} ${job.name}: ${out[job.name].error.slice(0, 400)}`);
    }
  }
  return out;
}

const FILL_WGSL = /* wgsl */ `
// Uniform numbers in [-sqrt(3), sqrt(3)] (unit variance), from a hash of the index.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: vec4<u32>;  // count, seed
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = g.x + g.y * nw.x * 256u;
  if (i >= p.x) { return; }
  var h = i * 747796405u + p.y * 2891336453u + 1u;
  h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
  h = (h >> 22u) ^ h;
  x[i] = (f32(h) * 2.3283064365386963e-10 * 2.0 - 1.0) * 1.7320508;
}`;

/** Fill f32 buffer `buf` of `count` elements with hash-random unit-variance numbers.
 * @param {GPUDevice} dev
 * @param {GPUBuffer} buf
 * @param {number} count
 * @param {number} seed */
function fillRandom(dev, buf, count, seed) {
  const module = dev.createShaderModule({ label: "smx.fill", code: FILL_WGSL });
  const pipeline = dev.createComputePipeline({ label: "smx.fill", layout: "auto", compute: { module, entryPoint: "fill" } });
  const p = dev.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  dev.queue.writeBuffer(p, 0, new Uint32Array([count, seed, 0, 0]));
  const groups = Math.ceil(count / 256);
  const x = Math.min(groups, 65535), y = Math.ceil(groups / 65535);
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, dev.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }, { binding: 1, resource: { buffer: p } }] }));
  pass.dispatchWorkgroups(x, y);
  pass.end();
  dev.queue.submit([enc.finish()]);
}

/** A timed thing: `run(n)` dispatches it n times in one pass and resolves to {gpu_ms, wall_ms} per dispatch.
 * @typedef {{ name: string, flops: number, run: (n: number) => Promise<{ gpu_ms: number | null, wall_ms: number }> }} Timed */

/** @param {GPUDevice} dev
 * @param {(pass: GPUComputePassEncoder) => void} encode one dispatch
 * @returns {(n: number) => Promise<{ gpu_ms: number | null, wall_ms: number }>} */
function timer(dev, encode) {
  const stamped = dev.features.has("timestamp-query");
  const qset = stamped ? dev.createQuerySet({ type: "timestamp", count: 2 }) : null;
  const qbuf = stamped ? dev.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }) : null;
  const rd = stamped ? dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }) : null;
  return async (n) => {
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass(qset ? { timestampWrites: { querySet: qset, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {});
    for (let i = 0; i < n; i++) encode(pass);
    pass.end();
    if (qset && qbuf && rd) {
      enc.resolveQuerySet(qset, 0, 2, qbuf, 0);
      enc.copyBufferToBuffer(qbuf, 0, rd, 0, 16);
    }
    const t0 = performance.now();
    dev.queue.submit([enc.finish()]);
    await dev.queue.onSubmittedWorkDone();
    const wall_ms = (performance.now() - t0) / n;
    let gpu_ms = null;
    if (rd) {
      await rd.mapAsync(GPUMapMode.READ);
      const t = new BigUint64Array(rd.getMappedRange().slice(0));
      rd.unmap();
      gpu_ms = Number(t[1] - t[0]) / 1e6 / n;
    }
    return { gpu_ms, wall_ms };
  };
}

/** The timing plans of one configuration entry for one shape, ready to run (shared buffers).
 * @param {Executor} executor
 * @param {any[]} jobs same shape, several variants
 * @returns {Promise<{ timed: Timed[], errors: Record<string, string>, free: () => void }>} */
export async function prepareTimed(executor, jobs) {
  const dev = executor.device;
  /** @type {Record<string, string>} */
  const errors = {};
  const usable = jobs.filter((j) => !j.refused);
  jobs.filter((j) => j.refused).forEach((j) => { errors[j.name] = j.refused; });
  if (!usable.length) return { timed: [], errors, free: () => {} };
  /** @type {Record<string, GPUBuffer>} */
  const buffers = {};
  const plan0 = usable[0].plan;
  for (const b of plan0.buffers) {
    const usage = (b.usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) | GPUBufferUsage.COPY_DST;
    buffers[b.name] = dev.createBuffer({ label: `smx.${b.name}`, size: b.size, usage });
    if (usable[0].bytes[b.name]) dev.queue.writeBuffer(buffers[b.name], 0, fromB64(usable[0].bytes[b.name]));
    if ((usable[0].fill || []).includes(b.name)) fillRandom(dev, buffers[b.name], b.size / 4, 1 + Object.keys(buffers).length);
  }
  /** @type {Timed[]} */
  const timed = [];
  for (const job of usable) {
    try {
      const why = executor.check(job.plan);
      if (why) throw new Error(why);
      dev.pushErrorScope("validation");
      const [pipe] = await executor.pipelinesOf(job.plan);
      const [group] = executor.bindGroups(job.plan, [pipe], buffers);
      const d = job.plan.dispatches[0];
      const run = timer(dev, (pass) => { pass.setPipeline(pipe.pipeline); pass.setBindGroup(0, group); pass.dispatchWorkgroups(...d.workgroups); });
      await run(1);
      const err = await dev.popErrorScope();
      if (err) throw new Error(err.message);
      timed.push({ name: job.name, flops: job.flops, run });
    } catch (e) {
      errors[job.name] = String(/** @type {any} */ (e).message || e).slice(0, 600);
    }
  }
  await dev.queue.onSubmittedWorkDone();
  return { timed, errors, free: () => Object.values(buffers).forEach((b) => b.destroy()) };
}

/** Time `timed` in interleaved rounds after warming the GPU by time; per name: every sample,
 * median and spread (min, max) in ms per dispatch and TFLOP/s at the median.
 * @param {Timed[]} timed
 * @param {{ warmMs?: number, rounds?: number, targetMs?: number }} [opts] */
export async function timeRounds(timed, { warmMs = 1500, rounds = 5, targetMs = 40 } = {}) {
  /** @type {Record<string, number>} */
  const reps = {};
  const t0 = performance.now();
  do {  // warm the clocks, and size each sample to about targetMs
    for (const t of timed) {
      const { gpu_ms, wall_ms } = await t.run(reps[t.name] || 2);
      const ms = gpu_ms ?? wall_ms;
      reps[t.name] = Math.max(2, Math.min(500, Math.round(targetMs / Math.max(ms, 1e-3))));
    }
  } while (performance.now() - t0 < warmMs);
  /** @type {Record<string, { gpu: number[], wall: number[] }>} */
  const samples = Object.fromEntries(timed.map((t) => [t.name, { gpu: [], wall: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const t of timed) {
      const { gpu_ms, wall_ms } = await t.run(reps[t.name]);
      if (gpu_ms !== null) samples[t.name].gpu.push(gpu_ms);
      samples[t.name].wall.push(wall_ms);
    }
  }
  /** @type {Record<string, any>} */
  const out = {};
  for (const t of timed) {
    const s = samples[t.name].gpu.length ? samples[t.name].gpu : samples[t.name].wall;
    const sorted = s.slice().sort((a, b) => a - b);
    const med = sorted[Math.floor(sorted.length / 2)];
    out[t.name] = {
      timer: samples[t.name].gpu.length ? "gpu" : "wall", reps: reps[t.name], ms: s, wall_ms: samples[t.name].wall,
      median_ms: med, min_ms: sorted[0], max_ms: sorted[sorted.length - 1],
      tflops: t.flops / (med * 1e-3) / 1e12, tflops_best: t.flops / (sorted[0] * 1e-3) / 1e12,
    };
  }
  return out;
}
