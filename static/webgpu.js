// @ts-check
// WebGPU executor: runs a wgattn dispatch plan (built by Python, wgattn/plan.py) and returns the
// bytes of the buffers it reads back. It makes no numerical decision of its own.

import { errorText } from "./dom.js";

/**
 * Plan, Prepared and TargetJson are declared in wire.d.ts, generated from the Python that makes them.
 * @typedef {(name: string) => Uint8Array} InitialBytes a buffer's initial bytes, by name
 * @typedef {{ pipeline: GPUComputePipeline, bindGroupLayout: GPUBindGroupLayout }} Pipeline
 * @typedef {{ wall_ms: number, gpu_ms?: number }} Timings
 * @typedef {{ runtime: "browser", vendor: string, architecture: string, device: string,
 *   description: string, features: string[] }} AdapterInfo
 * @typedef {{ device: GPUDevice, info: AdapterInfo, target: TargetJson, error?: undefined }} Gpu
 * @typedef {{ error: string, device?: undefined, info?: undefined, target?: undefined }} NoGpu
 * @typedef {{ items: Array<{ plan: Plan, pipelines: Pipeline[], groups: GPUBindGroup[], named: Record<string, GPUBuffer> }>,
 *   buffers: GPUBuffer[], passes: number }} TimedPlans plans uploaded once for timing (Executor.prepareTiming)
 */

// The optional features the kernels may need, asked for where the adapter has them (Chromium's
// experimental subgroup matrices are not in @webgpu/types yet).
const FEATURES = /** @type {GPUFeatureName[]} */ (["shader-f16", "subgroups", "timestamp-query",
  "chromium-experimental-subgroup-matrix"]);
const LIMITS = /** @type {const} */ ([
  "maxStorageBufferBindingSize", "maxUniformBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension", "maxStorageBuffersPerShaderStage",
]);

/** Kebab-case limit names, as wgpu-py and wgattn.plan use them.
 * @param {string} name */
const kebab = (name) => name.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());

/** WGSL that does not compile: nothing else will run with it (Python's twin: wgattn.errors.CompileError). */
export class CompileError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "CompileError";
  }
}

/** The adapter's names that are known, most telling first (it may leave any of them empty).
 * @param {{ vendor?: string, architecture?: string, device?: string, description?: string }} info
 * @returns {string[]} */
export function adapterWords(info) {
  return [info.vendor, info.architecture, info.device, info.description].map((w) => w || "").filter((w) => w !== "");
}

/** Open the browser's WebGPU device; {error} says plainly why when there is none.
 * @param {(message: string) => void} [onLost] hears why the device was lost
 * @returns {Promise<Gpu | NoGpu>} */
export async function openDevice(onLost) {
  if (!navigator.gpu) {
    return { error: "WebGPU is not available here (navigator.gpu is missing). Use a browser with WebGPU " +
      "(Chrome or Edge 113+, Safari 26, Firefox 141+ on Windows) over http://127.0.0.1 or https." };
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) return { error: "WebGPU is present but no adapter was found (GPU blocklisted or disabled)." };
  const requiredFeatures = FEATURES.filter((f) => adapter.features.has(f));
  const requiredLimits = Object.fromEntries(LIMITS.map((k) => [k, adapter.limits[k]]));
  const device = await adapter.requestDevice({ label: "wgattn", requiredFeatures, requiredLimits });
  device.lost.then((info) => onLost && onLost(`WebGPU device lost (${info.reason}): ${info.message}`));
  // Browsers before GPUAdapter.info (Chrome 127) do not name the adapter.
  /** @type {Partial<GPUAdapterInfo>} */
  const i = adapter.info || {};
  /** @type {AdapterInfo} */
  const info = {
    runtime: "browser", vendor: i.vendor || "", architecture: i.architecture || "",
    device: i.device || "", description: i.description || "", features: requiredFeatures,
  };
  // What the page's Python plans for and checks against (wgattn.target.Target.from_json): the
  // device as given, facts only; Python decides what runs.
  /** @type {{ subgroupMatrixConfigs?: unknown[], subgroupMinSize?: number, subgroupMaxSize?: number }} */
  const more = /** @type {any} */ (i);
  /** @type {TargetJson} */
  const target = {
    name: `this browser's adapter (${adapterWords(info).join(" ") || "unnamed"})`,
    words: adapterWords(info),
    features: requiredFeatures,
    limits: Object.fromEntries(LIMITS.map((k) => [kebab(k), device.limits[k]])),
    // GPUSubgroupMatrixConfig's fields are getters on its prototype: JSON.stringify of the object
    // itself gives {} (found on the H100), so each field is copied by name.
    subgroup_matrix_configs: [...(/** @type {any[]} */ (more.subgroupMatrixConfigs || []))].map(
      (c) => /** @type {MatrixConfigJson} */ ({
        componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K,
      })),
    // Kernels on subgroup matrices lay their work out by the subgroup size (0: not reported).
    subgroup_min_size: more.subgroupMinSize || 0,
    subgroup_max_size: more.subgroupMaxSize || 0,
  };
  return { device, info, target };
}

/** The milliseconds the passes of one submission took, from its resolved timestamp pairs.
 * @param {BigUint64Array} t begin and end of each pass
 * @param {number} n passes */
function passesMs(t, n) {
  let ns = 0n;
  for (let i = 0; i < n; i++) ns += t[2 * i + 1] - t[2 * i];
  return Number(ns) / 1e6;
}

/** The usage bits of a plan's buffer (`more`: COPY_SRC to read it back, say).
 * @param {PlanBuffer} b
 * @param {number} more */
function bufferUsage(b, more) {
  return (b.usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) | GPUBufferUsage.COPY_DST | more;
}

/** Runs plans on one device, caching pipelines by (source, entry point, constants). */
export class Executor {
  /** @param {GPUDevice} device
   * @param {AdapterInfo} info its adapter, and the features the device was given */
  constructor(device, info) {
    this.device = device;
    this.info = info;
    /** @type {Map<string, Pipeline>} */
    this.pipelines = new Map();
    this.timed = device.features.has("timestamp-query");
    /** @type {Map<number, { qset: GPUQuerySet, qbuf: GPUBuffer, staging: GPUBuffer }>} */
    this.querySets = new Map();
  }

  /** The compiled pipeline of a dispatch, compiled once.
   * @param {Dispatch} d
   * @returns {Promise<Pipeline>} */
  async pipeline(d) {
    const key = JSON.stringify([d.source, d.entry_point, d.constants, d.layout]);
    let cached = this.pipelines.get(key);
    if (!cached) {
      // WGSL that does not compile is a validation error of createShaderModule too: captured
      // here, it is reported once, as the CompileError below, and never as an uncaptured error
      // racing that message to the page.
      this.device.pushErrorScope("validation");
      const module = this.device.createShaderModule({ label: d.label, code: d.source });
      const info = await module.getCompilationInfo();
      const invalid = await this.device.popErrorScope();
      const errors = info.messages.filter((m) => m.type === "error");
      if (errors.length) {
        throw new CompileError(`${d.label}: WGSL does not compile: ` +
          errors.map((m) => `line ${m.lineNum}:${m.linePos} ${m.message}`).join("; "));
      }
      if (invalid) throw new CompileError(`${d.label}: the shader module is invalid: ${invalid.message}`);
      // Explicit layouts from the registry: a kernel may leave a binding of its interface unused.
      const bindGroupLayout = this.device.createBindGroupLayout({
        label: d.label,
        entries: d.layout.map(([binding, type]) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })),
      });
      const layout = this.device.createPipelineLayout({ label: d.label, bindGroupLayouts: [bindGroupLayout] });
      let p;
      try {
        p = await this.device.createComputePipelineAsync({
          label: d.label, layout,
          compute: { module, entryPoint: d.entry_point, constants: d.constants },
        });
      } catch (e) {  // a GPUPipelineError: no such entry point, bindings that do not match the layout
        throw new CompileError(`${d.label}: WGSL does not compile or link: ${errorText(e)}`);
      }
      cached = { pipeline: p, bindGroupLayout };
      this.pipelines.set(key, cached);
    }
    return cached;
  }

  /** The pipelines of every dispatch of `plan`, in order.
   * @param {Plan} plan */
  async pipelinesOf(plan) {
    const pipelines = [];
    for (const d of plan.dispatches) pipelines.push(await this.pipeline(d));
    return pipelines;
  }

  /** Encode one compute pass per dispatch of `plan`, bound to `buffers` (by name); with a query
   * set, each pass writes its begin and end timestamps.
   * @param {GPUCommandEncoder} enc
   * @param {Plan} plan
   * @param {Pipeline[]} pipelines
   * @param {GPUBindGroup[]} groups
   * @param {GPUQuerySet | null} qset
   * @param {number} [first] the first query this plan's passes write */
  static encodePasses(enc, plan, pipelines, groups, qset, first = 0) {
    plan.dispatches.forEach((d, i) => {
      const q = first + 2 * i;
      const pass = enc.beginComputePass(qset
        ? { label: d.label, timestampWrites: { querySet: qset, beginningOfPassWriteIndex: q, endOfPassWriteIndex: q + 1 } }
        : { label: d.label });
      pass.setPipeline(pipelines[i].pipeline);
      pass.setBindGroup(0, groups[i]);
      pass.dispatchWorkgroups(...d.workgroups);
      pass.end();
    });
  }

  /** One bind group per dispatch of `plan`, binding `buffers` by name.
   * @param {Plan} plan
   * @param {Pipeline[]} pipelines
   * @param {Record<string, GPUBuffer>} buffers */
  bindGroups(plan, pipelines, buffers) {
    return plan.dispatches.map((d, i) => this.device.createBindGroup({
      label: d.label, layout: pipelines[i].bindGroupLayout,
      entries: d.bindings.map(([binding, name]) => ({ binding, resource: { buffer: buffers[name] } })),
    }));
  }

  /**
   * Run `plan`; `initial(name)` gives a buffer's initial bytes. Resolves to the bytes of every
   * buffer the plan reads back, and the timings.
   * @param {Plan} plan
   * @param {InitialBytes} initial
   * @returns {Promise<{ raw: Record<string, Uint8Array>, timings: Timings }>}
   */
  async run(plan, initial) {
    const dev = this.device;
    const pipelines = await this.pipelinesOf(plan);
    dev.pushErrorScope("validation");
    dev.pushErrorScope("out-of-memory");
    const t0 = performance.now();
    /** @type {Record<string, GPUBuffer>} */
    const buffers = {};
    for (const b of plan.buffers) {
      const usage = bufferUsage(b, b.read ? GPUBufferUsage.COPY_SRC : 0);
      buffers[b.name] = dev.createBuffer({ label: `${plan.dispatches[0].label}.${b.name}`, size: b.size, usage });
      if (b.has_data) dev.queue.writeBuffer(buffers[b.name], 0, initial(b.name));
    }
    const n = plan.dispatches.length;
    const qset = this.timed ? dev.createQuerySet({ type: "timestamp", count: 2 * n }) : null;
    const enc = dev.createCommandEncoder({ label: "wgattn.run" });
    Executor.encodePasses(enc, plan, pipelines, this.bindGroups(plan, pipelines, buffers), qset);
    /** @type {Array<{ name: string, size: number, from: GPUBuffer }>} */
    const reads = plan.buffers.filter((b) => b.read).map((b) => ({ name: b.name, size: b.size, from: buffers[b.name] }));
    if (qset) {
      const qbuf = dev.createBuffer({ size: 16 * n, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
      buffers.__timestamps = qbuf;  // destroyed with the plan's buffers
      enc.resolveQuerySet(qset, 0, 2 * n, qbuf, 0);
      reads.push({ name: "__timestamps", size: 16 * n, from: qbuf });
    }
    const staging = reads.map((b) => {
      const to = dev.createBuffer({ label: `readback.${b.name}`, size: b.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      enc.copyBufferToBuffer(b.from, 0, to, 0, b.size);
      return to;
    });
    dev.queue.submit([enc.finish()]);
    /** @type {Record<string, Uint8Array>} */
    const raw = {};
    for (const [k, b] of reads.entries()) {
      await staging[k].mapAsync(GPUMapMode.READ);
      raw[b.name] = new Uint8Array(staging[k].getMappedRange().slice(0));
      staging[k].unmap();
      staging[k].destroy();
    }
    /** @type {Timings} */
    const timings = { wall_ms: performance.now() - t0 };
    const oom = await dev.popErrorScope();
    const invalid = await dev.popErrorScope();
    Object.values(buffers).forEach((b) => b.destroy());
    if (qset) qset.destroy();
    const failed = invalid || oom;
    if (failed) throw new Error(`WebGPU error while running ${plan.dispatches[0].label}: ${failed.message}`);
    if (raw.__timestamps) {
      timings.gpu_ms = passesMs(new BigUint64Array(raw.__timestamps.buffer), n);
      delete raw.__timestamps;
    }
    return { raw, timings };
  }

  /**
   * Upload plans once for timing (the page's benchmark): their buffers, filled by `initial`,
   * pipelines and bind groups. One timed run dispatches every plan's passes in order.
   * @param {Array<{ plan: Plan, initial: InitialBytes }>} items
   * @returns {Promise<TimedPlans>}
   */
  async prepareTiming(items) {
    const dev = this.device;
    /** @type {TimedPlans} */
    const timed = { items: [], buffers: [], passes: 0 };
    for (const { plan, initial } of items) {
      const pipelines = await this.pipelinesOf(plan);
      dev.pushErrorScope("validation");
      dev.pushErrorScope("out-of-memory");
      /** @type {Record<string, GPUBuffer>} */
      const buffers = {};
      for (const b of plan.buffers) {
        const usage = bufferUsage(b, b.read ? GPUBufferUsage.COPY_SRC : 0);  // read: for Executor.readTimed
        buffers[b.name] = dev.createBuffer({ label: `${plan.dispatches[0].label}.${b.name}`, size: b.size, usage });
        timed.buffers.push(buffers[b.name]);
        if (b.has_data) dev.queue.writeBuffer(buffers[b.name], 0, initial(b.name));
      }
      timed.items.push({ plan, pipelines, groups: this.bindGroups(plan, pipelines, buffers), named: buffers });
      timed.passes += plan.dispatches.length;
      const oom = await dev.popErrorScope();
      const invalid = await dev.popErrorScope();
      const failed = invalid || oom;
      if (failed) {
        Executor.releaseTiming(timed);
        throw new Error(`WebGPU error while uploading ${plan.dispatches[0].label}: ${failed.message}`);
      }
    }
    await dev.queue.onSubmittedWorkDone();  // the uploads are not part of any sample
    return timed;
  }

  /** Run `plan` (no bytes of its own: a fill) on the buffers of `timed` that it names, before
   * anything is timed: the decode benchmark's caches are filled on the GPU this way.
   * @param {TimedPlans} timed
   * @param {Plan} plan */
  async runOnTimed(timed, plan) {
    const dev = this.device;
    /** @type {Record<string, GPUBuffer>} */
    const buffers = Object.assign({}, ...timed.items.map((it) => it.named));
    const missing = plan.buffers.filter((b) => !buffers[b.name]).map((b) => b.name);
    if (missing.length) throw new Error(`${plan.dispatches[0].label}: the timed plans have no buffer ${missing.join(", ")}`);
    const pipelines = await this.pipelinesOf(plan);
    dev.pushErrorScope("validation");
    dev.pushErrorScope("out-of-memory");
    const enc = dev.createCommandEncoder({ label: plan.dispatches[0].label });
    Executor.encodePasses(enc, plan, pipelines, this.bindGroups(plan, pipelines, buffers), null);
    dev.queue.submit([enc.finish()]);
    await dev.queue.onSubmittedWorkDone();
    const oom = await dev.popErrorScope();
    const invalid = await dev.popErrorScope();
    const failed = invalid || oom;
    if (failed) throw new Error(`WebGPU error while running ${plan.dispatches[0].label}: ${failed.message}`);
  }

  /** The bytes of buffer `name` of `timed` (one the plan reads back), as the last run left them.
   * @param {TimedPlans} timed
   * @param {string} name
   * @returns {Promise<Uint8Array>} */
  async readTimed(timed, name) {
    const dev = this.device;
    const from = timed.items.map((it) => it.named[name]).find((b) => b);
    if (!from) throw new Error(`the timed plans have no buffer ${name}`);
    const to = dev.createBuffer({ label: `readback.${name}`, size: from.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = dev.createCommandEncoder({ label: `readback.${name}` });
    enc.copyBufferToBuffer(from, 0, to, 0, from.size);
    dev.queue.submit([enc.finish()]);
    await to.mapAsync(GPUMapMode.READ);
    const bytes = new Uint8Array(to.getMappedRange().slice(0));
    to.unmap();
    to.destroy();
    return bytes;
  }

  /** A timestamp query set with its resolve and read-back buffers, made once per size.
   * @param {number} count */
  queries(count) {
    let q = this.querySets.get(count);
    if (!q) {
      const dev = this.device;
      q = {
        qset: dev.createQuerySet({ label: "wgattn.time", type: "timestamp", count }),
        qbuf: dev.createBuffer({ label: "wgattn.time", size: 8 * count, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
        staging: dev.createBuffer({ label: "wgattn.time", size: 8 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
      };
      this.querySets.set(count, q);
    }
    return q;
  }

  /** Free the query sets `queries` made (after a benchmark). */
  releaseQueries() {
    for (const q of this.querySets.values()) {
      q.qset.destroy();
      q.qbuf.destroy();
      q.staging.destroy();
    }
    this.querySets.clear();
  }

  /**
   * One sample of wgattn.protocol: `reps` runs of `timed` in one submission. Resolves to the
   * milliseconds per run and the raw timestamps as offsets (ns) from the first: from timestamp
   * queries (every pass's end minus its begin, summed, as wgattn.native's TimedPlans) or, with
   * `timer: "wall"` or no timestamp-query, from submit to queue.onSubmittedWorkDone() with no
   * timestamps.
   * @param {TimedPlans} timed
   * @param {number} reps
   * @param {"gpu" | "wall"} timer
   * @returns {Promise<{ ms: number, stamps: number[] }>}
   */
  async sample(timed, reps, timer) {
    const dev = this.device;
    const count = 2 * timed.passes * reps;
    const q = timer === "gpu" && this.timed ? this.queries(count) : null;
    dev.pushErrorScope("validation");
    dev.pushErrorScope("out-of-memory");
    const enc = dev.createCommandEncoder({ label: "wgattn.time" });
    let first = 0;
    for (let r = 0; r < reps; r++) {
      for (const it of timed.items) {
        Executor.encodePasses(enc, it.plan, it.pipelines, it.groups, q && q.qset, first);
        first += 2 * it.plan.dispatches.length;
      }
    }
    if (q) {
      enc.resolveQuerySet(q.qset, 0, count, q.qbuf, 0);
      enc.copyBufferToBuffer(q.qbuf, 0, q.staging, 0, 8 * count);
    }
    const t0 = performance.now();
    dev.queue.submit([enc.finish()]);
    let ms = 0;
    /** @type {number[]} */
    const stamps = [];
    if (q) {
      await q.staging.mapAsync(GPUMapMode.READ);  // resolves once this submission is done
      const t = new BigUint64Array(q.staging.getMappedRange().slice(0));
      q.staging.unmap();
      ms = passesMs(t, count / 2) / reps;
      for (const x of t) stamps.push(Number(x - t[0]));  // offsets fit a double for 104 days
    } else {
      await dev.queue.onSubmittedWorkDone();
      ms = (performance.now() - t0) / reps;
    }
    const oom = await dev.popErrorScope();
    const invalid = await dev.popErrorScope();
    const failed = invalid || oom;
    if (failed) throw new Error(`WebGPU error while timing ${timed.items[0].plan.dispatches[0].label}: ${failed.message}`);
    return { ms, stamps };
  }

  /** Free what prepareTiming uploaded.
   * @param {TimedPlans} timed */
  static releaseTiming(timed) {
    timed.buffers.forEach((b) => b.destroy());
    timed.buffers = [];
  }
}

/** The initial bytes of run `run`'s buffers, from the Python that built the plan
 * (wgattn.page.plan_bytes): Pyodide's bytes arrive as a proxy, copied out and freed.
 * @param {WgattnPage} page
 * @param {number} run
 * @returns {InitialBytes} */
export function planBytes(page, run) {
  return (name) => {
    const proxy = page.plan_bytes(run, name);
    const bytes = proxy.toJs();
    proxy.destroy();
    return bytes;
  };
}

/** Run a plan the page's Python prepared ({run, plan}) and hand every buffer read back to that
 * Python (wgattn.page.add_buffer), which judges them. Returns the executor's {raw, timings}; a
 * plan Python found this device cannot run (`plan.unavailable`) throws that reason.
 * @param {Executor} executor
 * @param {WgattnPage} page
 * @param {Prepared} prepared */
export async function runPrepared(executor, page, prepared) {
  if (prepared.plan.unavailable) throw new Error(prepared.plan.unavailable);
  const out = await executor.run(prepared.plan, planBytes(page, prepared.run));
  for (const [name, bytes] of Object.entries(out.raw)) page.add_buffer(prepared.run, name, bytes);
  return out;
}
