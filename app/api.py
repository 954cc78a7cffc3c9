"""The JSON API: list kernels, describe the native adapter, run a kernel natively."""
import numpy as np
from fastapi import APIRouter, HTTPException

from wgattn import registry, wire
from wgattn.cases import digest

from . import native_service
from .errors import RESPONSES
from .json_body import JSONBodyRoute
from .schemas import RunRequest, RunResponse

# Every route reads its body through JSONBodyRoute and documents the errors of app/errors.py.
router = APIRouter(prefix="/api", tags=["api"], route_class=JSONBodyRoute, responses=RESPONSES)


@router.get("/kernels")
def kernels():
    """Every registered interface and kernel (from shaders/manifest.json)."""
    reg = registry.load()
    return {
        "interfaces": {
            name: {"summary": i.summary, "reference": i.reference, "conventions": dict(i.conventions)}
            for name, i in reg.interfaces.items()
        },
        "kernels": [
            {"id": k.id, "interface": k.interface.name, "summary": k.summary, "requires": list(k.requires)}
            for k in reg.kernels.values()
        ],
    }


@router.get("/adapter")
def adapter():
    """The native (wgpu-py) adapter, with its precision probe (wgattn.precision: the error of
    each built-in the kernels use), or 503 saying why there is none."""
    info = native_service.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    return dict(info, precision=wire.jsonable(native_service.run_locked(lambda rt: rt.precision())))


@router.post("/run", response_model=RunResponse)
def run(request: RunRequest):
    """Run a kernel natively with wgpu-py and return its outputs (base64 float32) and timings.
    Runs are queued (503 + Retry-After when the queue is full) and time-limited (504)."""
    try:
        kernel = registry.load().kernel(request.kernel)
    except ValueError as exc:
        raise HTTPException(status_code=404, detail=str(exc))
    case = request.config
    inputs = case.inputs()
    if request.inputs is not None:
        inputs = _client_inputs(request, inputs)
    try:
        plan = case.plan(kernel, inputs)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc))
    info = native_service.adapter_info()
    if "error" in info:
        raise HTTPException(status_code=503, detail=info["error"])
    try:
        result = native_service.run_locked(lambda rt: rt.run(plan))
    except ValueError as exc:  # does not fit this adapter, or does not compile
        raise HTTPException(status_code=422, detail=str(exc))
    return {
        "kernel": kernel.id,
        "config": case,
        "adapter": info,
        "digest": digest(inputs),
        "outputs": {name: wire.encode(arr) for name, arr in result.outputs.items()},
        "timings": result.timings,
    }


def _client_inputs(request: RunRequest, seeded):
    """The client's tensors, checked against the shapes and dtypes the config implies."""
    out = {}
    for name, expected in seeded.items():
        given = request.inputs.get(name)
        if expected is None:
            if given is not None:
                raise HTTPException(status_code=422, detail=f"input {name!r} is only used with mask 'padding'")
            out[name] = None
            continue
        if given is None:
            raise HTTPException(status_code=422, detail=f"inputs must include {name!r} (shape {list(expected.shape)})")
        try:
            arr = given.array(name)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc))
        if arr.dtype != expected.dtype or arr.shape != expected.shape:
            raise HTTPException(
                status_code=422,
                detail=f"input {name!r} must be {expected.dtype} of shape {list(expected.shape)}, "
                       f"got {arr.dtype} {list(arr.shape)}")
        if arr.dtype == np.float32 and not np.all(np.isfinite(arr)):
            raise HTTPException(status_code=422, detail=f"input {name!r} has non-finite values")
        out[name] = arr
    return out
