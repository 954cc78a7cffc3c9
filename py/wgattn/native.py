"""The native runtime: executes a `Plan` with wgpu-py (CPython only).

One device per process (`runtime()`), compiled pipelines kept in a bounded cache
(`PipelineCache`), sizes checked against the adapter's limits before anything is dispatched. On first use the
adapter is probed with a loop that counts past 65535: a driver that truncates long loops (Debian
12's stock lavapipe) is refused with instructions rather than trusted to return wrong numbers.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import interfaces, precision, protocol, reference
from .errors import AdapterError, CompileError, DoesNotFit
from .plan import Plan
from .registry import Kernel, load, shader_dir
from .target import Target

__all__ = [
    "AdapterError",
    "NativeRuntime",
    "PipelineCache",
    "RunResult",
    "TimedPlans",
    "runtime",
    "implementations",
    "op_function",
    "OPS",
]

# Mesa prints warnings when it cannot find a runtime dir; give it one before wgpu loads Vulkan.
os.environ.setdefault("XDG_RUNTIME_DIR", os.path.join("/tmp", f"wgattn-xdg-{os.getuid()}"))
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

import wgpu  # noqa: E402  (after the environment is set)

LOOP_PROBE_TARGET = 200_000
# Adapter limits the device asks for in full (defaults are far below what adapters offer).
_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-uniform-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
)
_OPTIONAL_FEATURES = ("shader-f16", "subgroup", "timestamp-query")
# Plans use WebGPU's feature names ("subgroups"); wgpu-native calls that one "subgroup".
_WEBGPU_NAMES = {"subgroup": "subgroups"}


# `enable subgroups;` is standard WGSL and browsers require it before any subgroup builtin, but
# the naga in wgpu-native 0.32 refuses it ("the `subgroups` enable-extension is not yet supported")
# and needs nothing in its place (the device feature is enough). The plan carries the standard
# source; only this runtime comments the directive out, at compile time (docs/runtimes.md).
_ENABLE_SUBGROUPS = re.compile(r"^[ \t]*enable[ \t]+subgroups[ \t]*;", re.M)


def _for_naga(source: str) -> str:
    return _ENABLE_SUBGROUPS.sub("// enable subgroups; (naga: implied by the device feature)", source)


def trusted_default() -> bool:
    """Trusted mode unless WGATTN_TRUSTED=0 (see NativeRuntime)."""
    return os.environ.get("WGATTN_TRUSTED", "1").strip().lower() not in ("0", "false", "no", "off")


def _trusted_module(device: "wgpu.GPUDevice", label: str, code: str) -> "wgpu.GPUShaderModule":
    """A shader module without runtime bounds checks or forced loop bounding, through wgpu-native's
    wgpuDeviceCreateShaderModuleTrusted (wgpu-py has no wrapper; its cffi handles are public enough:
    the same calls as its own create_shader_module, with the trusted entry point)."""
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._ffi import ffi, lib

    src = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(code))
    src[0].chain.next = ffi.NULL
    src[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    desc = _api.new_struct_p(
        "WGPUShaderModuleDescriptor *", nextInChain=ffi.cast("WGPUChainedStruct *", src), label=_api.to_c_string_view(label)
    )
    handle = _api.libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, desc, lib.WGPUShaderRuntimeChecks_None)
    if handle == ffi.NULL:
        raise RuntimeError(f"{label}: trusted shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)


def _timestamp_period(device: "wgpu.GPUDevice") -> float:
    """The device's timestamp period, nanoseconds per count (wgpu-py has no wrapper; 1.0 on lavapipe)."""
    from wgpu.backends.wgpu_native._ffi import lib

    return float(lib.wgpuQueueGetTimestampPeriod(device.queue._internal))


class PipelineCache:
    """Compiled compute pipelines by what they are compiled from, the least recently used
    dropped past `size` entries (WGATTN_PIPELINE_CACHE, default 64).

    Every distinct source, entry point, set of override constants (kernels specialise on
    head_dim, tile sizes, ...) and layout is a pipeline of its own, and each holds 1 to 5 MiB
    of host memory on lavapipe (its compiled code): unbounded, a server that sees many shapes
    grows without end. Counted by entries rather than bytes because wgpu reports no pipeline's
    size; 64 covers every kernel of the registry at a few shapes each."""

    def __init__(self, size: Optional[int] = None):
        if size is None:
            size = int(os.environ.get("WGATTN_PIPELINE_CACHE", "64"))
        if size < 1:
            raise ValueError(f"the pipeline cache holds at least 1 pipeline, got {size}")
        self.size = size
        self.hits = self.misses = self.evictions = 0
        self._items: "OrderedDict[Tuple, wgpu.GPUComputePipeline]" = OrderedDict()

    def get(self, key: Tuple, build: Callable[[], "wgpu.GPUComputePipeline"]) -> "wgpu.GPUComputePipeline":
        """The pipeline of `key`, built (and cached) when missing."""
        pipeline = self._items.get(key)
        if pipeline is not None:
            self.hits += 1
            self._items.move_to_end(key)
            return pipeline
        self.misses += 1
        pipeline = build()
        self._items[key] = pipeline
        while len(self._items) > self.size:
            self._items.popitem(last=False)  # wgpu-py releases it once nothing refers to it
            self.evictions += 1
        return pipeline

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> Dict[str, int]:
        return {
            "entries": len(self._items),
            "max_entries": self.size,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }


@dataclass
class RunResult:
    outputs: Dict[str, np.ndarray]
    raw: Dict[str, bytes]  # bytes of every buffer read back, as the page's executor returns them
    timings: Dict[str, float]  # milliseconds: wall (submit to results), gpu (timestamps, if any)


class NativeRuntime:
    """A wgpu-py device that runs plans.

    Trusted mode (`trusted`, on unless WGATTN_TRUSTED=0): dispatches of registered kernels marked
    "trusted" in the manifest are compiled without wgpu's runtime bounds checks and loop bounding,
    which on the H100 take most of the fast kernels' time (docs/performance.md, "Runtime checks",
    and its tables' native trusted and checked columns). An out-of-bounds access would then go
    uncaught, so only kernels that guard every index themselves are marked, their plans validate
    every size before dispatch, and their grids run in both modes in the tests. User WGSL is
    always checked."""

    def __init__(self, adapter: Optional[wgpu.GPUAdapter] = None, *, check_loops: bool = True, trusted: Optional[bool] = None):
        if adapter is None:
            try:
                adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
            except RuntimeError as exc:  # wgpu-py raises, rather than returning None, with no driver
                raise AdapterError(
                    f"wgpu-py found no usable adapter ({' '.join(str(exc).split())[:400]}); install a Vulkan driver "
                    "(software: Mesa's lavapipe >= 23, `make setup` does it on Debian)"
                ) from None
        if adapter is None:
            raise AdapterError(
                "no WebGPU adapter found by wgpu-py; install a Vulkan driver "
                "(software: Mesa's lavapipe >= 23, `make setup` does it on Debian)"
            )
        self.adapter = adapter
        self.features = tuple(f for f in _OPTIONAL_FEATURES if f in adapter.features)
        self.limits = {name: adapter.limits[name] for name in _LIMITS}
        self.device = adapter.request_device_sync(
            label="wgattn", required_features=list(self.features), required_limits=dict(self.limits)
        )
        # Nanoseconds per timestamp count: wgpu-native resolves raw counts (it converts them to
        # nanoseconds only on an instance made with automatic timestamp normalization, which
        # wgpu-py's shared instance is not).
        self.timestamp_period = _timestamp_period(self.device) if "timestamp-query" in self.features else 1.0
        self.pipelines = PipelineCache()
        self.trusted = trusted_default() if trusted is None else bool(trusted)
        # What plans for this device are built for and checked against (wgattn.target).
        self.target = Target(
            features=frozenset(_WEBGPU_NAMES.get(f, f) for f in self.features),
            limits=dict(self.limits),
            software=str(adapter.info.get("adapter_type", "")).lower() == "cpu",
            name=f"this adapter ({self.name})",
        )
        self._precision: Optional[precision.ProbeReport] = None
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

    @property
    def unavailable(self) -> Dict[str, str]:
        """kernel id -> why this adapter cannot run it whatever the sizes (a client skips those,
        saying why, instead of asking)."""
        return {k.id: why for k in load().kernels.values() for why in [self.target.lacks(k)] if why}

    @property
    def name(self) -> str:
        """The adapter in words: its device and backend, e.g. "llvmpipe (...) (Vulkan)"."""
        i = self.info
        return f"{i['device'] or i['description'] or i['vendor']} ({i['backend']})"

    def check_loop_cap(self) -> None:
        """Refuse an adapter that ends loops early (docs/runtimes.md, "Debian 12's lavapipe truncates
        loops": the original sdpa_arena kernel went wrong from seq_k 511)."""
        source = (shader_dir() / "loop_probe.wgsl").read_text()
        pipeline = self._pipeline("loop_probe", source, "main", {})
        counted = self.device.create_buffer(
            label="loop_probe.counted", size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
        )
        probe = self.device.create_buffer_with_data(
            label="loop_probe.probe", data=struct.pack("<4I", LOOP_PROBE_TARGET, 0, 0, 0), usage=wgpu.BufferUsage.UNIFORM
        )
        group = self.device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[{"binding": 0, "resource": {"buffer": counted}}, {"binding": 1, "resource": {"buffer": probe}}],
        )
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
                "VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json"
            )

    def precision(self) -> precision.ProbeReport:
        """The precision probe's report for this adapter (wgattn.precision), run once and kept."""
        if self._precision is None:
            self._precision = precision.probe(self)
        return self._precision

    def _pipeline(self, label: str, source: str, entry: str, constants: Dict[str, float], layout=None, trusted: bool = False):
        """A cached compute pipeline; `layout` [(binding, type)] makes its bind group layout
        explicit ("auto" only when None: tool shaders); `trusted` builds it without runtime checks."""
        key = (
            hashlib.sha256(source.encode()).hexdigest(),
            entry,
            tuple(sorted(constants.items())),
            tuple(map(tuple, layout or ())),
            trusted,
        )

        def build():
            try:
                if trusted:
                    module = _trusted_module(self.device, label, _for_naga(source))
                else:
                    module = self.device.create_shader_module(label=label, code=_for_naga(source))
                pl = "auto"
                if layout is not None:
                    bgl = self.device.create_bind_group_layout(
                        label=label,
                        entries=[
                            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}} for i, t in layout
                        ],
                    )
                    pl = self.device.create_pipeline_layout(label=label, bind_group_layouts=[bgl])
                return self.device.create_compute_pipeline(
                    label=label, layout=pl, compute={"module": module, "entry_point": entry, "constants": dict(constants)}
                )
            except wgpu.GPUError as exc:
                raise CompileError(f"{label}: the WGSL does not compile or link: {exc}") from None

        return self.pipelines.get(key, build)

    def pipeline_cache_stats(self) -> Dict[str, int]:
        """Entries, bound, hits, misses and evictions of the compiled-pipeline cache."""
        return self.pipelines.stats()

    def check_plan(self, plan: Plan) -> None:
        """DoesNotFit before dispatch when this adapter cannot run the plan (wgattn.target's one
        answer: its features, sizes and grid, whatever target the plan was built for)."""
        why = self.target.why_not(plan)
        if why:
            raise DoesNotFit(why)

    def _upload(self, plan: Plan, trusted: Optional[bool] = None):
        """Buffers (filled), pipelines and bind groups for every dispatch of the plan; `trusted`
        (default: the runtime's mode) compiles registered trusted kernels without runtime checks."""
        self.check_plan(plan)
        dev = self.device
        trusted = self.trusted if trusted is None else trusted
        pipelines = [
            self._pipeline(d.label, d.source, d.entry_point, d.constants, d.layout, trusted=trusted and d.trusted)
            for d in plan.dispatches
        ]
        buffers = {}
        for b in plan.buffers:
            usage = wgpu.BufferUsage.STORAGE if b.usage == "storage" else wgpu.BufferUsage.UNIFORM
            usage |= wgpu.BufferUsage.COPY_DST | (wgpu.BufferUsage.COPY_SRC if b.read else 0)
            buf = dev.create_buffer(label=f"{plan.dispatches[0].label}.{b.name}", size=b.size, usage=usage)
            if b.data:
                dev.queue.write_buffer(buf, 0, b.data)
            buffers[b.name] = buf
        groups = [
            dev.create_bind_group(
                label=d.label,
                layout=pipeline.get_bind_group_layout(0),
                entries=[{"binding": i, "resource": {"buffer": buffers[name]}} for i, name in sorted(d.bindings.items())],
            )
            for d, pipeline in zip(plan.dispatches, pipelines)
        ]
        return buffers, pipelines, groups

    def _encode(self, enc, plan: Plan, pipelines, groups, qset=None, first_query: int = 0, passes=None) -> None:
        """One compute pass per dispatch of the plan (or of its indices in `passes`); with a
        query set, dispatch i writes its begin and end timestamps at first_query + 2i."""
        for i in range(len(plan.dispatches)) if passes is None else passes:
            d = plan.dispatches[i]
            ts = None
            if qset is not None:
                q = first_query + 2 * i
                ts = {"query_set": qset, "beginning_of_pass_write_index": q, "end_of_pass_write_index": q + 1}
            cpass = enc.begin_compute_pass(label=d.label, timestamp_writes=ts)
            cpass.set_pipeline(pipelines[i])
            cpass.set_bind_group(0, groups[i])
            cpass.dispatch_workgroups(*d.workgroups)
            cpass.end()

    def _submit(self, plan: Plan, pipelines, groups, timed: bool, between: Optional[Callable[[], None]] = None):
        """Encode and submit every dispatch once; with `timed`, the query buffer of its
        begin/end timestamps (two per pass). With `between`, the dispatches are submitted one
        at a time and between() is called once each has run, before the next: it stops the run
        by raising (a dispatch itself cannot be stopped half way)."""
        dev = self.device
        n = len(plan.dispatches)
        qset = dev.create_query_set(type="timestamp", count=2 * n) if timed else None
        enc = dev.create_command_encoder()
        if between is None or n == 1:
            self._encode(enc, plan, pipelines, groups, qset)
        else:
            fence = dev.create_buffer(label="between.fence", size=4, usage=wgpu.BufferUsage.COPY_SRC)
            for i in range(n):
                if i:
                    dev.queue.submit([enc.finish()])
                    # Reading a buffer waits for the work submitted before it (wgpu-py 0.32's
                    # on_submitted_work_done_sync fails on this wgpu-native: a callback type mismatch).
                    dev.queue.read_buffer(fence)
                    between()
                    enc = dev.create_command_encoder()
                self._encode(enc, plan, pipelines, groups, qset, passes=(i,))
        qbuf = None
        if qset is not None:
            qbuf = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            enc.resolve_query_set(qset, 0, 2 * n, qbuf, 0)
        dev.queue.submit([enc.finish()])
        return qbuf

    def _gpu_ns(self, qbuf, count: int) -> Tuple[float, List[int]]:
        """The nanoseconds between the begin and end timestamps of the passes whose `count`
        timestamps (two a pass) `qbuf` holds, summed; and the timestamps in nanoseconds. Reading
        the buffer waits for the work."""
        counts = struct.unpack(f"<{count}Q", bytes(self.device.queue.read_buffer(qbuf)))
        period = self.timestamp_period
        ns = sum(e - s for s, e in zip(counts[::2], counts[1::2])) * period
        return ns, [round(c * period) for c in counts]

    def run(self, plan: Plan, between: Optional[Callable[[], None]] = None) -> RunResult:
        """Upload, dispatch everything in order in one submission, read back, unpack.
        `between` (e.g. a server's "has the client gone?") is called between dispatches and
        stops the run by raising; they are then submitted one at a time (`_submit`)."""
        t0 = time.perf_counter()
        buffers, pipelines, groups = self._upload(plan)
        timed = "timestamp-query" in self.features
        qbuf = self._submit(plan, pipelines, groups, timed, between)
        raw = {b.name: bytes(self.device.queue.read_buffer(buffers[b.name])) for b in plan.buffers if b.read}
        timings = {"wall_ms": (time.perf_counter() - t0) * 1e3}
        if timed:
            timings["gpu_ms"] = self._gpu_ns(qbuf, 2 * len(plan.dispatches))[0] / 1e6
        return RunResult(outputs=plan.unpack(raw), raw=raw, timings=timings)

    def timing(self, plans: List[Plan], trusted: Optional[bool] = None) -> "TimedPlans":
        """The plans of one timed run, uploaded once, for wgattn.protocol.measure (which warms,
        calibrates and interleaves them with the rest of their series)."""
        return TimedPlans(self, plans, self.trusted if trusted is None else trusted)


class TimedPlans(protocol.Timed):
    """One run of a benchmark job (every dispatch of `plans`, in order) on inputs uploaded once.
    A sample is one submission of `reps` runs: per-run milliseconds from timestamp queries (every
    pass's end minus its begin, summed) where the adapter has them, else from the host clock
    (submit to idle), over `reps`. The timestamps' tick is known: the device's timestamp period."""

    def __init__(self, rt: NativeRuntime, plans: List[Plan], trusted: bool):
        self.rt = rt
        self.uploaded = [(p, *rt._upload(p, trusted)[1:]) for p in plans]
        self.passes = sum(len(p.dispatches) for p in plans)
        self.timer = "gpu" if "timestamp-query" in rt.features else "wall"
        self.resolution_ns = rt.timestamp_period if self.timer == "gpu" else time.get_clock_info("perf_counter").resolution * 1e9
        self._queries: Dict[int, tuple] = {}  # query count -> (query set, resolve buffer)
        self._fence = rt.device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC)

    def sample(self, reps: int) -> Tuple[float, List[int]]:
        dev = self.rt.device
        count = 2 * self.passes * reps
        if self.timer == "gpu" and count > protocol.MOST_QUERIES:
            raise ValueError(f"{reps} reps of {self.passes} passes need {count} timestamps; at most {protocol.MOST_QUERIES}")
        qset = qbuf = None
        if self.timer == "gpu":
            if count not in self._queries:
                self._queries[count] = (
                    dev.create_query_set(type="timestamp", count=count),
                    dev.create_buffer(size=8 * count, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC),
                )
            qset, qbuf = self._queries[count]
        enc = dev.create_command_encoder()
        q = 0
        for _ in range(reps):
            for plan, pipelines, groups in self.uploaded:
                self.rt._encode(enc, plan, pipelines, groups, qset, q)
                q += 2 * len(plan.dispatches)
        if qset is not None:
            enc.resolve_query_set(qset, 0, count, qbuf, 0)
        t0 = time.perf_counter()
        dev.queue.submit([enc.finish()])
        if qbuf is None:
            dev.queue.read_buffer(self._fence)  # waits for the submission before it
            return (time.perf_counter() - t0) * 1e3 / reps, []
        ns, stamps = self.rt._gpu_ns(qbuf, count)
        return ns / 1e6 / reps, stamps


_RUNTIME: Optional[NativeRuntime] = None


def runtime() -> NativeRuntime:
    """The process-wide native runtime (created, and its adapter probed, on first use)."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = NativeRuntime()
    return _RUNTIME


# --- The reference's functions, run on the GPU -----------------------------------------------
# One for every op a registered interface computes (its manifest entry's "reference", a function
# of wgattn.reference), made from the registry: the reference's arguments and keywords (its dtype
# aside), plus impl=. A call is mapped onto an interface by its case_from_reference (ValueError
# when that interface cannot carry it) and runs a registered kernel; a new interface's op needs
# nothing here.


def _kernels_for(op: str) -> List[Kernel]:
    """The registered kernels of every interface whose reference is `op`, best first: by the
    manifest's explicit `rank` (higher first; unique per op, so the order is total)."""
    return load().ranked(op)


def _impl_name(kernel: Kernel) -> str:
    return kernel.id.split(".", 1)[1]


def implementations(op_name: str) -> List[str]:
    """Implementation names available for `op_name` (e.g. "sdpa") on the current adapter,
    best first; each is a kernel id without its interface ("seed", "tiled", ...)."""
    target = runtime().target
    return [_impl_name(k) for k in _kernels_for(op_name) if not target.lacks(k)]


def _run_op(
    op: str, impl: Optional[str], build_case: Callable[[interfaces.Interface], interfaces.Case]
) -> Tuple[np.ndarray, ...]:
    """Run `op` on `impl`, or on the best f32 implementation whose interface carries the call:
    its outputs, in its interface's order."""
    names = implementations(op)
    if not names:
        raise ValueError(f"no implementation of {op} runs on this adapter")
    if impl is not None and impl not in names:
        raise ValueError(f"impl must be one of {names} for {op} on this adapter, got {impl!r}")
    # By default only f32 kernels: float32 arguments are owed float32 accuracy; f16 on request.
    kernels = [
        k
        for k in _kernels_for(op)
        if _impl_name(k) in names and (impl == _impl_name(k) or (impl is None and k.precision == "f32"))
    ]
    refusals = []
    rt = runtime()
    for kernel in kernels:
        iface = interfaces.of(kernel)
        try:
            plan = iface.plan(kernel, build_case(iface), rt.target)
            if plan.unavailable:
                raise DoesNotFit(plan.unavailable)
        except ValueError as e:
            if impl is not None:
                raise
            refusals.append(f"{kernel.id}: {e}")  # that interface cannot carry the call: try the next
            continue
        outputs = rt.run(plan).outputs
        return tuple(outputs[name] for name in iface.OUTPUTS)
    raise ValueError(f"no implementation of {op} accepts this call: " + "; ".join(refusals))


def op_function(op: str) -> Callable[..., Any]:
    """wgattn.reference.`op` run on the GPU: the same arguments and keywords (not dtype), plus
    impl=; returns what the reference returns, in float32 (float16 kernels on request)."""
    ref = getattr(reference, op, None)
    if not callable(ref):
        users = [a.name for a in load().abis.values() if a.reference == op]
        raise ValueError(f"interface(s) {users} name {op!r} as their reference, which is no function of wgattn.reference")
    sig = inspect.signature(ref)
    params = [p for p in sig.parameters.values() if p.name != "dtype"]
    signature = sig.replace(parameters=[*params, inspect.Parameter("impl", inspect.Parameter.KEYWORD_ONLY, default=None)])

    def run(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        impl = bound.arguments.pop("impl")
        outs = _run_op(op, impl, lambda iface: iface.case_from_reference(*bound.args, **bound.kwargs))
        return outs[0] if len(outs) == 1 else outs

    run.__name__ = run.__qualname__ = op
    run.__module__ = __name__
    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__doc__ = (
        f"wgattn.reference.{op} run on the GPU, in float32 unless impl= names a float16 kernel: the same\n"
        f"arguments (see there for shapes, masks and errors), plus impl=, one of implementations({op!r});\n"
        "by default the best float32 kernel whose interface carries the call."
    )
    return run


OPS = list(dict.fromkeys(a.reference for a in load().abis.values()))  # the registry's ops, in its order
globals().update({op: op_function(op) for op in OPS})
__all__ += OPS
