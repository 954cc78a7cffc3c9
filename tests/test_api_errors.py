"""The API under bad input, one test per class of it (docs/reliability.md has the table): each
gets a clear 4xx with a JSON `detail`, no stack trace or file path, and the next valid request
works. Also: the error statuses are declared in the OpenAPI document, the security headers are
on every response, and no endpoint takes WGSL from a client."""

import base64
import json
import sys

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import create_app, errors, limits, main, security
from app.paths import ROOT
from helpers import LOCAL
from wgattn import tolerance, wire
from wgattn.interfaces.sdpa_arena import SdpaCase

client = TestClient(main, base_url=LOCAL)
SMALL = {"batch": 1, "heads": 2, "seq_q": 7, "seq_k": 11, "head_dim": 6, "mask": "causal", "seed": 2}
JSON = {"content-type": "application/json"}
HUGE = 20_000_000  # characters: under the body limit, far over anything an error may echo


def tensors(config=SMALL, **replace):
    case = SdpaCase(**config)
    sent = {k: wire.encode(v) for k, v in case.inputs().items() if v is not None}
    sent.update(replace)
    return sent


def check_error(r, status: int, *expected: str):
    """`r` is `status` with a JSON detail holding every `expected` text, and nothing internal."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"detail"}
    text = json.dumps(body["detail"])
    for e in expected:
        assert e in text, (e, text[:300])
    for leak in ("Traceback", 'File "', str(ROOT), "site-packages", '.py"'):
        assert leak not in r.text
    assert len(r.content) < 4096, "an error body must not echo a large input"
    return body["detail"]


def check_next_run_works():
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 200, r.text
    case = SdpaCase(**SMALL)
    inputs = case.inputs()
    ref = case.reference(inputs)["out"]
    naive = tolerance.max_abs_err(case.reference(inputs, dtype=np.float32)["out"], ref)
    got = wire.decode(r.json()["outputs"]["out"])
    assert tolerance.max_abs_err(got, ref) <= tolerance.allowance(naive, ref)


def _raw(body: bytes, headers=JSON):
    return client.post("/api/run", content=body, headers=headers)


def _inputs(**replace):
    return client.post("/api/run", json={"config": SMALL, "inputs": tensors(**replace)})


# (class, request, status, texts the detail must hold). The request is a thunk so that each
# runs inside its own test, and a failure names its class.
BAD_INPUTS = {
    "shape: q of the wrong size": (
        lambda: _inputs(q=wire.encode(np.zeros((1, 2, 7, 5), np.float32))),
        422,
        ["input 'q' must be float32 of shape [1, 2, 7, 6]"],
    ),
    "shape: q of the wrong rank": (
        lambda: _inputs(q=wire.encode(np.zeros((2, 7, 6), np.float32))),
        422,
        ["List should have at least 4 items", '"q", "shape"]'],
    ),
    "shape: negative extent": (
        lambda: _inputs(q={"dtype": "float32", "shape": [1, -2, 7, 6], "data": ""}),
        422,
        ["Input should be greater than or equal to 0", '"shape", 1]'],
    ),
    "shape: not a list of integers": (lambda: _inputs(q={"dtype": "float32", "shape": "1x2", "data": ""}), 422, ["shape"]),
    "GQA ratio: k with other heads than q": (
        lambda: _inputs(k=wire.encode(np.zeros((1, 1, 11, 6), np.float32))),
        422,
        ["input 'k' must be float32 of shape [1, 2, 11, 6]"],
    ),
    "dtype: int32 where float32 is due": (
        lambda: _inputs(v=wire.encode(np.zeros((1, 2, 11, 6), np.int32))),
        422,
        ["Input should be 'float32'", '"v", "dtype"]'],
    ),
    "dtype: not a wire dtype": (
        lambda: _inputs(q={"dtype": "float64", "shape": [1, 1, 1, 1], "data": "AAAAAAAAAAA="}),
        422,
        ["Input should be 'float32'"],
    ),
    "base64 that is not base64": (
        lambda: _inputs(q={"dtype": "float32", "shape": [1, 2, 7, 6], "data": "not base64!"}),
        422,
        ["String should match pattern"],
    ),
    "data length not matching the shape": (
        lambda: _inputs(q={"dtype": "float32", "shape": [1, 2, 7, 6], "data": base64.b64encode(bytes(4 * 83)).decode()}),
        422,
        ["needs 336 bytes, got 332"],
    ),
    "NaN literal in the config": (lambda: _raw(b'{"config": {"batch": NaN}}'), 422, ["NaN is not a JSON value"]),
    "Infinity literal in the config": (lambda: _raw(b'{"config": {"window": Infinity}}'), 422, ["Infinity is not a JSON value"]),
    "-Infinity literal": (lambda: _raw(b'{"config": {"seed": -Infinity}}'), 422, ["-Infinity is not a JSON value"]),
    "number out of float range (1e400)": (
        lambda: _raw(b'{"config": {"batch": 1e400}}'),
        422,
        ["batch must be an integer", "got inf"],
    ),
    "integer of 5000 digits": (lambda: _raw(b'{"config": {"seed": 1' + b"0" * 5000 + b"}}"), 422, ["JSON decode error"]),
    "NaN in tensor data": (
        lambda: _inputs(q=wire.encode(np.full((1, 2, 7, 6), np.nan, np.float32))),
        422,
        ["input 'q' has non-finite values"],
    ),
    "Inf in tensor data": (
        lambda: _inputs(k=wire.encode(np.full((1, 2, 11, 6), np.inf, np.float32))),
        422,
        ["input 'k' has non-finite values"],
    ),
    "negative size": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, heads=-3)}),
        422,
        ["heads must be an integer in 1..65536"],
    ),
    "zero size": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, seq_k=0)}),
        422,
        ["seq_k must be an integer in 1..65536"],
    ),
    "fractional size": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, batch=1.5)}),
        422,
        ["batch must be an integer", "got 1.5"],
    ),
    "window below 0 (sdpa_arena's windows are i-w..i, w >= 0)": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, mask="window", window=-2)}),
        422,
        ["window must be an integer in 0..2147483647", "got -2"],
    ),
    "head_dim over the limit": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, seq_q=1, seq_k=1, head_dim=65537)}),
        422,
        ["head_dim must be an integer in 1..65536"],
    ),
    "case over the element limit": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, seq_q=8192, seq_k=8192, head_dim=128)}),
        422,
        ["case too large"],
    ),
    "seed out of range": (lambda: client.post("/api/run", json={"config": dict(SMALL, seed=2**32)}), 422, ["seed must be"]),
    "unknown mask kind": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, mask="diagonal")}),
        422,
        ["mask must be one of"],
    ),
    "padding mask for a causal case": (
        lambda: _inputs(mask=wire.encode(np.ones((1, 1, 1, 11), bool))),
        422,
        ["unknown inputs ['mask']"],
    ),
    "unknown input name": (lambda: _inputs(bias=tensors()["q"]), 422, ["unknown inputs ['bias']"]),
    "unknown field": (lambda: client.post("/api/run", json={"config": SMALL, "wgsl": "fn main() {}"}), 422, ["extra_forbidden"]),
    "unknown kernel": (
        lambda: client.post("/api/run", json={"kernel": "sdpa_arena.nope", "config": SMALL}),
        422,
        ["kernel must be a registered kernel id, one of ['sdpa_arena.seed'"],
    ),
    "kernel id of a megabyte": (
        lambda: client.post("/api/run", json={"kernel": "k" * (1 << 20)}),
        422,
        ["kernel must be a registered kernel id"],
    ),
    "a mask string of 20 MB (echoed cut short)": (
        lambda: client.post("/api/run", json={"config": dict(SMALL, mask="m" * HUGE)}),
        422,
        ["mask must be one of", "characters cut"],
    ),
    "a config field name of 20 MB": (
        lambda: client.post("/api/run", json={"config": {"b" * HUGE: 1}}),
        422,
        ["unknown config field(s) ['bbb", "characters cut"],
    ),
    "an input name of 20 MB": (
        lambda: client.post("/api/run", json={"config": SMALL, "inputs": {"q" * HUGE: tensors()["q"]}}),
        422,
        ["unknown inputs ['qqq", "characters cut"],
    ),
    "a shape whose size overflows 64 bits": (
        lambda: _inputs(q={"dtype": "float32", "shape": [2**40] * 4, "data": ""}),
        422,
        ["less than or equal to 4194304", "shape"],
    ),
    "a zero-size shape with an extent past the element bound (found by schemathesis)": (
        lambda: _inputs(q={"dtype": "float32", "shape": [3037000500, 3037000500, 0, 1], "data": ""}),
        422,
        ["less than or equal to 4194304", "shape"],
    ),
    "a shape of more than 8 dimensions": (
        lambda: _inputs(q={"dtype": "float32", "shape": [1] * 9, "data": ""}),
        422,
        ["List should have at most 4 items"],
    ),
    "not JSON": (lambda: _raw(b"{not json"), 422, ["JSON decode error"]),
    "bytes that are not UTF-8": (lambda: _raw(b'{"kernel": "\xff"}'), 422, ["JSON decode error"]),
    "JSON that is not an object": (lambda: _raw(b"[1, 2]"), 422, ["valid dictionary"]),
    "empty body": (lambda: _raw(b""), 422, ["Field required"]),
    "deeply nested JSON (under the value limit)": (
        lambda: _raw(b'{"config": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        422,
        ["nested too deeply"],
    ),
    "deeply nested JSON (over the value limit)": (lambda: _raw(b"[" * 200_000 + b"]" * 200_000), 413, ["JSON values"]),
    "millions of tiny values under the byte limit": (
        lambda: _raw(b'{"config": {"batch": [' + b"1," * 2_000_000 + b"1]}}"),
        413,
        ["JSON values"],
    ),
    "wrong content type (text/plain)": (
        lambda: _raw(json.dumps({"config": SMALL}).encode(), {"content-type": "text/plain"}),
        415,
        ["application/json"],
    ),
    "no content type": (
        lambda: client.post("/api/run", content=json.dumps({"config": SMALL}).encode()),
        415,
        ["application/json"],
    ),
    "form body": (lambda: client.post("/api/run", data={"kernel": "x"}), 415, ["application/json"]),
    "body over the size limit, declared (Content-Length)": (
        lambda: _raw(b" " * (limits.MAX_BODY_BYTES + 1)),
        413,
        ["Content Too Large"],
    ),
    "wrong method": (lambda: client.delete("/api/run"), 405, ["Method Not Allowed"]),
    "path outside the served folders": (lambda: client.get("/static/../app/api.py"), 404, ["Not Found"]),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_a_clear_4xx_and_the_next_request_works(name, native_runtime):
    request, status, expected = BAD_INPUTS[name]
    check_error(request(), status, *expected)
    check_next_run_works()


def test_a_chunked_body_over_the_limit_is_refused_before_parsing(monkeypatch):
    """No Content-Length: the limit counts the bytes as they come; the parser is never called.
    (That reading stops at the limit is checked against uvicorn, test_reliability_server.py:
    TestClient buffers the whole body first.)"""
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 64 << 10)
    parsed = []
    import app.json_body as json_body

    monkeypatch.setattr(json_body, "parse", lambda body: parsed.append(body) or {})

    def chunks():
        for _ in range(64):  # 64 x 16 KiB = 1 MiB offered
            yield b"[" + b"1," * 8191 + b"1]"

    r = TestClient(create_app(), base_url=LOCAL).post("/api/run", content=chunks(), headers=JSON)
    check_error(r, 413, "Content Too Large")
    assert "content-length" not in r.request.headers
    assert not parsed


def test_clip_keeps_both_ends_of_a_long_text():
    text = "unknown config field(s) ['" + "x" * 100_000 + "']; its fields: [batch, heads]"
    clipped = errors.clip(text)
    assert len(clipped) <= errors.MAX_ECHO
    assert clipped.startswith("unknown config field(s) ['xxx") and clipped.endswith("its fields: [batch, heads]")
    assert f"[{len(text) - errors.MAX_ECHO} characters cut]" in clipped
    assert errors.clip("short") == "short"


def test_tensors_are_bounded_in_the_schema():
    """What a client can send is bounded in the OpenAPI document, not only by the server's checks
    (the run request's other parts: tests/test_api_schema.py)."""
    from wgattn.cases import MAX_ELEMENTS

    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    tensors = [s["properties"] for name, s in schemas.items() if name.startswith("Tensor")]
    assert tensors  # one per dtype and rank an input has
    largest = len(base64.b64encode(bytes(4 * MAX_ELEMENTS)))  # a float32 tensor at the element limit
    for tensor in tensors:
        assert tensor["shape"]["maxItems"] <= 8
        assert largest <= tensor["data"]["maxLength"] <= limits.MAX_BODY_BYTES


def test_the_default_body_limit_fits_the_largest_valid_request():
    """q, k, v at the element limit in base64 fit under MAX_BODY_BYTES (the limit refuses no
    request the API could accept)."""
    from wgattn.cases import MAX_ELEMENTS

    biggest = 4 * MAX_ELEMENTS  # float32 bytes of q, k, v and out together: more than q, k, v
    assert len(base64.b64encode(bytes(biggest))) + 4096 < limits.MAX_BODY_BYTES


def test_error_statuses_are_declared_in_the_openapi_document():
    spec = client.get("/openapi.json").json()
    run = spec["paths"]["/api/run"]["post"]["responses"]
    assert {"200", "400", "404", "413", "415", "422", "503", "504"} <= set(run)
    ref = run["422"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ErrorBody")
    detail = spec["components"]["schemas"]["ErrorBody"]["properties"]["detail"]
    assert {"type": "string"} in detail["anyOf"]


@pytest.mark.parametrize(
    "path", ["/", "/selftest", "/static/main.js", "/shaders/manifest.json", "/api/kernels", "/api/nope", "/py/bundle.json"]
)
def test_security_headers_on_every_response(path):
    r = client.get(path)
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["content-security-policy"] == security.PAGE_CSP
    csp = dict(d.strip().split(" ", 1) for d in security.PAGE_CSP.split(";"))
    # Nothing off the machine: every source is 'self', a keyword or data: (the empty favicon).
    for directive, sources in csp.items():
        for source in sources.split():
            assert source.startswith("'") or source == "data:", (directive, source)
    assert "'wasm-unsafe-eval'" in csp["script-src"] and "'unsafe-inline'" not in csp["script-src"]


def test_security_headers_on_errors_and_413():
    for r in (_raw(b"{"), _raw(b" " * (limits.MAX_BODY_BYTES + 1)), client.post("/api/run", json={"kernel": "x"})):
        assert r.status_code >= 400
        assert r.headers["x-content-type-options"] == "nosniff" and "content-security-policy" in r.headers


def test_unexpected_exception_is_a_bare_500(monkeypatch):
    """An exception nobody expected: a JSON 500 with no trace and no path (it goes to the log)."""
    from app import api

    def boom():
        raise RuntimeError(f"secret detail in {ROOT}/py/wgattn/registry.py")

    monkeypatch.setattr(api.live, "catalogue", boom)
    r = TestClient(main, base_url=LOCAL, raise_server_exceptions=False).get("/api/kernels")
    check_error(r, 500, "internal server error")
    assert "secret" not in r.text and r.headers["x-content-type-options"] == "nosniff"


def test_missing_pyodide_is_a_503_without_paths(monkeypatch):
    from app import server

    monkeypatch.setattr(server, "PYODIDE", server.ROOT / ".cache" / "pyodide" / "0.0.0-missing")
    r = TestClient(server.create_app(), base_url=LOCAL).get("/pyodide/pyodide.js")
    check_error(r, 503, "Pyodide 0.0.0-missing is not installed in .cache/pyodide/0.0.0-missing", "make setup")


def test_no_endpoint_takes_wgsl_from_a_client():
    """User-supplied WGSL runs only in the browser: no operation of the API has a parameter or body
    field that could carry shader source, and /api/run refuses one (extra fields are forbidden).
    An endpoint that runs client WGSL natively must be behind an explicit server option and
    must change this test (docs/reliability.md)."""
    spec = client.get("/openapi.json").json()
    suspicious = ("wgsl", "source", "shader", "code", "module")

    def names(schema, seen=()):
        if isinstance(schema, dict):
            if "$ref" in schema:
                ref = schema["$ref"].rsplit("/", 1)[-1]
                if ref not in seen:
                    yield from names(spec["components"]["schemas"][ref], seen + (ref,))
            for key, value in schema.get("properties", {}).items():
                yield key
                yield from names(value, seen)
            for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
                value = schema.get(key)
                for v in value if isinstance(value, list) else [value]:
                    yield from names(v, seen)

    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            fields = [p["name"] for p in op.get("parameters", [])]
            body = op.get("requestBody", {}).get("content", {})
            for media in body.values():
                fields += list(names(media["schema"]))
            bad = [f for f in fields if any(s in f.lower() for s in suspicious)]
            assert not bad, f"{method.upper()} {path} takes {bad}: client WGSL must stay in the browser"
    r = client.post("/api/run", json={"config": SMALL, "source": "@compute fn main() {}"})
    check_error(r, 422, "extra_forbidden")


def test_a_logged_traceback_quoting_a_huge_input_is_cut():
    """An exception whose text holds a whole request (pydantic's errors quote their input) is
    logged with its traceback cut to MAX_LOGGED_TRACE characters, both ends kept: a 20 MB value
    is not written to the log twice per request."""
    import logging

    from app import connections

    try:
        raise ValueError("x" * HUGE)
    except ValueError:
        record = logging.LogRecord(
            "uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application", None, sys.exc_info()
        )
    assert connections.RateLimitedLog().filter(record)
    text = logging.Formatter().format(record)
    assert len(text) <= connections.MAX_LOGGED_TRACE + 200
    assert "Traceback (most recent call last)" in text and "characters cut" in text and text.endswith("x")
