"""Every error the API sends, in one place: the JSON body's schema (declared in the OpenAPI
document for every status the API can answer with) and the exception handlers that produce it.

An error body is `{"detail": str}`, or for a body that fails validation `{"detail": [{loc, msg,
type}, ...]}`. Bodies never echo the client's input back whole (a NaN or a 50 MB array in the
input must not become a 500 or a 50 MB answer): validation items carry no `input`, and every
text that may quote the client (a detail naming an unknown field, a 20 MB mask string, a path
into the body) is cut to `MAX_ECHO` characters by `clip`, keeping both ends. Bodies never carry
a stack trace or a file path: an unexpected exception is logged here and answered with a plain
500. A client that leaves before its answer gets none; AbandonedLog logs it.
"""

import logging
from typing import List, Union

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from wgattn.errors import AdapterError

from . import limits, native_service, security

__all__ = ["ErrorBody", "RESPONSES", "MAX_ECHO", "clip", "install"]

log = logging.getLogger("wgattn.app")

MAX_ECHO = 1000  # characters of any one text of an error body
LOC_ECHO = 64  # characters of one step of a validation item's path (a key the client chose)


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """`text`, or its first and last parts around a note of how much was cut (the end of a
    message often says what is allowed)."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    note = f" ... [{len(text) - limit} characters cut] ... "
    return text[: limit - tail - len(note)] + note + text[-tail:]


class ValidationErrorItem(BaseModel):
    loc: List[Union[str, int]] = Field(description="where: 'body', then the path into it")
    msg: str
    type: str


class ErrorBody(BaseModel):
    """What every 4xx and 5xx of the API carries."""

    detail: Union[str, List[ValidationErrorItem]] = Field(
        description="what is wrong, in words; a list of items when the body failed validation"
    )


def _doc(description: str) -> dict:
    return {"model": ErrorBody, "description": description}


# Declared on the API router: every operation documents every error it can answer with.
RESPONSES = {
    400: _doc("the body could not be read"),
    404: _doc("unknown kernel or path"),
    408: _doc(f"the body did not all arrive within {limits.BODY_TIMEOUT_S:g} s of the request head"),
    413: _doc(f"the body is over the limit ({limits.MAX_BODY_BYTES} bytes), refused before parsing"),
    415: _doc("the body is not application/json"),
    422: _doc("the body is not valid JSON, or fails validation (a list of items) or the kernel's checks"),
    503: _doc(
        "no usable native adapter, the run or compile queue is full, the device failed, or the server is shutting down "
        "(Retry-After says when to retry)"
    ),
    504: _doc(
        f"the kernel's compile or the run took longer than the per-request limit ({limits.RUN_TIMEOUT_S:g} s); "
        "a compile goes on and is kept"
    ),
}


def _items(exc: RequestValidationError) -> list:
    items = []
    for e in exc.errors():
        msg = str(e.get("msg", ""))
        error = (e.get("ctx") or {}).get("error")
        if e.get("type") == "json_invalid" and error:
            msg = f"{msg}: {error}"
        items.append(
            {
                "loc": [x if isinstance(x, int) else clip(str(x), LOC_ECHO) for x in e.get("loc", ())],
                "msg": clip(msg),
                "type": str(e.get("type", "")),
            }
        )
    return items


def _retry(status: int, detail: str, retry_after: int) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers={"Retry-After": str(retry_after)})


def install(app: FastAPI) -> None:
    """Register the handlers on `app`."""

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": _items(exc)}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        # A 503 from a route ("no adapter") also says when to ask again.
        if exc.status_code == 503 and not (exc.headers or {}).get("Retry-After"):
            exc.headers = {**(exc.headers or {}), "Retry-After": str(native_service.ADAPTER_RETRY_S)}
        if isinstance(exc.detail, str):
            exc.detail = clip(exc.detail)
        return await http_exception_handler(request, exc)

    @app.exception_handler(ClientDisconnect)
    async def left_while_sending(request: Request, exc: ClientDisconnect):
        request.state.abandoned = "it left while sending its body"
        request.app.state.native.note_abandoned("sending")
        return Response(status_code=499)  # to nobody: uvicorn drops it; AbandonedLog logs the request

    @app.exception_handler(native_service.Abandoned)
    async def left_while_waiting(request: Request, exc: native_service.Abandoned):
        request.state.abandoned = str(exc)
        request.app.state.native.note_abandoned(exc.stage)
        return Response(status_code=499)

    @app.exception_handler(native_service.Busy)
    async def busy(request: Request, exc: native_service.Busy):
        return _retry(503, str(exc), limits.RETRY_AFTER_S)

    @app.exception_handler(native_service.DeviceFault)
    async def device_fault(request: Request, exc: native_service.DeviceFault):
        return _retry(503, str(exc), limits.RETRY_AFTER_S)

    @app.exception_handler(native_service.RunTimeout)
    async def run_timeout(request: Request, exc: native_service.RunTimeout):
        return JSONResponse({"detail": str(exc)}, status_code=504)

    @app.exception_handler(AdapterError)
    async def no_adapter(request: Request, exc: AdapterError):
        return _retry(503, str(exc), native_service.ADAPTER_RETRY_S)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        # Sent by Starlette's outermost middleware, past SecurityHeaders: add them here.
        return JSONResponse(
            {"detail": "internal server error (logged on the server)"},
            status_code=500,
            headers=security.headers_for(request.url.path),
        )
