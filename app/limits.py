"""How much of the server one client can take: the numbers, set from the environment at start-up.

- WGATTN_MAX_BODY_BYTES: a request body over this is refused with 413 before it is parsed:
  at once when its Content-Length says so, else (chunked) as soon as the bytes received pass it
  (`BodyLimit`; FastAPI's own `max_body_size` answers a declared one in plain text). The
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

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from wgattn.cases import MAX_ELEMENTS

__all__ = ["MAX_BODY_BYTES", "MAX_JSON_VALUES", "RUN_QUEUE", "RUN_TIMEOUT_S", "RETRY_AFTER_S", "THREADS", "BodyLimit"]


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


class BodyLimit:
    """ASGI middleware: 413 with a JSON detail for a body over `max_bytes` (default
    MAX_BODY_BYTES, read at each request), before the route reads or parses any of it."""

    def __init__(self, app, max_bytes=None):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = MAX_BODY_BYTES if self.max_bytes is None else self.max_bytes
        detail = f"Content Too Large: the body is over the server's limit of {limit} bytes"
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # raised into the route's body read: a JSON 413
                    raise HTTPException(status_code=413, detail=detail)
            return message

        await self.app(scope, limited_receive, send)
