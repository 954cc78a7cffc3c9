// @ts-check
// The subgroup-matrix attention harness's executor, shared by the bench page (a browser) and
// testbed.mjs (Node with Dawn): opens a device with the features flash_fwd.smx needs, runs the
// correctness plans of a job file (built by jobs.py) and returns their output bytes, times the
// timing plans (warm-up by time, interleaved rounds), and times a subgroup-matrix GEMM of its own
// as the ceiling. It makes no numerical judgement: jobs.py judges the bytes with the project's
// reference and tolerance. Plans run through the page's own executor (static/webgpu.js).

import { Executor } from "../../static/webgpu.js";

const NEED = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"];
const LIMITS = ["maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxStorageBuffersPerShaderStage",
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

/** Run the correctness plans of one configuration entry (`quick`: those marked quick);
 * {name: {raw: {buffer: base64}}} or {error}.
 * @param {Executor} executor
 * @param {any} entry
 * @param {(line: string) => void} log
 * @param {boolean} [quick] */
export async function runCorrectness(executor, entry, log, quick = false) {
  /** @type {Record<string, any>} */
  const out = {};
  for (const job of entry.correctness) {
    if (job.refused || (quick && !job.quick)) continue;
    try {
      const why = job.plan.unavailable;  // planned for this adapter's features and limits (jobs.py)
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

/** A timed thing: `run(n)` dispatches it (every pass of its plan) n times in one compute pass and
 * resolves to {gpu_ms, wall_ms} per time.
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
  // One set of buffers for every variant: the largest size any plan asks under each name.
  /** @type {Record<string, any>} */
  const spec = {};
  for (const job of usable) for (const b of job.plan.buffers) if (!spec[b.name] || spec[b.name].size < b.size) spec[b.name] = b;
  /** @type {Record<string, GPUBuffer>} */
  const buffers = {};
  for (const b of Object.values(spec)) {
    const usage = (b.usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) | GPUBufferUsage.COPY_DST;
    buffers[b.name] = dev.createBuffer({ label: `smx.${b.name}`, size: b.size, usage });
    if (usable[0].bytes[b.name]) dev.queue.writeBuffer(buffers[b.name], 0, fromB64(usable[0].bytes[b.name]));
    if ((usable[0].fill || []).includes(b.name)) fillRandom(dev, buffers[b.name], b.size / 4, 1 + Object.keys(buffers).length);
  }
  /** @type {Timed[]} */
  const timed = [];
  for (const job of usable) {
    try {
      const why = job.plan.unavailable;  // planned for this adapter's features and limits (jobs.py)
      if (why) throw new Error(why);
      dev.pushErrorScope("validation");
      const pipes = await executor.pipelinesOf(job.plan);
      const groups = executor.bindGroups(job.plan, pipes, buffers);
      const ds = job.plan.dispatches;
      const run = timer(dev, (pass) => ds.forEach((/** @type {any} */ d, /** @type {number} */ i) => {
        pass.setPipeline(pipes[i].pipeline); pass.setBindGroup(0, groups[i]); const [x, y, z] = d.workgroups; pass.dispatchWorkgroups(x, y, z);
      }));
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

let warmed = false;

/** Time `timed` in interleaved rounds after warming the GPU by time (longer the first time); per name: every sample,
 * median and spread (min, max) in ms per dispatch and TFLOP/s at the median.
 * @param {Timed[]} timed
 * @param {{ warmMs?: number, rounds?: number, targetMs?: number }} [opts] */
export async function timeRounds(timed, { warmMs = 600, rounds = 5, targetMs = 40 } = {}) {
  if (!warmed) warmMs = Math.max(warmMs, 2500);  // the first timing wakes the GPU: idle, it clocks low
  warmed = true;
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

const FILL_F16_WGSL = /* wgsl */ `
// Exact f16 values k / 1024, k in [-1024, 1023], two to a word, from a hash of the element index
// (gemmValue in smx.js computes the same numbers for the check).
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> p: vec4<u32>;  // words, seed
fn value(i: u32) -> f32 {
  var h = i * 747796405u + p.y * 2891336453u + 1u;
  h = ((h >> ((h >> 28u) + 4u)) ^ h) * 277803737u;
  h = (h >> 22u) ^ h;
  return (f32(h >> 21u) - 1024.0) / 1024.0;
}
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let w = g.x + g.y * nw.x * 256u;
  if (w >= p.x) { return; }
  x[w] = pack2x16float(vec2<f32>(value(2u * w), value(2u * w + 1u)));
}`;

/** FILL_F16_WGSL's value of element i (seed `seed`), exactly.
 * @param {number} i
 * @param {number} seed */
function gemmValue(i, seed) {
  let h = (Math.imul(i, 747796405) + Math.imul(seed, -1403630843) + 1) >>> 0;
  h = Math.imul(((h >>> ((h >>> 28) + 4)) ^ h) >>> 0, 277803737) >>> 0;
  h = ((h >>> 22) ^ h) >>> 0;
  return ((h >>> 21) - 1024) / 1024;
}

/** The GEMM ceiling of a job file entry (jobs.py gemm_job): A and B filled on the GPU, C checked
 * on sampled entries against float64, then timed like the attention plans.
 * @param {GPUDevice} dev
 * @param {any} job {source, constants, dims: [rows, cols, depth], workgroups, flops, name} */
export async function prepareGemm(dev, job) {
  const [rows, cols, depth] = job.dims;
  dev.pushErrorScope("validation");
  const module = dev.createShaderModule({ label: "smx.gemm", code: job.source });
  const info = await module.getCompilationInfo();
  const errs = info.messages.filter((m) => m.type === "error").map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
  if (errs.length) { await dev.popErrorScope(); throw new Error(`gemm does not compile: ${errs.join("; ")}`); }
  const pipeline = await dev.createComputePipelineAsync({ label: "smx.gemm", layout: "auto", compute: { module, entryPoint: "gemm", constants: job.constants } });
  const fillMod = dev.createShaderModule({ label: "smx.fill16", code: FILL_F16_WGSL });
  const fill = dev.createComputePipeline({ label: "smx.fill16", layout: "auto", compute: { module: fillMod, entryPoint: "fill" } });
  const a = dev.createBuffer({ size: rows * depth * 2, usage: GPUBufferUsage.STORAGE });
  const b = dev.createBuffer({ size: cols * depth * 2, usage: GPUBufferUsage.STORAGE });
  const c = dev.createBuffer({ size: rows * cols * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const d = dev.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  dev.queue.writeBuffer(d, 0, new Uint32Array([rows, cols, depth, 0]));
  for (const [buf, words, seed] of /** @type {Array<[GPUBuffer, number, number]>} */ ([[a, rows * depth / 2, 1], [b, cols * depth / 2, 2]])) {
    const p = dev.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    dev.queue.writeBuffer(p, 0, new Uint32Array([words, seed, 0, 0]));
    const groups = Math.ceil(words / 256);
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(fill);
    pass.setBindGroup(0, dev.createBindGroup({ layout: fill.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }, { binding: 1, resource: { buffer: p } }] }));
    pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
    pass.end();
    dev.queue.submit([enc.finish()]);
  }
  const group = dev.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [a, b, c, d].map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const run = timer(dev, (pass) => { pass.setPipeline(pipeline); pass.setBindGroup(0, group); pass.dispatchWorkgroups(job.workgroups[0], job.workgroups[1], job.workgroups[2]); });
  await run(1);
  const err = await dev.popErrorScope();
  if (err) throw new Error(`gemm: ${err.message}`);
  // C on sampled entries against float64.
  const read = dev.createBuffer({ size: rows * cols * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = dev.createCommandEncoder();
  enc.copyBufferToBuffer(c, 0, read, 0, rows * cols * 4);
  dev.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const got = new Float32Array(read.getMappedRange().slice(0));
  read.unmap();
  read.destroy();
  let worst = 0, s = 7;
  for (let t = 0; t < 128; t++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0; const i = s % rows;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0; const j = s % cols;
    let ref = 0;
    for (let k = 0; k < depth; k++) ref += gemmValue(i * depth + k, 1) * gemmValue(j * depth + k, 2);
    worst = Math.max(worst, Math.abs(got[i * cols + j] - ref));
  }
  return { timed: { name: job.name, flops: job.flops, run }, max_abs_err: worst, free: () => [a, b, c, d].forEach((x) => x.destroy()) };
}

/**
 * Everything a job file asks, on `adapter`: per configuration the adapter offers, the correctness
 * plans, then (timing) the timing plans shape by shape and the GEMM ceiling. Fills `report`
 * (adapter, no_smx, configs, timing, gemm, errors).
 * @param {GPUAdapter} adapter
 * @param {() => Promise<any>} getJobs the job file, fetched only when the adapter can run it
 * @param {any} report
 * @param {{ timing?: boolean, log?: (line: string) => void, status?: (text: string) => void,
 *   timeOpts?: { warmMs?: number, rounds?: number, targetMs?: number },
 *   quick?: boolean, variants?: string[] | null, tags?: string[] | null, gemm?: boolean }} [opts]
 *   quick: only the correctness jobs marked quick; variants, tags: only those timing variants and
 *   entries (null: all); gemm: time the GEMM ceiling.
 */
export async function runJobs(adapter, getJobs, report, {
  timing = true, log = () => {}, status = () => {}, timeOpts = {}, quick = false, variants = null, tags = null, gemm = true,
} = {}) {
  report.adapter = adapterReport(adapter);
  log(`adapter ${JSON.stringify(report.adapter)}`);
  const why = missing(report.adapter);
  if (why) {
    report.no_smx = why;
    status(`flash_fwd.smx cannot run here: ${why}`);
    log(`no subgroup-matrix: ${why}`);
    return;
  }
  const jobs = await getJobs();
  const { device, executor } = await openDevice(adapter);
  device.lost.then((l) => report.errors.push(`device lost: ${l.message}`));
  device.addEventListener("uncapturederror", (e) => report.errors.push(`uncaptured: ${/** @type {any} */ (e).error.message}`));
  report.configs = {};
  report.timing = {};
  report.gemm = {};
  for (const entry of jobs.configs) {
    if (entry.refused || (tags && !tags.includes(entry.tag))) continue;
    if (!offers(report.adapter, entry.config)) {
      report.configs[entry.tag] = { skipped: `the adapter does not list f16 -> f32 ${entry.tag}` };
      continue;
    }
    status(`${entry.tag}: correctness`);
    const t0 = performance.now();
    report.configs[entry.tag] = { correctness: await runCorrectness(executor, entry, log, quick) };
    log(`${entry.tag}: ${entry.correctness.length} correctness plans in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
    if (!timing) continue;
    for (const shape of jobs.timed) {
      status(`${entry.tag}: timing ${shape.join("x")}`);
      const same = entry.timing.filter((/** @type {any} */ j) => j.shape.join() === shape.join() && (!variants || variants.includes(j.variant)));
      if (!same.length) continue;
      const prep = await prepareTimed(executor, same);
      const rows = await timeRounds(prep.timed, timeOpts);
      prep.free();
      report.timing[`${entry.tag}:${shape.join("x")}`] = { errors: prep.errors, rows };
      for (const [name, r] of Object.entries(rows)) log(`${entry.tag} ${name}: ${r.median_ms.toFixed(3)} ms ${r.tflops.toFixed(2)} TFLOP/s (${r.timer})`);
      for (const [name, e] of Object.entries(prep.errors)) log(`${entry.tag} ${name}: ${e}`);
    }
    if (entry.gemm && gemm) {
      status(`${entry.tag}: gemm`);
      for (const job of entry.gemm) {
        try {
          const g = await prepareGemm(device, job);
          const rows = await timeRounds([g.timed], timeOpts);
          g.free();
          report.gemm[`${entry.tag}:${job.name}`] = { max_abs_err: g.max_abs_err, ...rows[job.name] };
          log(`${entry.tag} ${job.name}: err ${g.max_abs_err.toExponential(2)} ${rows[job.name].tflops.toFixed(2)} TFLOP/s`);
        } catch (e) {
          report.gemm[`${entry.tag}:${job.name}`] = { error: String(/** @type {any} */ (e).message || e) };
          log(`${entry.tag} ${job.name}: ${report.gemm[`${entry.tag}:${job.name}`].error}`);
        }
      }
    }
  }
  status("done");
}
