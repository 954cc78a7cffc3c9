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
- WGATTN_RUN_TIMEOUT_S: a request that waits longer for its kernel's compile, or whose run (not
  its wait in the run queue) takes longer, gets 504; the compile goes on and is kept, the run is
  stopped at its next dispatch boundary, the runtime and its compiled pipelines stay.
- WGATTN_COMPILE_WORKERS: pipeline compiles at once, each on a thread and device of its own,
  beside the one run thread (on a software adapter each takes a CPU core while it compiles).
- WGATTN_COMPILES_PER_CLIENT, WGATTN_COMPILE_QUEUE: compiles one client (one address) may have
  queued, and all clients together; the next is refused with 503 and Retry-After.
- WGATTN_WARMUP: 1 (default) compiles the pipelines of the page's default configurations and of
  the conformance grids in the background at start-up; 0 leaves a quiet server (the tests).

Connections (app/connections.py applies these to uvicorn's HTTP protocol):
- WGATTN_MAX_CONNECTIONS: connections held open at once (fewer where the process's file-descriptor
  limit is low: `connections.cap_for`). A new connection over it closes the one idle longest (no
  request in progress: nothing sent yet, half a request head, or kept alive after a response);
  when every connection has a request in progress, the new one gets 503 + Retry-After and is
  closed.
- WGATTN_HEAD_TIMEOUT_S: a connection must deliver a whole request head this soon after it
  opens (or after its previous response); else 408 (when it sent part of one) and closed.
  uvicorn's keep-alive timeout (5 s) closes a silent kept-alive connection sooner.
- WGATTN_BODY_TIMEOUT_S: a request's whole body must arrive this soon after its head; else 408
  and the connection is closed (`BodyLimit`), also for a body shorter than its Content-Length.
- WGATTN_SHUTDOWN_S: on SIGTERM, in-flight requests get this long (uvicorn's graceful shutdown
  timeout), then are cancelled; a native run still on the device gets as long again to stop
  between dispatches before the process exits without it.
- WGATTN_ALLOWED_HOSTS: comma-separated Host names served (Starlette's TrustedHostMiddleware:
  `*.example.com` patterns, `*` for any); default the loopback names, so that a page on another
  site cannot drive the API through DNS rebinding. Add the name clients use when deploying.
"""

import math
import os

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from wgattn.cases import MAX_ELEMENTS

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_JSON_VALUES",
    "RUN_QUEUE",
    "RUN_TIMEOUT_S",
    "COMPILE_WORKERS",
    "COMPILES_PER_CLIENT",
    "COMPILE_QUEUE",
    "WARMUP",
    "RETRY_AFTER_S",
    "MAX_CONNECTIONS",
    "FD_RESERVE",
    "HEAD_TIMEOUT_S",
    "BODY_TIMEOUT_S",
    "SHUTDOWN_S",
    "ALLOWED_HOSTS",
    "BodyLimit",
]


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
COMPILE_WORKERS = _env("WGATTN_COMPILE_WORKERS", 1)
COMPILES_PER_CLIENT = _env("WGATTN_COMPILES_PER_CLIENT", 4)
COMPILE_QUEUE = _env("WGATTN_COMPILE_QUEUE", 32)
WARMUP = bool(_env("WGATTN_WARMUP", 1, minimum=0))
RETRY_AFTER_S = 1
MAX_CONNECTIONS = _env("WGATTN_MAX_CONNECTIONS", 1000)
FD_RESERVE = 64  # descriptors kept for files served, the driver, logs (app/connections.py)
HEAD_TIMEOUT_S = _env("WGATTN_HEAD_TIMEOUT_S", 10.0, float, minimum=0.01)
BODY_TIMEOUT_S = _env("WGATTN_BODY_TIMEOUT_S", 30.0, float, minimum=0.01)
SHUTDOWN_S = _env("WGATTN_SHUTDOWN_S", 10.0, float, minimum=0.01)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("WGATTN_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]


class BodyLimit:
    """ASGI middleware: 413 with a JSON detail for a body over `max_bytes` (default
    MAX_BODY_BYTES, read at each request), before the route reads or parses any of it; 408 when
    the body has not all arrived BODY_TIMEOUT_S after the head (a client that sends less than
    its Content-Length, or trickles it, no longer holds a request open for ever)."""

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
        deadline = anyio.current_time() + BODY_TIMEOUT_S
        complete = False

        async def limited_receive():
            nonlocal received, complete
            if complete:  # later calls wait for the client to leave: no deadline on that
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()) as waited:
                message = await receive()
            if waited.cancelled_caught:  # raised into the route's body read: a JSON 408
                raise HTTPException(
                    status_code=408,
                    detail=f"Request Timeout: the body did not arrive within {BODY_TIMEOUT_S:g} s of the request head",
                    headers={"Connection": "close"},
                )
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if received > limit:  # raised into the route's body read: a JSON 413
                    raise HTTPException(status_code=413, detail=detail)
            return message

        await self.app(scope, limited_receive, send)
