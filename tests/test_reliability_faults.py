"""Faults, injected (there is no real GPU to lose here): no adapter, the device lost mid-run, a
kernel that runs too long, a full run queue. Each: the client is told clearly, nothing hangs,
and the next request works (docs/reliability.md)."""

import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import limits, main, native_service
from wgattn import native, tolerance, wire
from wgattn.interfaces.sdpa_arena import SdpaCase

SMALL = {"batch": 1, "heads": 2, "seq_q": 6, "seq_k": 9, "head_dim": 4, "mask": "none", "seed": 5}


@pytest.fixture
def service(monkeypatch):
    """native_service from a clean slate (no runtime yet, no remembered error, its own worker);
    the process-wide runtime and state come back afterwards."""
    for name, value in {"_runtime": None, "_error": None, "_fresh": False, "_executor": None, "_admitted": 0}.items():
        monkeypatch.setattr(native_service, name, value)
    yield native_service
    if native_service._executor is not None:
        native_service._executor.shutdown(wait=False)


@pytest.fixture
def client():
    with TestClient(main) as c:  # runs the lifespan: the thread pool sized for the queue
        yield c


def run_ok(client, config=SMALL):
    r = client.post("/api/run", json={"config": config})
    assert r.status_code == 200, r.text
    case = SdpaCase(**config)
    inputs = case.inputs()
    ref = case.reference(inputs)["out"]
    naive = tolerance.max_abs_err(case.reference(inputs, dtype=np.float32)["out"], ref)
    assert tolerance.max_abs_err(wire.decode(r.json()["outputs"]["out"]), ref) <= tolerance.allowance(naive, ref)


def patch_run(monkeypatch, service, fake):
    """Make the service's runtime (created now) run `fake(real_run, plan)` instead of run(plan)."""
    rt = service.run_locked(lambda rt: rt)
    real = rt.run
    monkeypatch.setattr(rt, "run", lambda plan: fake(real, plan))
    return rt


def test_no_adapter_server_serves_the_rest_and_says_why(service, client, monkeypatch):
    """What wgpu-py does with no driver at all (VK_ICD_FILENAMES pointing nowhere): it raises
    RuntimeError rather than returning no adapter. The API says why, with 503 and Retry-After."""

    def no_driver(*args, **kwargs):
        raise RuntimeError(
            "Request adapter failed (3): Validation Error\n\nCaused by:\n"
            "  No suitable graphics adapter found; vulkan drivers/libraries could not be loaded"
        )

    monkeypatch.setattr(native, "runtime", no_driver)
    monkeypatch.setattr(native, "NativeRuntime", no_driver)
    for method, path in (("get", "/api/adapter"), ("post", "/api/run")):
        r = client.request(method, path, json={"config": SMALL} if method == "post" else None)
        assert r.status_code == 503, r.text
        assert "no usable adapter" in r.json()["detail"] and "vulkan drivers" in r.json()["detail"]
        assert int(r.headers["retry-after"]) >= 1
    assert client.get("/api/kernels").status_code == 200
    assert client.get("/").status_code == 200
    assert client.get("/py/wheel.json").status_code == 200  # set-up built the wheel


def test_no_adapter_is_probed_again_later(service, client, monkeypatch, native_runtime):
    with pytest.MonkeyPatch.context() as no_driver:
        no_driver.setattr(native, "runtime", lambda: (_ for _ in ()).throw(native.AdapterError("none yet")))
        assert client.get("/api/adapter").status_code == 503
    # the driver is back
    assert client.get("/api/adapter").status_code == 503  # remembered for ADAPTER_RETRY_S
    service._error_at -= service.ADAPTER_RETRY_S
    assert client.get("/api/adapter").status_code == 200
    run_ok(client)


def test_device_lost_mid_run_recreates_the_runtime(service, client, monkeypatch, native_runtime):
    def lose(real, plan):
        raise RuntimeError("Parent device is lost")  # wgpu-native's words for a lost device

    lost = patch_run(monkeypatch, service, lose)
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
    assert "device failed during the run (RuntimeError)" in r.json()["detail"]
    assert "recreated" in r.json()["detail"]
    run_ok(client)  # the next works, on a new device
    assert service._runtime is not None and service._runtime is not lost
    assert service._runtime.device is not lost.device


def test_a_kernel_that_runs_too_long_is_cut_off(service, client, monkeypatch, native_runtime):
    """Over the per-request limit: 504 at the limit (not when the kernel ends), the run queued
    behind it is told to retry, and the next run gets a fresh worker and device at once."""
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 0.5)
    release = threading.Event()

    def slow(real, plan):
        release.wait(10)  # a kernel that does not come back (until the test ends)
        return real(plan)

    stuck = patch_run(monkeypatch, service, slow)
    behind = {}

    def queued():
        time.sleep(0.1)
        behind["r"] = client.post("/api/run", json={"config": SMALL})

    t = threading.Thread(target=queued)
    t.start()
    t0 = time.monotonic()
    r = client.post("/api/run", json={"config": SMALL})
    took = time.monotonic() - t0
    t.join(10)
    assert r.status_code == 504, r.text
    assert "longer than the server's limit of 0.5 s" in r.json()["detail"]
    assert took < 3, f"the client waited {took:.1f} s for a 0.5 s limit"
    assert behind["r"].status_code == 503 and "retry" in behind["r"].json()["detail"]
    t0 = time.monotonic()
    run_ok(client)
    assert time.monotonic() - t0 < 5 and service._runtime is not stuck
    release.set()


def test_a_full_queue_is_503_with_retry_after(service, client, monkeypatch, native_runtime):
    monkeypatch.setattr(limits, "RUN_QUEUE", 3)
    release = threading.Event()

    def held(real, plan):
        release.wait(10)
        return real(plan)

    patch_run(monkeypatch, service, held)
    results = []
    threads = [threading.Thread(target=lambda: results.append(client.post("/api/run", json={"config": SMALL}))) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while service._admitted < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 503 and r.headers["retry-after"] == str(limits.RETRY_AFTER_S)
    assert "queue is full (3 runs)" in r.json()["detail"]
    assert client.get("/api/kernels").status_code == 200  # the rest of the server is not held up
    assert client.get("/api/adapter").status_code == 200
    release.set()
    for t in threads:
        t.join(10)
    assert [x.status_code for x in results] == [200, 200, 200]
    assert service._admitted == 0
    run_ok(client)


def test_a_bad_plan_is_the_callers_error_and_keeps_the_runtime(service, client, monkeypatch, native_runtime):
    def does_not_fit(real, plan):
        raise ValueError("needs 2 GiB of storage; this adapter binds 128 MiB")

    rt = patch_run(monkeypatch, service, does_not_fit)
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 422 and "128 MiB" in r.json()["detail"]
    assert service._runtime is rt  # not a device fault: nothing recreated
