"""What the server does with connections, before a request reaches the app: bounded in number
and in time, and bounded in what they make the server log.

uvicorn closes a kept-alive connection after `timeout_keep_alive` (5 s) and bounds a request
head's size (`h11_max_incomplete_event_size`, 16 KiB), but it has no deadline for a request head
(a socket that sends nothing, or a byte a second, stays open for ever) and no cap on open
connections: `limit_concurrency` counts idle sockets too, so a client holding that many idle
connections would make every real request a 503, and its 503 has no Retry-After. So:

- `BoundedH11Protocol`, uvicorn's h11 protocol (the one it uses here: httptools is not installed)
  with a deadline for each request head (`limits.HEAD_TIMEOUT_S`: 408 and closed) and a cap on
  open connections (`limits.MAX_CONNECTIONS`): over it, the connection idle longest is closed to
  make room, as nginx reclaims idle keep-alive connections; only when every connection has a
  request in progress is the new one refused with a JSON 503 and Retry-After. uvicorn's listen
  backlog (how many sockets asyncio accepts per event-loop turn) becomes an eighth of the cap,
  so that a burst of newcomers cannot close a connection whose request is about to be read.
  The answers it writes itself (400 for a malformed request, 408, 503) carry the security
  headers and a JSON `detail`, like the app's.
- `RateLimitedLog`, a logging filter: a message repeated within `LOG_WINDOW_S` is logged once,
  then once more with the count of those left out. Out of file descriptors, asyncio's accept
  loop logs "Too many open files" with a traceback up to 2,048 times per event-loop turn; this
  keeps that (and uvicorn's "Invalid HTTP request" under a flood of garbage) to a few lines.
- `adopt_server`, called as the app starts (app/server.py), applies the above to the uvicorn
  running it, plus a bounded graceful shutdown (`timeout_graceful_shutdown` = `limits.SHUTDOWN_S`
  unless given). The protocol and the shutdown timeout are uvicorn settings, which an app cannot
  choose through any API: this way the documented `uvicorn app:main` and `make demo` get them
  without flags or a wrapper script, and a flag given on the command line
  (--timeout-graceful-shutdown, --limit-concurrency, --timeout-keep-alive) still holds. uvicorn
  creates its listening server, and a protocol per connection, from its Config after the app's
  lifespan has started; the Config is reached through the lifespan's `receive`, a method of
  uvicorn's LifespanOn, which holds it (tests/test_reliability_server.py fails if that changes).
"""

from __future__ import annotations

import functools
import json
import logging
import resource
import time
from collections import OrderedDict
from http import HTTPStatus
from typing import Optional

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from . import limits, security
from .errors import clip

__all__ = [
    "BoundedH11Protocol",
    "RateLimitedLog",
    "adopt_server",
    "apply",
    "bound_logging",
    "cap_for",
    "bounds_for",
    "connection_cap",
    "process_bounds",
    "open_connections",
]

log = logging.getLogger("wgattn.app")

LOG_WINDOW_S = 10.0
MAX_LOGGED_TRACE = 20_000  # characters of one logged traceback
_APP_LOGGERS = ("wgattn.app", "wgattn.access")
# A logger's filters see only its own records (not its children's): name each one.
_FLOOD_LOGGERS = ("asyncio", "uvicorn.error", "wgattn.app")


MIN_BACKLOG = 64  # below, the kernel drops the SYNs of a modest burst (clients retry after 1 s)


def _batch(cap: int, floor: int) -> int:
    return max(floor, cap // 8)


# Descriptors open beyond the counted connections, in accept batches. asyncio accepts a batch in
# one turn, makes its transports the next and calls connection_made (where a connection is
# counted and the idle longest closed) the turn after; a closed socket's descriptor is released
# one turn later still. So while a client keeps the listen queue full, the counted connections
# sit beside the victims of one batch, a batch with transports and a batch being accepted: three
# batches. One more is kept spare. (Two were allowed once, and a fast client overran a limit.)
_BATCHES_IN_FLIGHT = 4


def bounds_for(fd_limit: Optional[int]) -> "tuple[int, int]":
    """(connection cap, accept batch) under a file-descriptor limit (None: unlimited).

    The accept batch is uvicorn's listen backlog, which is also how many sockets asyncio
    accepts per event-loop turn: an eighth of the cap, so that one turn's newcomers cannot
    close, to make room, a connection whose request head has arrived but is not read yet (its
    read comes a turn or two later), and at least MIN_BACKLOG (uvicorn's default is 2,048).
    The cap is limits.MAX_CONNECTIONS, or fewer so that the connections and
    `_BATCHES_IN_FLIGHT` batches fit with `limits.FD_RESERVE` to spare; under a limit too low
    for that, the batch shrinks below MIN_BACKLOG too."""
    cap = limits.MAX_CONNECTIONS
    if fd_limit is None:
        return cap, _batch(cap, MIN_BACKLOG)
    room = fd_limit - limits.FD_RESERVE
    floor = max(1, min(MIN_BACKLOG, room // (3 * _BATCHES_IN_FLIGHT)))
    cap = max(1, min(cap, room))
    while cap > 1 and cap + _BATCHES_IN_FLIGHT * _batch(cap, floor) > room:
        cap -= 1
    return cap, _batch(cap, floor)


def cap_for(fd_limit: int) -> int:
    """The connection cap under a file-descriptor limit (`bounds_for`)."""
    return bounds_for(fd_limit)[0]


@functools.lru_cache(maxsize=1)  # read once: every new connection asks
def process_bounds() -> "tuple[int, int]":
    """`bounds_for` this process's file-descriptor limit."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return bounds_for(None if soft == resource.RLIM_INFINITY else soft)


def connection_cap() -> int:
    return process_bounds()[0]


_server_state: list = []  # uvicorn's ServerState, once a BoundedH11Protocol has seen a connection


def open_connections() -> Optional[dict]:
    """Open and idle connections and their cap, or None where uvicorn's protocol is not ours."""
    if not _server_state:
        return None
    state = _server_state[0]
    return {"open": len(state.connections), "idle": len(getattr(state, "wgattn_idle", ())), "max": connection_cap()}


@functools.lru_cache(maxsize=32)  # a flood closes thousands of connections with the same few answers
def _answer(status: int, detail: str, retry_after: Optional[int] = None) -> bytes:
    """A whole HTTP/1.1 response that closes the connection: JSON detail and security headers."""
    body = json.dumps({"detail": detail}).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "connection": "close",
        **{k.lower(): v for k, v in security.headers_for("").items()},
    }
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head and a cap on connections.

    A connection is idle while no request of it is in progress: from when it opens, or its last
    response ends, until a whole request head has arrived. Idle connections are kept oldest
    first (`_idle_set`, shared by the server's connections) so that the cap evicts in O(1)."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = None
        self._partial = False  # bytes of a request head received (answer 408, not just close)
        if len(self.connections) > connection_cap() and not self._evict_one():
            log.warning("connection refused: all %d connections have a request in progress", len(self.connections) - 1)
            self._close(503, "the server is at its connection limit with every connection busy; retry shortly")
            return
        self._become_idle()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle and self.cycle is not None:  # a request head arrived
            self._stop_idle()
        elif self._deadline is not None and data:
            self._partial = True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._become_idle()

    def connection_lost(self, exc) -> None:
        self._stop_idle()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer to a malformed request, with the app's headers and JSON body.
        self._stop_idle()
        self.transport.write(_answer(400, msg))
        self.transport.close()

    def _idle_set(self) -> "OrderedDict[BoundedH11Protocol, None]":
        state = self.server_state
        if not hasattr(state, "wgattn_idle"):
            state.wgattn_idle = OrderedDict()  # type: ignore[attr-defined]
            _server_state[:] = [state]
        return state.wgattn_idle  # type: ignore[attr-defined]

    def _become_idle(self) -> None:
        self._stop_idle()
        self._partial = False
        self._idle_set()[self] = None
        self._deadline = self.loop.call_later(limits.HEAD_TIMEOUT_S, self._head_timeout)

    def _stop_idle(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None
        self._idle_set().pop(self, None)

    def _evict_one(self) -> bool:
        """Close the connection idle longest to make room; False when none is idle."""
        idle = self._idle_set()
        if not idle:
            return False
        oldest, _ = idle.popitem(last=False)
        oldest._close(503, "the server is at its connection limit and closed this idle connection; retry")
        return True

    def _head_timeout(self) -> None:
        self._deadline = None
        self._close(408, f"Request Timeout: no complete request head within {limits.HEAD_TIMEOUT_S:g} s")

    def _close(self, status: int, detail: str) -> None:
        """Close the connection; a client that has sent part of a request (or none yet, for a
        refusal) is told why first."""
        self._stop_idle()
        if self.transport.is_closing():
            return
        if status != 408 or self._partial:
            self.transport.write(_answer(status, detail, limits.RETRY_AFTER_S if status == 503 else None))
        try:
            self.conn.send(h11.ConnectionClosed())
        except h11.LocalProtocolError:
            pass
        self.transport.close()


class RateLimitedLog(logging.Filter):
    """Lets a message (by its logger and format) through once per `window` seconds; the next
    one let through says how many were left out in between. A traceback it lets through is cut
    to MAX_LOGGED_TRACE characters, both ends kept (an exception's text may hold a whole input)."""

    def __init__(self, window: float = LOG_WINDOW_S):
        super().__init__()
        self.window = window
        self._seen: "OrderedDict[tuple, list]" = OrderedDict()  # key -> [last logged at, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.msg} ({seen[1]} more like it in the last {now - seen[0]:.0f} s were not logged)"
        if record.exc_info and not record.exc_text:  # a traceback may quote a request's 50 MB
            record.exc_text = clip(logging.Formatter().formatException(record.exc_info), MAX_LOGGED_TRACE)
        self._seen[key] = [now, 0]
        self._seen.move_to_end(key)
        while len(self._seen) > 1000:  # a bounded memory of message kinds
            self._seen.popitem(last=False)
        return True


_FILTER = RateLimitedLog()


def bound_logging() -> None:
    """Rate-limit repeated messages of the loggers a flood of connections reaches."""
    for name in _FLOOD_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def apply(config: Config) -> None:
    """Give a uvicorn Config (before it creates its server) the bounded protocol, backlog and
    shutdown; settings given on uvicorn's command line are kept (a --backlog only if smaller)."""
    if getattr(config, "wgattn_applied", False):
        return
    config.wgattn_applied = True
    base = config.http_protocol_class
    if base is H11Protocol:
        config.http_protocol_class = BoundedH11Protocol
    elif not (isinstance(base, type) and issubclass(base, BoundedH11Protocol)):
        log.warning(
            "uvicorn runs with --http %s: connection deadlines and the connection cap of app/connections.py apply "
            "to its h11 protocol only",
            getattr(base, "__name__", base),
        )
    if config.timeout_graceful_shutdown is None:
        config.timeout_graceful_shutdown = limits.SHUTDOWN_S
    for name in _APP_LOGGERS:  # printed as uvicorn prints its own (its log config, its streams)
        ours = logging.getLogger(name)
        if not ours.handlers and logging.getLogger("uvicorn").handlers:
            for handler in logging.getLogger("uvicorn").handlers:
                ours.addHandler(handler)
            ours.setLevel(logging.INFO)
            ours.propagate = False
    cap, batch = process_bounds()
    config.backlog = min(config.backlog, batch)
    if cap < limits.MAX_CONNECTIONS:
        log.warning("at most %d connections (WGATTN_MAX_CONNECTIONS %d): the file-descriptor limit", cap, limits.MAX_CONNECTIONS)


def adopt_server(receive) -> None:
    """At the app's start (its lifespan's `receive`): `apply` to the uvicorn running it, and
    rate-limit flood logging. uvicorn's lifespan `receive` is a method of its LifespanOn, which
    holds the Config; any other server leaves connections to itself."""
    bound_logging()
    owner = getattr(receive, "__self__", None)
    config = getattr(owner, "config", None)
    if isinstance(config, Config):
        apply(config)
    elif "uvicorn" in type(owner).__module__:
        log.warning("uvicorn's lifespan no longer holds its Config: the connection bounds of app/connections.py are off")
