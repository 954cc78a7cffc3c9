"""The native runtime: executes a `Plan` with wgpu-py (CPython only).

One device per process (`runtime()`), pipelines cached by (source, entry point, constants),
sizes checked against the adapter's limits before anything is dispatched. On first use the
adapter is probed with a loop that counts past 65535: a driver that truncates long loops (Debian
12's stock lavapipe) is refused with instructions rather than trusted to return wrong numbers.
"""
from __future__ import annotations

import hashlib
import os
import struct
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .plan import Plan
from .registry import shader_dir

__all__ = ["AdapterError", "NativeRuntime", "RunResult", "runtime", "implementations", "sdpa",
           "varlen_attention_fwd", "varlen_attention_bwd", "attention_probs"]

# Mesa prints warnings when it cannot find a runtime dir; give it one before wgpu loads Vulkan.
os.environ.setdefault("XDG_RUNTIME_DIR", os.path.join("/tmp", f"wgattn-xdg-{os.getuid()}"))
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

import wgpu  # noqa: E402  (after the environment is set)

LOOP_PROBE_TARGET = 200_000
# Adapter limits the device asks for in full (defaults are far below what adapters offer).
_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
)
_OPTIONAL_FEATURES = ("shader-f16", "subgroup", "timestamp-query")
# Our plan uses "subgroups" (the WebGPU name); wgpu-native calls the same feature "subgroup".
_FEATURE_NAMES = {"subgroups": "subgroup"}


class AdapterError(RuntimeError):
    """No usable adapter: none found, or one that computes wrong answers."""


@dataclass
class RunResult:
    outputs: Dict[str, "object"]
    raw: Dict[str, bytes]  # bytes of every buffer read back, as the page's executor returns them
    timings: Dict[str, float]  # milliseconds: wall (submit to results), gpu (timestamps, if any)


class NativeRuntime:
    """A wgpu-py device that runs plans."""

    def __init__(self, adapter: Optional[wgpu.GPUAdapter] = None, *, check_loops: bool = True):
        adapter = adapter or wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise AdapterError(
                "no WebGPU adapter found by wgpu-py; install a Vulkan driver "
                "(software: Mesa's lavapipe >= 23, `make setup` does it on Debian)")
        self.adapter = adapter
        self.features = tuple(f for f in _OPTIONAL_FEATURES if f in adapter.features)
        self.limits = {name: adapter.limits[name] for name in _LIMITS}
        self.device = adapter.request_device_sync(
            label="wgattn", required_features=list(self.features), required_limits=dict(self.limits))
        self._pipelines: Dict[Tuple[str, str, Tuple], wgpu.GPUComputePipeline] = {}
        if check_loops:
            self.check_loop_cap()

    @property
    def info(self) -> Dict[str, object]:
        i = self.adapter.info
        return {
            "runtime": "native",
            "vendor": i.get("vendor", ""),
            "architecture": i.get("architecture", ""),
            "device": i.get("device", ""),
            "description": i.get("description", ""),
            "backend": i.get("backend_type", ""),
            "adapter_type": i.get("adapter_type", ""),
            "features": list(self.features),
        }

    def check_loop_cap(self) -> None:
        """Refuse an adapter that ends loops early (SEEDS.md: wrong SDPA from seq_k 511)."""
        source = (shader_dir() / "loop_probe.wgsl").read_text()
        pipeline = self._pipeline("loop_probe", source, "main", {})
        counted = self.device.create_buffer(
            label="loop_probe.counted", size=16,
            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        probe = self.device.create_buffer_with_data(
            label="loop_probe.probe", data=struct.pack("<4I", LOOP_PROBE_TARGET, 0, 0, 0),
            usage=wgpu.BufferUsage.UNIFORM)
        group = self.device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[{"binding": 0, "resource": {"buffer": counted}},
                     {"binding": 1, "resource": {"buffer": probe}}])
        enc = self.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(1, 1, 1)
        cpass.end()
        self.device.queue.submit([enc.finish()])
        got = struct.unpack("<I", bytes(self.device.queue.read_buffer(counted))[:4])[0]
        if got != LOOP_PROBE_TARGET:
            desc = self.adapter.info.get("description", "") or self.adapter.info.get("device", "")
            raise AdapterError(
                f"adapter {desc!r} stopped a {LOOP_PROBE_TARGET}-iteration loop after {got}: it "
                "truncates long loops and would return wrong attention silently. Fix: install "
                "Mesa >= 23 (Debian 12: apt-get install -t bookworm-backports mesa-vulkan-drivers; "
                "`make setup` does this), or use Chromium's SwiftShader: "
                "VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json")

    def _pipeline(self, label: str, source: str, entry: str, constants: Dict[str, float], layout=None):
        """A cached compute pipeline; `layout` [(binding, type)] makes its bind group layout
        explicit ("auto" only when None: tool shaders)."""
        key = (hashlib.sha256(source.encode()).hexdigest(), entry, tuple(sorted(constants.items())),
               tuple(map(tuple, layout or ())))
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            try:
                module = self.device.create_shader_module(label=label, code=source)
                pl = "auto"
                if layout is not None:
                    bgl = self.device.create_bind_group_layout(label=label, entries=[
                        {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
                        for i, t in layout])
                    pl = self.device.create_pipeline_layout(label=label, bind_group_layouts=[bgl])
                pipeline = self.device.create_compute_pipeline(
                    label=label, layout=pl,
                    compute={"module": module, "entry_point": entry, "constants": dict(constants)})
            except wgpu.GPUError as exc:
                raise ValueError(f"{label}: the WGSL does not compile or link: {exc}") from None
            self._pipelines[key] = pipeline
        return pipeline

    def check_plan(self, plan: Plan) -> None:
        """Raise ValueError before dispatch when the plan exceeds this adapter's limits."""
        max_binding = self.limits["max-storage-buffer-binding-size"]
        max_buffer = self.limits["max-buffer-size"]
        for b in plan.buffers:
            limit = max_binding if b.usage == "storage" else 65536
            if b.size > min(limit, max_buffer):
                raise ValueError(
                    f"buffer {b.name!r} needs {b.size} bytes; this adapter binds at most "
                    f"{min(limit, max_buffer)} bytes per {b.usage} buffer: use smaller inputs")
        max_wg = self.limits["max-compute-workgroups-per-dimension"]
        for d in plan.dispatches:
            if any(n > max_wg for n in d.workgroups):
                raise ValueError(f"{d.label}: workgroups {d.workgroups} exceed {max_wg} per dimension")
            missing = [f for f in d.requires if _FEATURE_NAMES.get(f, f) not in self.features]
            if missing:
                raise ValueError(f"{d.label}: needs adapter features {missing}, which this adapter lacks")

    def run(self, plan: Plan) -> RunResult:
        """Upload, dispatch everything in order in one submission, read back, unpack."""
        self.check_plan(plan)
        dev = self.device
        pipelines = [self._pipeline(d.label, d.source, d.entry_point, d.constants, d.layout)
                     for d in plan.dispatches]
        t0 = time.perf_counter()
        buffers = {}
        for b in plan.buffers:
            usage = (wgpu.BufferUsage.STORAGE if b.usage == "storage" else wgpu.BufferUsage.UNIFORM)
            usage |= wgpu.BufferUsage.COPY_DST | (wgpu.BufferUsage.COPY_SRC if b.read else 0)
            buf = dev.create_buffer(label=f"{plan.dispatches[0].label}.{b.name}", size=b.size, usage=usage)
            if b.data:
                dev.queue.write_buffer(buf, 0, b.data)
            buffers[b.name] = buf
        timed = "timestamp-query" in self.features
        if timed:
            qset = dev.create_query_set(type="timestamp", count=2 * len(plan.dispatches))
            qbuf = dev.create_buffer(size=16 * len(plan.dispatches),
                                     usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        enc = dev.create_command_encoder()
        for n, (d, pipeline) in enumerate(zip(plan.dispatches, pipelines)):
            group = dev.create_bind_group(
                label=d.label, layout=pipeline.get_bind_group_layout(0),
                entries=[{"binding": i, "resource": {"buffer": buffers[name]}}
                         for i, name in sorted(d.bindings.items())])
            ts = ({"query_set": qset, "beginning_of_pass_write_index": 2 * n,
                   "end_of_pass_write_index": 2 * n + 1} if timed else None)
            cpass = enc.begin_compute_pass(label=d.label, timestamp_writes=ts)
            cpass.set_pipeline(pipeline)
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(*d.workgroups)
            cpass.end()
        if timed:
            enc.resolve_query_set(qset, 0, 2 * len(plan.dispatches), qbuf, 0)
        dev.queue.submit([enc.finish()])
        raw = {b.name: bytes(dev.queue.read_buffer(buffers[b.name])) for b in plan.buffers if b.read}
        timings = {"wall_ms": (time.perf_counter() - t0) * 1e3}
        if timed:
            stamps = struct.unpack(f"<{2 * len(plan.dispatches)}Q", bytes(dev.queue.read_buffer(qbuf)))
            timings["gpu_ms"] = sum(e - s for s, e in zip(stamps[::2], stamps[1::2])) / 1e6
        return RunResult(outputs=plan.unpack(raw), raw=raw, timings=timings)


_RUNTIME: Optional[NativeRuntime] = None


def runtime() -> NativeRuntime:
    """The process-wide native runtime (created, and its adapter probed, on first use)."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = NativeRuntime()
    return _RUNTIME


# --- The reference's functions, run on the GPU -----------------------------------------------
# Same names and keywords as wgattn.reference, plus impl=. Each maps its keywords onto an
# interface (ValueError when that interface cannot carry them) and runs a registered kernel.

def _interface_for(op: str):
    from .registry import load

    reg = load()
    for iface in reg.interfaces.values():
        if iface.reference == op:
            return iface
    raise ValueError(f"unknown op {op!r}; ops: {sorted(i.reference for i in reg.interfaces.values())}")


def implementations(op_name: str) -> list:
    """Implementation names available for `op_name` (e.g. "sdpa") on the current adapter,
    best first."""
    from .registry import load

    iface = _interface_for(op_name)
    have = runtime().features
    kernels = [k for k in load().kernels_of(iface.name)
               if all(_FEATURE_NAMES.get(f, f) in have for f in k.requires)]
    # Registry order is from baseline to fastest: the last one registered is the best.
    return [k.id.split(".", 1)[1] for k in reversed(kernels)]


def _run_op(op: str, impl, build_case):
    from .interfaces import module
    from .registry import load

    iface = _interface_for(op)
    names = implementations(op)
    if not names:
        raise ValueError(f"no implementation of {op} runs on this adapter")
    impl = names[0] if impl is None else impl
    if impl not in names:
        raise ValueError(f"impl must be one of {names} for {op} on this adapter, got {impl!r}")
    kernel = load().kernel(f"{iface.name}.{impl}")
    mod = module(iface.name)
    return runtime().run(mod.plan(kernel, build_case(mod))).outputs


def sdpa(q, k, v, *, mask=None, causal=False, window=None, scale=None, layout="bhsd", impl=None):
    """wgattn.reference.sdpa on the GPU (float32); see there for shapes and masks."""
    outs = _run_op("sdpa", impl, lambda mod: mod.case_from_reference(
        q, k, v, mask=mask, causal=causal, window=window, scale=scale, layout=layout))
    return outs["out"]


def varlen_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=False, scale=None,
                         window=(-1, -1), softcap=0.0, causal_align="bottom_right", impl=None):
    """wgattn.reference.varlen_attention_fwd on the GPU: (out, lse)."""
    outs = _run_op("varlen_attention_fwd", impl, lambda mod: mod.case_from_reference(
        q, k, v, cu_seqlens_q, cu_seqlens_k, causal=causal, scale=scale, window=window,
        softcap=softcap, causal_align=causal_align))
    return outs["out"], outs["lse"]


def varlen_attention_bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *, causal=False,
                         scale=None, window=(-1, -1), softcap=0.0, causal_align="bottom_right", impl=None):
    """wgattn.reference.varlen_attention_bwd on the GPU: (dq, dk, dv)."""
    outs = _run_op("varlen_attention_bwd", impl, lambda mod: mod.case_from_reference(
        dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, causal=causal, scale=scale, window=window,
        softcap=softcap, causal_align=causal_align))
    return outs["dq"], outs["dk"], outs["dv"]


def attention_probs(q, k_hist, *, pos, window=0, scale=1.0, impl=None):
    """wgattn.reference.attention_probs on the GPU: probs [Hq, history_len]."""
    outs = _run_op("attention_probs", impl, lambda mod: mod.case_from_reference(
        q, k_hist, pos=pos, window=window, scale=scale))
    return outs["probs"]
