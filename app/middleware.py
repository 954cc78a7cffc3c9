"""Request-level middleware the routes do not see: HEAD on every GET route, a log line for each
request whose client left before its answer, and a JSON 503 for a request cancelled by shutdown."""

import asyncio
import logging
import time

from starlette.responses import JSONResponse

from . import limits

__all__ = ["HeadAsGet", "AbandonedLog", "ShutdownAnswer"]

# Given uvicorn's handlers when the app starts under uvicorn (connections.apply).
access = logging.getLogger("wgattn.access")


class HeadAsGet:
    """HEAD is GET without the body (RFC 9110, 9.3.2), on every route: FastAPI's routes answer
    only the methods they declare (Starlette's own Route adds HEAD to GET, FastAPI's APIRoute
    does not). The app sees a GET; uvicorn sends the headers without the body, since the
    request it parsed is a HEAD. A HEAD on a POST-only path is still a 405."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "HEAD":
            scope = dict(scope, method="GET")
        await self.app(scope, receive, send)


class AbandonedLog:
    """One line per request whose client left before the response started: uvicorn logs a
    request when its response starts and drops a response to a client that has gone, so such a
    request (a stall's likeliest trace) left none. The line reads like an access line with
    status 499 (nginx's "client closed request"), the seconds from the request head to when the
    app saw the client gone (it looks while a request waits: every 50 ms while a run is queued),
    and what became of its run (the route's `request.state.abandoned`)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.monotonic()
        left = None
        started = False

        async def watched_receive():
            nonlocal left
            message = await receive()
            if message["type"] == "http.disconnect" and not started and left is None:
                left = time.monotonic()
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            if left is not None:
                client = scope.get("client") or ("-", 0)
                what = (scope.get("state") or {}).get("abandoned")
                access.info(
                    '%s:%s - "%s %s HTTP/%s" 499 client gone, seen %.3f s after the request%s',
                    client[0],
                    client[1],
                    scope["method"],
                    scope["path"],
                    scope.get("http_version", "1.1"),
                    left - t0,
                    f"; {what}" if what else "",
                )


class ShutdownAnswer:
    """A request that uvicorn cancels because its graceful shutdown ran out of time
    (`limits.SHUTDOWN_S`) gets a JSON 503 with Retry-After saying so, instead of uvicorn's
    plain-text 500 and a traceback in the log; what it waited for is cancelled with it (a native
    run: native_service)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except asyncio.CancelledError:
            if started:
                raise
            uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python >= 3.11
            if uncancel is not None:
                uncancel()  # the cancellation is answered here; the task ends normally
            answer = JSONResponse(
                {"detail": "the server is shutting down and cancelled this request; retry (another instance may answer)"},
                status_code=503,
                headers={"Retry-After": str(limits.RETRY_AFTER_S), "Connection": "close"},
            )
            await answer(scope, receive, send)
