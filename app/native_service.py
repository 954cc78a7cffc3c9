"""The server's native runtime, the bounded queue in front of it and the compiles beside it: one
`NativeService` per app (`create_app` makes it, `app.state.native` holds it, the lifespan starts
and closes it).

wgpu-py drives one device and requests arrive concurrently, so one worker thread owns the
runtime and runs the jobs in turn. A run never compiles on that thread: a pipeline compiles in
seconds to a minute on a software adapter (lavapipe compiles at a pipeline's first dispatch, on
the device's one queue), and every run of every client would wait behind it. So:
- `run_plan` looks up the plan's pipelines first; a plan whose pipelines are all compiled goes
  to the run queue at once (holding them: a cache eviction cannot put a compile back on its
  path). Any other waits for a `Compiler` job;
- the compiler runs at most `limits.COMPILE_WORKERS` threads, each with a device of its own: a
  job runs the plan once there (the driver compiles whenever it compiles: at creation or at the
  first dispatch) and then creates the pipelines of the run device from that thread (wgpu-core
  synchronises a device internally; the driver's shader cache, which both devices share, holds
  the compiled code, so the run device's first dispatch loads it instead of compiling again);
- jobs wait in a queue per client, taken round robin (`client_key`: a client is its network
  address: a connection costs nothing to open, an address does), so one client's stream of new
  shapes delays another's first run of a new shape by at most one compile per waiting client;
  a client has at most `limits.COMPILES_PER_CLIENT` jobs queued, all at most
  `limits.COMPILE_QUEUE` (then 503 + Retry-After);
- requests for the same pipelines share one job; a job whose every requester has left before it
  started is dropped; a started one runs to its end and its pipelines are kept, whatever became
  of the requests (a compile cannot be interrupted, and the next request of that shape gets it);
- with `limits.WARMUP`, a thread compiles the pipelines of the page's default configurations and
  of the conformance grids at start-up, one at a time on a device of its own (`Warmup`);
Around the run queue:
- at most `limits.RUN_QUEUE` jobs are admitted at once (running or waiting); the next is
  refused at once with `Busy` (503 + Retry-After) rather than piling up;
- a job whose client has gone (`Job.cancel`) gives its place back at once: dropped if it has not
  started, and a running one stops at its next dispatch boundary (`RunCancelled`; the GPU cannot
  stop a dispatch half way, so a single long dispatch runs to its end);
- a request that waits longer than `limits.RUN_TIMEOUT_S` for its compile, or whose run takes
  longer, gets `RunTimeout` (504); the compile goes on, the run is told to stop at its next
  dispatch boundary, and the runtime keeps every compiled pipeline. Only a device that has not
  returned from one job in twice that time is taken for hung: its worker and runtime are
  replaced, the jobs queued behind it told to retry (`DeviceFault`);
- a job that fails with anything but ValueError (the caller's: a plan that does not fit or does
  not compile) or AdapterError, e.g. a device lost mid-run, discards the runtime; that request
  gets `DeviceFault` (503 + Retry-After) and the next one creates the runtime anew;
- "no adapter" (AdapterError, or any error while creating the runtime) is remembered for
  `ADAPTER_RETRY_S` and then probed again;
- `close` (shutdown) drops the queued jobs, asks the running one to stop and waits a bounded
  time for it: the workers are daemon threads, so a kernel still on a device does not keep the
  process from exiting.
`stats` (GET /api/health) counts how runs and compiles ended and every request that was
abandoned or timed out, by where it was.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import ipaddress
import logging
import queue
import threading
import time
from typing import Any, Awaitable, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from . import limits

__all__ = [
    "Busy",
    "RunTimeout",
    "DeviceFault",
    "RunCancelled",
    "Abandoned",
    "Job",
    "CompileJob",
    "Compiler",
    "NativeService",
    "ADAPTER_RETRY_S",
    "client_key",
    "warmup_plans",
]

ADAPTER_RETRY_S = 30
POLL_S = 0.05  # how often a waiting request looks for its client having gone
HUNG_FACTOR = 2  # a job on the device this many run timeouts: the device is taken for hung
# Pipelines a compile device keeps: the driver's shader cache keeps their code, and each held on
# lavapipe is megabytes of it (the server's memory grew to 1 GiB through the start-up compiles
# with 16 held by each compile device).
COMPILE_DEVICE_CACHE = 1

log = logging.getLogger("wgattn.app")


class Busy(Exception):
    """The run queue, or the compile queue, is full."""


class RunTimeout(Exception):
    """A request waited longer than the per-request limit for its compile or its run."""


class DeviceFault(Exception):
    """The device failed during (or was reset before) this run; retrying is safe."""


class RunCancelled(Exception):
    """Raised into a running job at a dispatch boundary once it has been cancelled."""


class Abandoned(Exception):
    """The client left before its run's answer; the message says what became of the run, `stage`
    where the request was (GET /api/health counts them by it)."""

    def __init__(self, message: str, stage: str):
        super().__init__(message)
        self.stage = stage


def client_key(host: Optional[str]) -> str:
    """Who a request is, for the compile queue's fairness: its network address (an IPv6 address
    by its /64, the network one host is given), "-" when unknown. A connection, or a port, costs
    a client nothing to multiply; an address does. Behind a reverse proxy every client is the
    proxy's address unless uvicorn is told to trust its forwarded headers (--proxy-headers)."""
    if not host:
        return "-"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _settle(future: concurrent.futures.Future, result=None, exc: Optional[BaseException] = None) -> None:
    """Complete `future` unless something (a timeout, a cancel) already did."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


def _read(future: "asyncio.Future") -> None:
    """A done callback that reads the outcome, so that one nobody waits for logs no warning."""
    if not future.cancelled():
        future.exception()


# --- The run queue ------------------------------------------------------------------------------


class Job:
    """fn(runtime, stop) queued for the worker; `stop()` raises RunCancelled once cancelled
    (the runtime calls it between dispatches)."""

    def __init__(self, fn: Callable, worker: "_Worker"):
        self.fn = fn
        self.worker = worker
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.started_at: Optional[float] = None  # time.monotonic(), set by the worker
        self._cancelled = threading.Event()

    def stop(self) -> None:
        if self._cancelled.is_set():
            raise RunCancelled("the run's client went away")

    def cancel(self) -> str:
        """Drop the job, or ask it to stop; what became of it, in words."""
        self._cancelled.set()
        if self.future.cancel():
            return "the run was dropped before it started"
        if self.future.done():
            return "the run had finished; its answer was discarded"
        return "the run was told to stop at its next dispatch boundary"


class _Worker:
    """A daemon thread running jobs in turn until it dequeues None."""

    def __init__(self, service: "NativeService"):
        self.jobs: "queue.SimpleQueue[Optional[Job]]" = queue.SimpleQueue()
        self.current: Optional[Job] = None
        self.thread = threading.Thread(target=self._loop, args=(service,), name="wgattn-native", daemon=True)
        self.thread.start()

    def _loop(self, service: "NativeService") -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled while it waited: dropped
            job.started_at = time.monotonic()
            self.current = job
            try:
                _settle(job.future, service._execute(self, job))
            except BaseException as exc:
                _settle(job.future, exc=exc)
            finally:
                self.current = None

    def drain(self, why: str) -> None:
        """Fail every job still queued (they may retry) and let the thread end after its job."""
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                _settle(job.future, exc=DeviceFault(why))
        self.jobs.put(None)


# --- Compiles ------------------------------------------------------------------------------------


class CompileJob:
    """The pipelines `keys` of `runtime` (the run device), compiled by running `plan` once on a
    compile device; `waiting` counts the requests waiting for it, per client."""

    def __init__(self, runtime: Any, keys: frozenset, plan: Any, label: str, client: str = ""):
        self.runtime, self.keys, self.plan, self.label = runtime, keys, plan, label
        self.client = client  # whose queue it is in (its first requester)
        self.waiting: "collections.Counter[str]" = collections.Counter()
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.started_at: Optional[float] = None

    @property
    def ident(self) -> Tuple[int, frozenset]:
        return (id(self.runtime), self.keys)


class Compiler:
    """The compile workers, their queues per client and the jobs (module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()  # guards everything below
        self._jobs: Dict[Tuple[int, frozenset], CompileJob] = {}  # queued or running
        self._queues: Dict[str, Deque[CompileJob]] = {}  # per client, in the order asked
        # Turns: a client with jobs queued or running, and the turn it was last served; the next
        # job is the first queued of the client served longest ago. A newcomer counts as served
        # just before the latest turn: after every client that has waited since, before the one
        # just served.
        self._turn = 0
        self._served: Dict[str, float] = {}
        self._active: "collections.Counter[str]" = collections.Counter()  # jobs queued or running
        self._threads: List[threading.Thread] = []
        self._running = 0
        self._outcomes = {"finished": 0, "dropped": 0, "failed": 0}
        self._seconds: List[Tuple[str, float]] = []  # (label, compile seconds) of the latest jobs
        self._closed = False

    # --- requests ---

    def request(self, runtime: Any, plan: Any, client: str, label: str = "") -> Optional[CompileJob]:
        """The job that compiles what `plan` lacks on `runtime` (None: nothing is missing), with
        this request counted as waiting for it. Busy when the client's or the whole queue is full."""
        keys = frozenset(runtime.missing(plan))
        if not keys:
            return None
        with self._cond:
            self._closed = False  # used again after close (a test's app, a lifespan restarted)
            job = self._jobs.get((id(runtime), keys))
            if job is None:
                mine = sum(1 for j in self._queues.get(client, ()) if j.started_at is None and not j.future.done())
                if mine >= limits.COMPILES_PER_CLIENT:
                    raise Busy(
                        f"this client has {mine} kernel compiles queued, the most one client may have; retry once one is done"
                    )
                if self._queued() >= limits.COMPILE_QUEUE:
                    raise Busy(f"the compile queue is full ({limits.COMPILE_QUEUE} compiles); retry shortly")
                job = CompileJob(runtime, keys, plan, label or _label(plan, keys), client)
                self._jobs[job.ident] = job
                self._queues.setdefault(client, collections.deque()).append(job)
                self._served.setdefault(client, self._turn - 0.5)
                self._active[client] += 1
                self._start_workers()
                self._cond.notify()
            job.waiting[client] += 1
        return job

    def leave(self, job: CompileJob, client: str) -> str:
        """A request waiting for `job` has gone (or given up): what became of the compile, in words.
        The last requester of a job that has not started drops it."""
        with self._cond:
            job.waiting[client] -= 1
            if job.waiting[client] <= 0:
                del job.waiting[client]
            if job.waiting:
                return "its kernel compiles on for other requests"
            if job.started_at is None and job.future.cancel():
                self._jobs.pop(job.ident, None)
                self._outcomes["dropped"] += 1
                self._retire(job)
                return "its kernel's compile had not started and was dropped"
        return "its kernel compiles on, and is kept for the next request of this shape"

    def _queued(self) -> int:
        return sum(1 for q in self._queues.values() for j in q if j.started_at is None and not j.future.done())

    # --- the workers ---

    def _start_workers(self) -> None:
        """Under the lock: the compile threads, started on first need."""
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < limits.COMPILE_WORKERS and not self._closed:
            t = threading.Thread(target=self._loop, name=f"wgattn-compile-{len(self._threads)}", daemon=True)
            t.start()
            self._threads.append(t)

    def _take(self) -> Optional[CompileJob]:
        """The next job: the first queued of the client served longest ago; None once closed."""
        with self._cond:
            while not self._closed:
                for client in list(self._queues):
                    q = self._queues[client]
                    while q and (q[0].started_at is not None or q[0].future.done()):
                        q.popleft()
                    if not q:
                        del self._queues[client]
                if self._queues:
                    client = min(self._queues, key=lambda c: self._served[c])  # ties: the first to ask
                    job = self._queues[client].popleft()
                    self._turn += 1
                    self._served[client] = self._turn
                    job.started_at = time.monotonic()
                    job.future.set_running_or_notify_cancel()
                    self._running += 1
                    return job
                self._cond.wait()
            return None

    def _retire(self, job: CompileJob) -> None:
        """Under the lock: `job` is done or dropped; a client with no job left loses its turn."""
        if job.client:
            self._active[job.client] -= 1
            if self._active[job.client] <= 0:
                del self._active[job.client]
                self._served.pop(job.client, None)

    def _loop(self) -> None:
        device = None
        while True:
            job = self._take()
            if job is None:
                return
            device = self.compile(job, device)

    def compile(self, job: CompileJob, device: Any) -> Any:
        """Run `job` (its future settled) on `device`, a compile device made if None; the device
        to use next (None after a fault: the next job makes a fresh one)."""
        from wgattn import native

        t0 = time.monotonic()
        try:
            if device is None:
                device = native.NativeRuntime(check_loops=False, trusted=job.runtime.trusted)
                device.pipelines = native.PipelineCache(COMPILE_DEVICE_CACHE)
            device.run(job.plan)  # compiles every pipeline of the plan on this device
            job.runtime.prepare(job.plan)  # the run device's, from the driver's shader cache
            outcome, result = "finished", None
        except (ValueError, native.AdapterError) as exc:  # does not compile, does not fit, no adapter
            outcome, result = "failed", exc
        except Exception as exc:  # a driver fault on the compile device: the next job gets a fresh one
            log.warning("a compile device failed (%s: %s); the next compile gets a fresh one", type(exc).__name__, exc)
            device = None
            outcome, result = "failed", DeviceFault(f"the compile failed on the device ({type(exc).__name__}); retry")
        seconds = time.monotonic() - t0
        with self._cond:
            self._running -= 1
            self._jobs.pop(job.ident, None)
            self._outcomes[outcome] += 1
            self._retire(job)
            self._seconds = (self._seconds + [(job.label, round(seconds, 2))])[-8:]
        if isinstance(result, BaseException):
            _settle(job.future, exc=result)
        else:
            _settle(job.future, None)
        return device

    def claim(self, runtime: Any, plan: Any, label: str) -> Optional[CompileJob]:
        """A job for `plan`'s missing pipelines that the caller runs itself (`compile`), started
        now; None when nothing is missing or another job already compiles them (the warm-up)."""
        keys = frozenset(runtime.missing(plan))
        with self._cond:
            if not keys or (id(runtime), keys) in self._jobs or self._closed:
                return None
            job = CompileJob(runtime, keys, plan, label)
            job.started_at = time.monotonic()
            job.future.set_running_or_notify_cancel()
            self._jobs[job.ident] = job
            self._running += 1
            return job

    def stats(self) -> Dict[str, Any]:
        with self._cond:
            return {
                "queued": self._queued(),
                "running": self._running,
                **self._outcomes,
                "workers": limits.COMPILE_WORKERS,
                "latest": [{"pipeline": label, "s": s} for label, s in self._seconds],
            }

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for job in list(self._jobs.values()):
                if job.started_at is None:
                    _settle(job.future, exc=DeviceFault("the server is shutting down; retry"))
            self._cond.notify_all()


def _label(plan: Any, keys: frozenset) -> str:
    """What a compile job compiles, in words: its kernel and how many pipelines."""
    kernel = plan.dispatches[0].label.rsplit(".", 1)[0]
    return f"{kernel} ({len(keys)} pipeline{'s' if len(keys) > 1 else ''})"


def warmup_plans(target: Any) -> Iterator[Tuple[str, Any]]:
    """(label, plan) of every kernel `target` can run: its page default configuration first (what
    a visitor runs first), then its conformance grid's cases, in the registry's order."""
    from wgattn import conformance, interfaces, live, registry

    kernels = [k for k in registry.load().kernels.values() if not target.lacks(k)]
    for k in kernels:
        yield f"{k.id} (page default)", live.build(k.id).plan(target)
    for k in kernels:
        iface = interfaces.of(k)
        for case in iface.conformance_cases(0):
            yield f"{k.id} {case.name}", iface.plan(k, conformance.judged_case(k, case), target)


class Warmup:
    """The start-up compiles: `warmup_plans` one at a time on a thread and device of their own,
    each skipped when its pipelines are cached or a client's job compiles them. A client's first
    run of these shapes then finds them compiled; one of a new shape waits for its own compile
    only (the client workers never wait for the warm-up)."""

    def __init__(self, service: "NativeService"):
        self.service = service
        self.planned = self.compiled = self.failed = 0
        self.done = False
        self.thread = threading.Thread(target=self._loop, name="wgattn-warmup", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        service = self.service
        try:
            rt = service.submit(lambda rt, stop: rt).future.result()  # the run device, made on its worker
        except Exception as exc:
            log.warning("no start-up compiles: the native runtime is unavailable (%s)", exc)
            self.done = True
            return
        device = None
        try:
            for label, plan in warmup_plans(rt.target):
                if service.closed:
                    return
                if plan.unavailable:
                    continue
                self.planned += 1
                job = service.compiler.claim(rt, plan, label)
                if job is None:
                    continue
                device = service.compiler.compile(job, device)
                if job.future.exception() is None:
                    self.compiled += 1
                else:
                    self.failed += 1
                    log.warning("start-up compile of %s failed: %s", label, job.future.exception())
        except Exception:
            log.exception("the start-up compiles stopped")
        finally:
            self.done = True

    def stats(self) -> Dict[str, Any]:
        return {"planned": self.planned, "compiled": self.compiled, "failed": self.failed, "done": self.done}


# --- The service ---------------------------------------------------------------------------------


class NativeService:
    """The queue, the worker, the runtime and the compiler (module docstring)."""

    def __init__(self, adapter_retry_s: float = ADAPTER_RETRY_S):
        self.adapter_retry_s = adapter_retry_s
        self._lock = threading.Lock()  # guards everything below
        self._admitted = 0  # jobs running or waiting
        self._outcomes = {"finished": 0, "dropped": 0, "stopped": 0, "failed": 0}
        self._abandoned: "collections.Counter[str]" = collections.Counter()
        self._timed_out: "collections.Counter[str]" = collections.Counter()
        self._worker: Optional[_Worker] = None
        self._runtime = None  # created on the worker on first use; None after a fault
        self._fresh = False  # after a fault, build a new runtime rather than reuse native.runtime()
        self._error: Optional[str] = None
        self._error_at = 0.0
        self.compiler = Compiler()
        self.warmup: Optional[Warmup] = None
        self.closed = False

    def start(self) -> None:
        """What the server does as it starts: the start-up compiles, when `limits.WARMUP` is on."""
        self.closed = False
        if limits.WARMUP and self.warmup is None:
            self.warmup = Warmup(self)

    # --- admission ----------------------------------------------------------------------------

    def submit(self, fn: Callable) -> Job:
        """Queue fn(runtime, stop); Busy when the queue is full."""
        with self._lock:
            if self._admitted >= limits.RUN_QUEUE:
                raise Busy(f"the native run queue is full ({limits.RUN_QUEUE} runs); retry shortly")
            self._admitted += 1
            if self._worker is None:
                self._worker = _Worker(self)
            job = Job(fn, self._worker)
            job.future.add_done_callback(self._done)
            self._worker.jobs.put(job)  # under the lock: never into a worker being drained
        return job

    def _done(self, future: concurrent.futures.Future) -> None:
        """A job left the queue: its place is free; counted by how it ended."""
        if future.cancelled():
            outcome = "dropped"
        elif isinstance(future.exception(), RunCancelled):
            outcome = "stopped"
        else:
            outcome = "failed" if future.exception() is not None else "finished"
        with self._lock:
            self._admitted -= 1
            self._outcomes[outcome] += 1

    def note_abandoned(self, stage: str) -> None:
        """A request whose client left before its answer (the API's error handlers call this)."""
        with self._lock:
            self._abandoned[stage] += 1

    def _note_timeout(self, stage: str) -> None:
        with self._lock:
            self._timed_out[stage] += 1

    async def run(self, fn: Callable, gone: Optional[Callable[[], Awaitable[bool]]] = None, timeout: Optional[float] = None):
        """fn(runtime, stop) on the worker, in turn with every other job; its result or its
        exception. Raises Busy, RunTimeout, DeviceFault, wgattn.native.AdapterError, or
        Abandoned as soon as `gone()` says the client has left (the job is cancelled)."""
        timeout = limits.RUN_TIMEOUT_S if timeout is None else timeout
        if gone is not None and await gone():  # an idle worker would start the job at once
            raise Abandoned("the run was dropped before it started", "queued")
        job = self.submit(fn)
        waiting = asyncio.wrap_future(job.future)
        waiting.add_done_callback(_read)
        queued_at = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=POLL_S)
                if done:
                    return waiting.result()
                if gone is not None and await gone():
                    raise Abandoned(job.cancel(), "queued" if job.started_at is None else "running")
                started = job.started_at
                now = time.monotonic()
                if started is not None and now - started > timeout:
                    job.cancel()  # it stops at its next dispatch boundary; the runtime stays
                    self._note_timeout("running")
                    raise RunTimeout(
                        f"the run took longer than the server's limit of {timeout:g} s per request and was stopped; "
                        "use a smaller configuration"
                    )
                if started is None:
                    self._replace_if_hung(timeout)
                    # The wait in the queue is bounded by the runs ahead, each by the timeout.
                    if now - queued_at > timeout * (limits.RUN_QUEUE + 1):
                        job.cancel()
                        self._note_timeout("queued")
                        raise RunTimeout(f"the run waited longer than {timeout * (limits.RUN_QUEUE + 1):g} s in the queue")
        except asyncio.CancelledError:  # the request was cancelled (shutdown): so is its run
            job.cancel()
            raise

    async def ready(self):
        """The runtime runs use now, made (on the worker) if there is none."""
        rt = self.runtime
        if rt is None:
            rt = await self.run(lambda rt, stop: rt)
        return rt

    async def run_plan(
        self,
        plan: Any,
        client: str = "-",
        gone: Optional[Callable[[], Awaitable[bool]]] = None,
        timeout: Optional[float] = None,
    ):
        """`plan` run on the native device (wgattn.native.RunResult): at once on the run queue if
        its pipelines are compiled, else after a compile job (module docstring). Raises what
        `run` raises, and ValueError for a plan that does not compile."""
        timeout = limits.RUN_TIMEOUT_S if timeout is None else timeout
        rt = await self.ready()
        pipelines = rt.cached_pipelines(plan)
        if pipelines is None:
            await self._compiled(rt, plan, client, gone, timeout)
            pipelines = rt.cached_pipelines(plan)  # None only if evicted since: then compiled in the run

        def execute(run_rt, stop):
            return run_rt.run(plan, between=stop, pipelines=pipelines if run_rt is rt else None)

        return await self.run(execute, gone, timeout)

    async def _compiled(self, rt, plan, client: str, gone, timeout: float) -> None:
        """Wait for the compile of `plan`'s missing pipelines on `rt` (a job shared with every
        request that needs them)."""
        job = self.compiler.request(rt, plan, client)
        if job is None:
            return
        waiting = asyncio.wrap_future(job.future)
        waiting.add_done_callback(_read)
        t0 = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=POLL_S)
                if done:
                    waiting.result()  # the job's error, if any (ValueError: the plan does not compile)
                    return
                if gone is not None and await gone():
                    raise Abandoned(self.compiler.leave(job, client), "compiling")
                if time.monotonic() - t0 > timeout:
                    started = job.started_at is not None
                    what = self.compiler.leave(job, client)
                    self._note_timeout("compiling")
                    raise RunTimeout(
                        f"the kernel's pipelines for this shape were not compiled within the server's limit of {timeout:g} s "
                        f"per request ({'compiling' if started else 'still queued behind other compiles'}); {what}: retry later"
                    )
        except asyncio.CancelledError:
            self.compiler.leave(job, client)
            raise

    # --- the worker's side --------------------------------------------------------------------

    def _runtime_for(self, worker: _Worker):
        """The runtime, created if needed (on the worker thread)."""
        from wgattn import native

        with self._lock:
            if worker is not self._worker:
                raise DeviceFault("the native runner was reset while this run waited; retry")
            if self._runtime is not None:
                return self._runtime
            fresh = self._fresh
        try:
            rt = native.NativeRuntime() if fresh else native.runtime()
        except native.AdapterError as exc:
            self._remember_error(str(exc))
            raise
        except Exception as exc:  # wgpu-py raises RuntimeError, not None, when no driver loads at all
            why = " ".join(str(exc).split())[:400]
            message = f"wgpu-py found no usable adapter: {why}"
            self._remember_error(message)
            raise native.AdapterError(message) from exc
        with self._lock:
            self._error = None
            if worker is self._worker:
                self._runtime = rt
        return rt

    def _execute(self, worker: _Worker, job: Job):
        from wgattn import native

        rt = self._runtime_for(worker)
        try:
            return job.fn(rt, job.stop)
        except (ValueError, native.AdapterError, RunCancelled):
            raise
        except Exception as exc:  # a lost device, a driver fault: nothing the caller did
            with self._lock:
                if worker is self._worker:
                    self._runtime, self._fresh = None, True
            raise DeviceFault(
                f"the native device failed during the run ({type(exc).__name__}); the runtime has been recreated: retry"
            ) from exc

    def _remember_error(self, message: str) -> None:
        with self._lock:
            self._error, self._error_at = message, time.monotonic()

    def _replace_if_hung(self, timeout: float) -> None:
        """Leave a worker whose job has been on the device HUNG_FACTOR timeouts (its request had
        its 504 long ago and it did not stop) to that job: the jobs queued behind it are told to
        retry and the next job gets a fresh worker and device."""
        with self._lock:
            worker = self._worker
            current = worker.current if worker is not None else None
            hung = current is not None and current.started_at is not None
            hung = hung and time.monotonic() - current.started_at > HUNG_FACTOR * timeout  # type: ignore[operator]
            if not hung:
                return
            self._worker, self._runtime, self._fresh = None, None, True
        log.warning("a native run has been on the device for over %g s: replacing the device", HUNG_FACTOR * timeout)
        worker.drain("the native device did not return from a run and has been replaced; retry")  # type: ignore[union-attr]

    # --- what the API reads -------------------------------------------------------------------

    async def adapter_info(self) -> dict:
        """The native adapter's description, or {"error": why there is none}."""
        from wgattn import native

        with self._lock:
            if self._error is not None and time.monotonic() - self._error_at < self.adapter_retry_s:
                return {"error": self._error}
            rt = self._runtime
        if rt is not None:
            return dict(rt.info, unavailable=rt.unavailable)
        try:
            return await self.run(lambda rt, stop: dict(rt.info, unavailable=rt.unavailable))
        except native.AdapterError as exc:
            return {"error": str(exc)}

    @property
    def runtime(self):
        """The runtime runs use now (None until the first run, and after a fault)."""
        with self._lock:
            return self._runtime

    def stats(self) -> dict:
        """The queue, how the runs that left it ended (finished, dropped before they started,
        stopped between dispatches, failed), the compiles (queued, running, how they ended, the
        seconds of the latest), the start-up compiles, every request abandoned or timed out by
        where it was, and once there is a runtime, its pipeline cache."""
        with self._lock:
            rt, admitted, outcomes = self._runtime, self._admitted, dict(self._outcomes)
            abandoned, timed_out = dict(self._abandoned), dict(self._timed_out)
        return {
            "queue": {"admitted": admitted, "limit": limits.RUN_QUEUE},
            "runs": outcomes,
            "compiles": self.compiler.stats(),
            "warmup": self.warmup.stats() if self.warmup is not None else None,
            "requests": {
                "abandoned": dict(abandoned, total=sum(abandoned.values())),
                "timed_out": dict(timed_out, total=sum(timed_out.values())),
            },
            "pipelines": rt.pipeline_cache_stats() if rt is not None else None,
        }

    def close(self, grace: Optional[float] = None) -> None:
        """Drop the queued jobs and compiles, ask the running one to stop and wait up to `grace`
        seconds (default limits.SHUTDOWN_S) for it; the service starts a new worker if used again."""
        grace = limits.SHUTDOWN_S if grace is None else grace
        self.closed = True
        self.compiler.close()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.drain("the server is shutting down; retry")
        running = worker.current
        if running is not None:
            running.cancel()
        worker.thread.join(grace)
        if worker.thread.is_alive():
            with self._lock:  # the stuck thread keeps its device; a later run gets a fresh one
                self._runtime, self._fresh = None, True
            log.warning("a native run is still on the device after %g s; shutting down without it", grace)
