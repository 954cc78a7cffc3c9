"""The JSON API: list kernels, describe the native adapter, run a kernel natively, report health."""

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from wgattn import live, wire

from .connections import open_connections
from .errors import RESPONSES
from .json_body import JSONBodyRoute
from .native_service import POLL_S, Abandoned, Busy, NativeService, client_key
from .schemas import RunRequest, RunResponse

# Every route reads its body through JSONBodyRoute and documents the errors of app/errors.py.
router = APIRouter(prefix="/api", tags=["api"], route_class=JSONBodyRoute, responses=RESPONSES)


@router.get("/kernels")
def kernels():
    """Every registered interface and kernel (from shaders/manifest.json) and, in `configs`, the
    live configuration's fields per interface with their bounds (POST /api/run's config)."""
    return live.catalogue()


def service(request: Request) -> NativeService:
    """The app's native service (create_app puts it in app.state)."""
    return request.app.state.native


@router.get("/health")
def health(request: Request):
    """Whether the server answers, with its run queue and how its runs ended, its compiles (queued,
    running, how they ended, the seconds of the latest) and start-up compiles, every request
    abandoned or timed out by where it was, the compiled-pipeline cache (entries, the bound,
    hits, misses, evictions; null until the first native run creates the runtime) and its open
    connections (under uvicorn; null otherwise)."""
    return dict(service(request).stats(), connections=open_connections())


@router.get("/adapter")
async def adapter(request: Request):
    """The native (wgpu-py) adapter, with its precision probe (wgattn.precision: the error of
    each built-in the kernels use), or 503 saying why there is none."""
    native = service(request)
    info = await native.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    try:  # measured once per runtime, on the native worker (the first call waits for it)
        precision = await native.run(lambda rt, stop: rt.precision(), request.is_disconnected)
    except Busy:  # a full queue holds up runs, not the adapter's description
        precision = None
    return dict(info, precision=wire.jsonable(precision))


def _prepare(body: RunRequest):
    """The live run (CPU work: drawing the seeded tensors), or HTTPException: what the request
    model cannot say (rules between fields, the inputs' shapes) is a 422 naming the fields."""
    try:
        tensors = None
        if body.inputs is not None:
            tensors = {name: getattr(body.inputs, name).array(name) for name in body.inputs.model_fields_set}
        return live.build(body.kernel, body.config.model_dump(exclude_unset=True), tensors)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None


async def _prepared(body: RunRequest, request: Request):
    """`_prepare` on a worker thread once one of the app's drawing slots is free (drawing a large
    case's inputs takes a core for a second: `app.state.drawing` allows one per core, in arrival
    order). A request whose client leaves before its turn is dropped without costing any."""
    slots: anyio.CapacityLimiter = request.app.state.drawing
    while True:
        with anyio.move_on_after(POLL_S):
            await slots.acquire()
            break
        if await request.is_disconnected():
            raise Abandoned("dropped before its inputs were drawn", "drawing")
    try:
        if await request.is_disconnected():
            raise Abandoned("dropped before its inputs were drawn", "drawing")
        return await run_in_threadpool(_prepare, body)
    finally:
        slots.release()


def _answer(run_, info, result) -> dict:
    return {
        "kernel": run_.kernel.id,
        "config": run_.config.to_dict(),
        "adapter": info,
        "digest": run_.digest,
        "outputs": {name: wire.encode(arr) for name, arr in result.outputs.items()},
        "timings": result.timings,
    }


def _plan(run_, target):
    """The run's plan for the native device (its tile shapes, its limits), or HTTPException 422."""
    try:
        return run_.plan(target)
    except ValueError as exc:  # does not fit this adapter
        raise HTTPException(status_code=422, detail=str(exc)) from None


@router.post("/run", response_model=RunResponse)
async def run(body: RunRequest, request: Request):
    """Run any registered kernel natively with wgpu-py on a seeded configuration (wgattn.live, the
    page builds the identical case) and return its outputs (base64), the input digest and timings.
    Runs are queued (503 + Retry-After when the queue is full) and time-limited (504); a run
    whose pipelines are compiled never waits behind a compile (app/native_service.py); a run
    whose client leaves is dropped, or stopped at its next dispatch."""
    run_ = await _prepared(body, request)
    native = service(request)
    info = await native.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    rt = await native.ready()
    plan = await run_in_threadpool(_plan, run_, rt.target)
    if plan.unavailable and not plan.dispatches:  # a kernel this adapter cannot run at all
        # `unavailable` lets a client (the page) report it as not run here, not as failed
        return JSONResponse({"detail": plan.unavailable, "unavailable": True}, status_code=422)
    client = client_key(request.client.host if request.client else None)
    try:
        result = await native.run_plan(plan, client, request.is_disconnected)
    except ValueError as exc:  # does not fit this adapter, or does not compile
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return await run_in_threadpool(_answer, run_, info, result)
