"""The server's one native runtime and the bounded queue in front of it.

wgpu-py drives one device and requests arrive on many threads, so one worker thread owns the
runtime and runs the jobs in turn. Around it:
- at most `limits.RUN_QUEUE` jobs are admitted at once (running or waiting); the next is
  refused at once with `Busy` (503 + Retry-After) rather than piling up;
- a job that runs longer than `limits.RUN_TIMEOUT_S` is abandoned (`RunTimeout`, 504): its
  thread cannot be interrupted, so the worker and its runtime are replaced, the jobs queued
  behind it are told to retry (`DeviceFault`), and the next job gets a fresh device;
- a job that fails with anything but ValueError (the caller's: a plan that does not fit or does
  not compile) or AdapterError, e.g. a device lost mid-run, discards the runtime; that request
  gets `DeviceFault` (503 + Retry-After) and the next one creates the runtime anew.
- "no adapter" (AdapterError, or any error while creating the runtime) is remembered for
  `ADAPTER_RETRY_S` and then probed again.
"""

import concurrent.futures
import threading
import time
from typing import Optional

from . import limits

__all__ = ["Busy", "RunTimeout", "DeviceFault", "run_locked", "adapter_info", "ADAPTER_RETRY_S"]

ADAPTER_RETRY_S = 30


class Busy(Exception):
    """The run queue is full."""


class RunTimeout(Exception):
    """A run took longer than the per-request limit."""


class DeviceFault(Exception):
    """The device failed during (or was reset before) this run; retrying is safe."""


_state = threading.Lock()  # guards everything below
_admitted = 0  # jobs running or waiting
_generation = 0  # bumped when the worker is abandoned: its jobs are no longer ours
_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_runtime = None  # created in the worker on first use; None after a fault
_fresh = False  # after a fault, build a new runtime rather than reuse native.runtime()
_error: Optional[str] = None
_error_at = 0.0


def _new_runtime():
    from wgattn import native

    return native.NativeRuntime() if _fresh else native.runtime()


def _get_runtime(generation: int):
    """The runtime, created if needed (in the worker thread)."""
    global _runtime, _error
    with _state:
        if generation != _generation:
            raise DeviceFault("the native runner was reset while this run waited; retry")
        if _runtime is not None:
            return _runtime
    from wgattn import native

    try:
        rt = _new_runtime()
    except native.AdapterError as exc:
        _remember_error(str(exc))
        raise
    except Exception as exc:  # wgpu-py raises RuntimeError, not None, when no driver loads at all
        why = " ".join(str(exc).split())[:400]
        _remember_error(f"wgpu-py found no usable adapter: {why}")
        raise native.AdapterError(_error) from exc
    with _state:
        _error = None
        if generation == _generation:
            _runtime = rt
    return rt


def _remember_error(message: str) -> None:
    global _error, _error_at
    with _state:
        _error, _error_at = message, time.monotonic()


def _discard(generation: int, abandon: bool) -> None:
    """Forget the runtime (and, when `abandon`, the worker stuck in it) of `generation`."""
    global _runtime, _fresh, _executor, _generation
    with _state:
        if generation != _generation:
            return
        _runtime, _fresh = None, True
        if abandon:
            _generation += 1
            if _executor is not None:
                _executor.shutdown(wait=False, cancel_futures=True)
            _executor = None


def _job(fn, generation: int, started: threading.Event):
    from wgattn import native

    rt = _get_runtime(generation)
    started.set()
    try:
        return fn(rt)
    except (ValueError, native.AdapterError):
        raise
    except Exception as exc:  # a lost device, a driver fault: nothing the caller did
        _discard(generation, abandon=False)
        raise DeviceFault(
            f"the native device failed during the run ({type(exc).__name__}); the runtime has been recreated: retry"
        ) from exc


def run_locked(fn, timeout: Optional[float] = None):
    """fn(runtime) on the worker thread, in turn with every other run; its result or its
    exception. Raises Busy, RunTimeout, DeviceFault or wgattn.native.AdapterError as above."""
    global _admitted, _executor
    timeout = limits.RUN_TIMEOUT_S if timeout is None else timeout
    with _state:
        if _admitted >= limits.RUN_QUEUE:
            raise Busy(f"the native run queue is full ({limits.RUN_QUEUE} runs); retry shortly")
        _admitted += 1
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="wgattn-native")
        executor, generation = _executor, _generation
    try:
        started = threading.Event()
        try:
            future = executor.submit(_job, fn, generation, started)
        except RuntimeError:  # shut down between our lock and submit: the worker was abandoned
            raise DeviceFault("the native runner was reset while this run waited; retry") from None
        future.add_done_callback(lambda _: started.set())
        # The wait in the queue is bounded by the runs ahead, each by the timeout (or abandoned).
        queued = started.wait(timeout * (limits.RUN_QUEUE + 1))
        try:
            return future.result(timeout if queued else 0)
        except concurrent.futures.TimeoutError:
            _discard(generation, abandon=True)
            raise RunTimeout(
                f"the run took longer than the server's limit of {timeout:g} s per request "
                "and was abandoned; use a smaller configuration"
            ) from None
        except concurrent.futures.CancelledError:
            raise DeviceFault("the native runner was reset while this run waited; retry") from None
    finally:
        with _state:
            _admitted -= 1


def adapter_info():
    """The native adapter's description, or {"error": why there is none}."""
    from wgattn import native

    with _state:
        if _error is not None and time.monotonic() - _error_at < ADAPTER_RETRY_S:
            return {"error": _error}
        rt = _runtime
    if rt is not None:
        return rt.info
    try:
        return run_locked(lambda rt: rt.info)
    except native.AdapterError as exc:
        return {"error": str(exc)}
