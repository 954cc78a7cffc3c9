"""API request bodies are JSON as RFC 8259 defines it, in bounded amounts, or a clear 4xx.

`JSONBodyRoute` is the API router's route class (FastAPI's documented way to customise how a
route reads its request). Compared with FastAPI's own reading it:
- refuses a body that is not `application/json` (or `+json`) with 415, not a confusing 422;
- refuses a body with more than `limits.MAX_JSON_VALUES` arrays, objects and items with 413,
  counted on the raw bytes before parsing (base64 data has no `,`, `[` or `{`);
- refuses `NaN`, `Infinity` and `-Infinity` (Python's json accepts them, JSON has none), nesting
  deeper than the parser's recursion and integers past Python's digit limit as invalid JSON
  (422, type json_invalid, saying which), where they used to become 500 or an unexplained 400.
"""

import email.message
import json

from fastapi import HTTPException, Request
from fastapi.routing import APIRoute

from . import limits

__all__ = ["JSONBodyRoute", "parse"]


class _NotJSON(ValueError):
    pass


def _constant(name: str):
    raise _NotJSON(f"{name} is not a JSON value (JSON has no NaN or Infinity)")


def parse(body: bytes):
    """The JSON value of `body`; json.JSONDecodeError says why there is none (FastAPI answers
    it with 422), HTTPException 413 when it holds too many values to be worth parsing."""
    values = body.count(b",") + body.count(b"[") + body.count(b"{")
    if values > limits.MAX_JSON_VALUES:
        raise HTTPException(
            status_code=413,
            detail=f"the body holds over {limits.MAX_JSON_VALUES} JSON values (arrays, objects, items); "
            "send tensors as base64 (wgattn.wire)",
        )
    try:
        return json.loads(body, parse_constant=_constant)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None
    except ValueError as exc:  # NaN/Infinity, a 5000-digit integer, bytes that are not UTF-8
        raise json.JSONDecodeError(str(exc), "", 0) from None


def _is_json(content_type) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


class _JSONBodyRequest(Request):
    async def json(self):
        if not hasattr(self, "_json"):
            self._json = parse(await self.body())
        return self._json


class JSONBodyRoute(APIRoute):
    def get_route_handler(self):
        handler = super().get_route_handler()
        has_body = self.body_field is not None

        async def route_handler(request: Request):
            request = _JSONBodyRequest(request.scope, request.receive)
            if has_body and await request.body() and not _is_json(request.headers.get("content-type")):
                raise HTTPException(status_code=415, detail="the body must be JSON sent with content-type application/json")
            return await handler(request)

        return route_handler
