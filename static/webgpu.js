// WebGPU executor: runs a wgattn dispatch plan (built by Python, wgattn/plan.py) and returns the
// bytes of the buffers it reads back. It makes no numerical decision of its own.

const FEATURES = ["shader-f16", "subgroups", "timestamp-query"];
const LIMITS = [
  "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupsPerDimension", "maxStorageBuffersPerShaderStage",
];

/** Kebab-case limit names, as wgpu-py and wgattn.plan use them. */
const kebab = (name) => name.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());

/** Open the browser's WebGPU device; {error} says plainly why when there is none. */
/** WGSL that does not compile: nothing else will run with it (Python's twin: wgattn.errors.CompileError). */
export class CompileError extends Error {
  constructor(message) {
    super(message);
    this.name = "CompileError";
  }
}

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
  const i = adapter.info || {};
  return {
    device,
    info: {
      runtime: "browser", vendor: i.vendor || "", architecture: i.architecture || "",
      device: i.device || "", description: i.description || "", features: requiredFeatures,
    },
    limits: Object.fromEntries(LIMITS.map((k) => [kebab(k), device.limits[k]])),
  };
}

/** Runs plans on one device, caching pipelines by (source, entry point, constants). */
export class Executor {
  constructor(device) {
    this.device = device;
    this.pipelines = new Map();
    this.timed = device.features.has("timestamp-query");
  }

  async pipeline(d) {
    const key = JSON.stringify([d.source, d.entry_point, d.constants, d.layout]);
    if (!this.pipelines.has(key)) {
      const module = this.device.createShaderModule({ label: d.label, code: d.source });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === "error");
      if (errors.length) {
        throw new CompileError(`${d.label}: WGSL does not compile: ` +
          errors.map((m) => `line ${m.lineNum}:${m.linePos} ${m.message}`).join("; "));
      }
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
        throw new CompileError(`${d.label}: WGSL does not compile or link: ${e.message || e}`);
      }
      this.pipelines.set(key, { pipeline: p, bindGroupLayout });
    }
    return this.pipelines.get(key);
  }

  /**
   * Run `plan` ({buffers, dispatches}); `initial(name)` gives a buffer's initial bytes.
   * Returns {raw: {name: Uint8Array}, timings: {wall_ms, gpu_ms?}}.
   */
  async run(plan, initial) {
    const dev = this.device;
    const pipelines = [];
    for (const d of plan.dispatches) pipelines.push(await this.pipeline(d));
    dev.pushErrorScope("validation");
    dev.pushErrorScope("out-of-memory");
    const t0 = performance.now();
    const buffers = {};
    for (const b of plan.buffers) {
      const usage = (b.usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) |
        GPUBufferUsage.COPY_DST | (b.read ? GPUBufferUsage.COPY_SRC : 0);
      buffers[b.name] = dev.createBuffer({ label: `${plan.dispatches[0].label}.${b.name}`, size: b.size, usage });
      if (b.has_data) dev.queue.writeBuffer(buffers[b.name], 0, initial(b.name));
    }
    const n = plan.dispatches.length;
    const qset = this.timed ? dev.createQuerySet({ type: "timestamp", count: 2 * n }) : null;
    const qbuf = this.timed ? dev.createBuffer({ size: 16 * n, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }) : null;
    const enc = dev.createCommandEncoder({ label: "wgattn.run" });
    plan.dispatches.forEach((d, i) => {
      const group = dev.createBindGroup({
        label: d.label, layout: pipelines[i].bindGroupLayout,
        entries: d.bindings.map(([binding, name]) => ({ binding, resource: { buffer: buffers[name] } })),
      });
      const pass = enc.beginComputePass({
        label: d.label,
        timestampWrites: qset ? { querySet: qset, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } : undefined,
      });
      pass.setPipeline(pipelines[i].pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(...d.workgroups);
      pass.end();
    });
    const reads = plan.buffers.filter((b) => b.read).concat(qbuf ? [{ name: "__timestamps", size: 16 * n }] : []);
    if (qset) enc.resolveQuerySet(qset, 0, 2 * n, qbuf, 0);
    const staging = {};
    for (const b of reads) {
      staging[b.name] = dev.createBuffer({ label: `readback.${b.name}`, size: b.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      enc.copyBufferToBuffer(b.name === "__timestamps" ? qbuf : buffers[b.name], 0, staging[b.name], 0, b.size);
    }
    dev.queue.submit([enc.finish()]);
    const raw = {};
    for (const b of reads) {
      await staging[b.name].mapAsync(GPUMapMode.READ);
      raw[b.name] = new Uint8Array(staging[b.name].getMappedRange().slice(0));
      staging[b.name].unmap();
      staging[b.name].destroy();
    }
    const timings = { wall_ms: performance.now() - t0 };
    const oom = await dev.popErrorScope();
    const invalid = await dev.popErrorScope();
    Object.values(buffers).forEach((b) => b.destroy());
    if (invalid || oom) throw new Error(`WebGPU error while running ${plan.dispatches[0].label}: ${(invalid || oom).message}`);
    if (raw.__timestamps) {
      const t = new BigUint64Array(raw.__timestamps.buffer);
      let ns = 0n;
      for (let i = 0; i < n; i++) ns += t[2 * i + 1] - t[2 * i];
      timings.gpu_ms = Number(ns) / 1e6;
      delete raw.__timestamps;
    }
    return { raw, timings };
  }

  /** Why this device cannot run `plan` (features, buffer sizes, grid), or "" when it can. */
  check(plan) {
    const dev = this.device;
    for (const d of plan.dispatches) {
      const missing = (d.requires || []).filter((f) => !dev.features.has(f));
      if (missing.length) return `${d.label} needs adapter features ${missing.join(", ")}, which this device lacks`;
      const most = dev.limits.maxComputeWorkgroupsPerDimension;
      if (d.workgroups.some((n) => n > most)) return `${d.label}: workgroups ${d.workgroups} exceed ${most} per dimension`;
    }
    for (const b of plan.buffers) {
      const most = Math.min(dev.limits.maxBufferSize, b.usage === "uniform"
        ? dev.limits.maxUniformBufferBindingSize : dev.limits.maxStorageBufferBindingSize);
      if (b.size > most) return `buffer ${b.name} needs ${b.size} bytes; this device binds at most ${most} per ${b.usage} buffer`;
    }
    return "";
  }

  /**
   * Time `plan`: upload once (`initial(name)` gives a buffer's bytes), then dispatch it
   * `warmup` + `runs` times, one submission each, waiting for each. Resolves to
   * {timer: "gpu", samples} (per-run ms from timestamp queries, every pass summed, as
   * wgattn.native's time) or, without timestamp-query or with `timer: "wall"`, {timer: "wall",
   * samples} (ms from submit to queue.onSubmittedWorkDone()). run() is untouched by this.
   * `stop()`, asked before each submission, cancels (throws an Error named "Cancelled").
   */
  async time(plan, initial, { runs = 10, warmup = 3, timer = "gpu", stop = null } = {}) {
    const dev = this.device;
    const gpu = timer === "gpu" && this.timed;
    const pipelines = [];
    for (const d of plan.dispatches) pipelines.push(await this.pipeline(d));
    dev.pushErrorScope("validation");
    dev.pushErrorScope("out-of-memory");
    const made = [];
    const make = (desc) => { const b = dev.createBuffer(desc); made.push(b); return b; };
    const samples = [];
    let failure = null;
    try {
      const buffers = {};
      for (const b of plan.buffers) {
        const usage = (b.usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) | GPUBufferUsage.COPY_DST;
        buffers[b.name] = make({ label: `${plan.dispatches[0].label}.${b.name}`, size: b.size, usage });
        if (b.has_data) dev.queue.writeBuffer(buffers[b.name], 0, initial(b.name));
      }
      const groups = plan.dispatches.map((d, i) => dev.createBindGroup({
        label: d.label, layout: pipelines[i].bindGroupLayout,
        entries: d.bindings.map(([binding, name]) => ({ binding, resource: { buffer: buffers[name] } })),
      }));
      const n = plan.dispatches.length;
      const qset = gpu ? dev.createQuerySet({ type: "timestamp", count: 2 * n }) : null;
      const qbuf = gpu ? make({ size: 16 * n, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }) : null;
      const staging = gpu ? make({ label: "timestamps", size: 16 * n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }) : null;
      await dev.queue.onSubmittedWorkDone();  // the uploads are not part of any run
      for (let r = 0; r < warmup + runs; r++) {
        if (stop && stop()) throw Object.assign(new Error("cancelled"), { name: "Cancelled" });
        const enc = dev.createCommandEncoder({ label: "wgattn.time" });
        plan.dispatches.forEach((d, i) => {
          const pass = enc.beginComputePass({
            label: d.label,
            timestampWrites: gpu ? { querySet: qset, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } : undefined,
          });
          pass.setPipeline(pipelines[i].pipeline);
          pass.setBindGroup(0, groups[i]);
          pass.dispatchWorkgroups(...d.workgroups);
          pass.end();
        });
        if (gpu) {
          enc.resolveQuerySet(qset, 0, 2 * n, qbuf, 0);
          enc.copyBufferToBuffer(qbuf, 0, staging, 0, 16 * n);
        }
        const t0 = performance.now();
        dev.queue.submit([enc.finish()]);
        let ms;
        if (gpu) {
          await staging.mapAsync(GPUMapMode.READ);  // resolves once this submission is done
          const t = new BigUint64Array(staging.getMappedRange().slice(0));
          staging.unmap();
          let ns = 0n;
          for (let i = 0; i < n; i++) ns += t[2 * i + 1] - t[2 * i];
          ms = Number(ns) / 1e6;
        } else {
          await dev.queue.onSubmittedWorkDone();
          ms = performance.now() - t0;
        }
        if (r >= warmup) samples.push(ms);
      }
      if (qset) qset.destroy();
    } catch (e) {
      failure = e;
    }
    const oom = await dev.popErrorScope();
    const invalid = await dev.popErrorScope();
    made.forEach((b) => b.destroy());
    if (invalid || oom) throw new Error(`WebGPU error while timing ${plan.dispatches[0].label}: ${(invalid || oom).message}`);
    if (failure) throw failure;
    return { timer: gpu ? "gpu" : "wall", samples };
  }
}

/** The initial bytes of run `run`'s buffers, from the Python that built the plan
 * (wgattn.page.plan_bytes): Pyodide's bytes arrive as a proxy, copied out and freed. */
export function planBytes(page, run) {
  return (name) => {
    const proxy = page.plan_bytes(run, name);
    const bytes = proxy.toJs();
    proxy.destroy();
    return bytes;
  };
}

/** Run a plan the page's Python prepared ({run, plan}) and hand every buffer read back to that
 * Python (wgattn.page.add_buffer), which judges them. Returns the executor's {raw, timings}. */
export async function runPrepared(executor, page, prepared) {
  const out = await executor.run(prepared.plan, planBytes(page, prepared.run));
  for (const [name, bytes] of Object.entries(out.raw)) page.add_buffer(prepared.run, name, bytes);
  return out;
}
