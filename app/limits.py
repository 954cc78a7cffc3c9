"""How much of the server one client can take: the numbers, set from the environment at start-up.

- WGATTN_MAX_BODY_BYTES: a request body over this is refused with 413 before it is parsed
  (FastAPI's `max_body_size` counts the bytes as they arrive, chunked bodies included). The
  default fits the largest request the API accepts: q, k and v of `wgattn.cases.MAX_ELEMENTS`
  float32 values in base64, plus room for the rest of the JSON.
- WGATTN_MAX_JSON_VALUES: a body with more JSON arrays, objects and list items than this is
  refused before it is parsed: a valid body is a few base64 strings and small shapes, while
  millions of tiny values (`[1,1,1,...]`) cost seconds of CPU and gigabytes to parse.
- WGATTN_RUN_QUEUE: native runs admitted at once (one runs, the rest wait); the next is
  refused with 503 and Retry-After instead of piling up.
- WGATTN_RUN_TIMEOUT_S: a run (not its wait in the queue) that takes longer is abandoned and
  the client gets 504; the runtime is replaced so that the next run does not wait behind it.
"""
import math
import os

from wgattn.cases import MAX_ELEMENTS

__all__ = ["MAX_BODY_BYTES", "MAX_JSON_VALUES", "RUN_QUEUE", "RUN_TIMEOUT_S", "RETRY_AFTER_S", "THREADS"]


def _env(name: str, default, kind=int, minimum=1):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not (math.isfinite(value) and value >= minimum):
        raise ValueError(f"{name} must be >= {minimum}, got {raw!r}")
    return value


# float32 q, k, v of at most MAX_ELEMENTS values, base64 (4 bytes -> 16/3 characters), + 1 MiB.
MAX_BODY_BYTES = _env("WGATTN_MAX_BODY_BYTES", math.ceil(MAX_ELEMENTS * 16 / 3) + (1 << 20))
MAX_JSON_VALUES = _env("WGATTN_MAX_JSON_VALUES", 10_000)
RUN_QUEUE = _env("WGATTN_RUN_QUEUE", 64)
RUN_TIMEOUT_S = _env("WGATTN_RUN_TIMEOUT_S", 120.0, float, minimum=0.001)
RETRY_AFTER_S = 1
# Admitted runs wait on worker threads; the thread pool gets room for all of them on top of its
# default 40, so that a full queue never starves the page, the static files or /api/kernels.
THREADS = 40 + RUN_QUEUE
