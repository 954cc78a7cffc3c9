"""The server's one native runtime: created lazily, used under a lock (one wgpu device, many
request threads)."""
import threading
from typing import Optional

_lock = threading.Lock()
_error: Optional[str] = None


def run_locked(fn):
    """Call fn(runtime) holding the lock; raises wgattn.native.AdapterError when none is usable."""
    from wgattn import native

    with _lock:
        return fn(native.runtime())


def adapter_info():
    """The native adapter's description, or {"error": why there is none}."""
    global _error
    if _error is not None:
        return {"error": _error}
    from wgattn import native

    try:
        return run_locked(lambda rt: rt.info)
    except native.AdapterError as exc:
        _error = str(exc)
        return {"error": _error}
