"""The JSON API: list kernels, describe the native adapter, run a kernel natively."""

from fastapi import APIRouter, HTTPException

from wgattn import live, registry, wire

from . import native_service
from .errors import RESPONSES
from .json_body import JSONBodyRoute
from .schemas import RunRequest, RunResponse

# Every route reads its body through JSONBodyRoute and documents the errors of app/errors.py.
router = APIRouter(prefix="/api", tags=["api"], route_class=JSONBodyRoute, responses=RESPONSES)


@router.get("/kernels")
def kernels():
    """Every registered interface and kernel (from shaders/manifest.json) and, in `configs`, the
    live configuration's fields per interface with their bounds (POST /api/run's config)."""
    return live.catalogue()


@router.get("/adapter")
def adapter():
    """The native (wgpu-py) adapter, with its precision probe (wgattn.precision: the error of
    each built-in the kernels use), or 503 saying why there is none."""
    info = native_service.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    try:  # measured once per runtime, on the native worker (the first call waits for it)
        precision = native_service.run_locked(lambda rt: rt.precision())
    except native_service.Busy:  # a full queue holds up runs, not the adapter's description
        precision = None
    return dict(info, precision=wire.jsonable(precision))


@router.post("/run", response_model=RunResponse)
def run(request: RunRequest):
    """Run any registered kernel natively with wgpu-py on a seeded configuration (wgattn.live, the
    page builds the identical case) and return its outputs (base64), the input digest and timings.
    Runs are queued (503 + Retry-After when the queue is full) and time-limited (504)."""
    try:
        kernel = registry.load().kernel(request.kernel)
    except ValueError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    try:
        tensors = None
        if request.inputs is not None:
            tensors = {name: t.array(name) for name, t in request.inputs.items()}
        run_ = live.build(kernel.id, request.config, tensors)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    info = native_service.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    try:  # planned for the native device (its tile shapes, its limits)
        result = native_service.run_locked(lambda rt: rt.run(run_.plan(rt.target)))
    except ValueError as exc:  # does not fit this adapter, or does not compile
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return {
        "kernel": kernel.id,
        "config": run_.config.to_dict(),
        "adapter": info,
        "digest": run_.digest,
        "outputs": {name: wire.encode(arr) for name, arr in result.outputs.items()},
        "timings": result.timings,
    }
