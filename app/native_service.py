"""The server's native runtime and the bounded queue in front of it: one `NativeService` per app
(`create_app` makes it, `app.state.native` holds it, the lifespan closes it).

wgpu-py drives one device and requests arrive concurrently, so one worker thread owns the
runtime and runs the jobs in turn. Around it:
- at most `limits.RUN_QUEUE` jobs are admitted at once (running or waiting); the next is
  refused at once with `Busy` (503 + Retry-After) rather than piling up;
- a job whose client has gone (`Job.cancel`) gives its place back at once: dropped if it has not
  started, and a running one stops at its next dispatch boundary (`RunCancelled`; the GPU cannot
  stop a dispatch half way, so a single long dispatch runs to its end);
- a job that runs longer than `limits.RUN_TIMEOUT_S` is abandoned (`RunTimeout`, 504): its
  thread cannot be interrupted, so the worker and its runtime are replaced, the jobs queued
  behind it are told to retry (`DeviceFault`), and the next job gets a fresh device;
- a job that fails with anything but ValueError (the caller's: a plan that does not fit or does
  not compile) or AdapterError, e.g. a device lost mid-run, discards the runtime; that request
  gets `DeviceFault` (503 + Retry-After) and the next one creates the runtime anew;
- "no adapter" (AdapterError, or any error while creating the runtime) is remembered for
  `ADAPTER_RETRY_S` and then probed again;
- `close` (shutdown) drops the queued jobs, asks the running one to stop and waits a bounded
  time for it: the worker is a daemon thread, so a kernel still on the device does not keep
  the process from exiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from typing import Awaitable, Callable, Optional

from . import limits

__all__ = [
    "Busy",
    "RunTimeout",
    "DeviceFault",
    "RunCancelled",
    "Abandoned",
    "Job",
    "NativeService",
    "ADAPTER_RETRY_S",
]

ADAPTER_RETRY_S = 30
POLL_S = 0.05  # how often a waiting request looks for its client having gone

log = logging.getLogger("wgattn.app")


class Busy(Exception):
    """The run queue is full."""


class RunTimeout(Exception):
    """A run took longer than the per-request limit."""


class DeviceFault(Exception):
    """The device failed during (or was reset before) this run; retrying is safe."""


class RunCancelled(Exception):
    """Raised into a running job at a dispatch boundary once it has been cancelled."""


class Abandoned(Exception):
    """The client left before its run's answer; the message says what became of the run."""


def _settle(future: concurrent.futures.Future, result=None, exc: Optional[BaseException] = None) -> None:
    """Complete `future` unless something (a timeout, a cancel) already did."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


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


class NativeService:
    """The queue, the worker and the runtime (module docstring)."""

    def __init__(self, adapter_retry_s: float = ADAPTER_RETRY_S):
        self.adapter_retry_s = adapter_retry_s
        self._lock = threading.Lock()  # guards everything below
        self._admitted = 0  # jobs running or waiting
        self._outcomes = {"finished": 0, "dropped": 0, "stopped": 0, "failed": 0}
        self._worker: Optional[_Worker] = None
        self._runtime = None  # created on the worker on first use; None after a fault
        self._fresh = False  # after a fault, build a new runtime rather than reuse native.runtime()
        self._error: Optional[str] = None
        self._error_at = 0.0

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

    async def run(self, fn: Callable, gone: Optional[Callable[[], Awaitable[bool]]] = None, timeout: Optional[float] = None):
        """fn(runtime, stop) on the worker, in turn with every other job; its result or its
        exception. Raises Busy, RunTimeout, DeviceFault, wgattn.native.AdapterError, or
        Abandoned as soon as `gone()` says the client has left (the job is cancelled)."""
        timeout = limits.RUN_TIMEOUT_S if timeout is None else timeout
        if gone is not None and await gone():  # an idle worker would start the job at once
            raise Abandoned("the run was dropped before it started")
        job = self.submit(fn)
        waiting = asyncio.wrap_future(job.future)
        waiting.add_done_callback(lambda f: f.cancelled() or f.exception())  # read, even when we stop waiting
        queued_at = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=POLL_S)
                if done:
                    return waiting.result()
                if gone is not None and await gone():
                    raise Abandoned(job.cancel())
                started = job.started_at
                # The wait in the queue is bounded by the runs ahead, each by the timeout (or abandoned).
                if (started is not None and time.monotonic() - started > timeout) or (
                    started is None and time.monotonic() - queued_at > timeout * (limits.RUN_QUEUE + 1)
                ):
                    self._abandon(job)
                    raise RunTimeout(
                        f"the run took longer than the server's limit of {timeout:g} s per request "
                        "and was abandoned; use a smaller configuration"
                    )
        except asyncio.CancelledError:  # the request was cancelled (shutdown): so is its run
            job.cancel()
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

    def _abandon(self, job: Job) -> None:
        """Leave `job`'s worker (and its runtime) to the job; the next job gets fresh ones."""
        with self._lock:
            worker = job.worker
            detached = worker is self._worker
            if detached:  # no job is queued on it from now on
                self._worker, self._runtime, self._fresh = None, None, True
        if detached:  # outside the lock: a settled job's callback takes it
            worker.drain("the native runner was reset while this run waited; retry")
        job.cancel()  # a run of several dispatches stops at the next one
        _settle(job.future, exc=RunTimeout("abandoned"))  # gives its place in the queue back

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
        stopped between dispatches, failed) and, once there is a runtime, its pipeline cache."""
        with self._lock:
            rt, admitted, outcomes = self._runtime, self._admitted, dict(self._outcomes)
        return {
            "queue": {"admitted": admitted, "limit": limits.RUN_QUEUE},
            "runs": outcomes,
            "pipelines": rt.pipeline_cache_stats() if rt is not None else None,
        }

    def close(self, grace: Optional[float] = None) -> None:
        """Drop the queued jobs, ask the running one to stop and wait up to `grace` seconds
        (default limits.SHUTDOWN_S) for it; the service starts a new worker if used again."""
        grace = limits.SHUTDOWN_S if grace is None else grace
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
