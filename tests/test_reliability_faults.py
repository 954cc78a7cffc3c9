"""Faults, injected (there is no real GPU to lose here): no adapter, the device lost mid-run, a
kernel that runs too long, a full run queue. Each: the client is told clearly, nothing hangs,
and the next request works (docs/reliability.md)."""

import asyncio
import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import create_app, limits, native_service
from helpers import LOCAL
from wgattn import native, tolerance, wire
from wgattn.interfaces.sdpa_arena import SdpaCase

SMALL = {"batch": 1, "heads": 2, "seq_q": 6, "seq_k": 9, "head_dim": 4, "mask": "none", "seed": 5}


@pytest.fixture
def app():
    """A fresh app: its own NativeService (no runtime yet, no remembered error, its own worker)."""
    return create_app()


@pytest.fixture
def service(app):
    yield app.state.native
    app.state.native.close(grace=1)


@pytest.fixture
def client(app):
    with TestClient(app, base_url=LOCAL) as c:  # runs the lifespan: its end closes the service
        yield c


def run_ok(client, config=SMALL):
    r = client.post("/api/run", json={"config": config})
    assert r.status_code == 200, r.text
    case = SdpaCase(**config)
    inputs = case.inputs()
    ref = case.reference(inputs)["out"]
    naive = tolerance.max_abs_err(case.reference(inputs, dtype=np.float32)["out"], ref)
    assert tolerance.max_abs_err(wire.decode(r.json()["outputs"]["out"]), ref) <= tolerance.allowance(naive, ref)


def call(service, fn, timeout=60):
    """fn(runtime) on the service's worker, from a test thread."""
    return service.submit(lambda rt, stop: fn(rt)).future.result(timeout)


def patch_run(monkeypatch, service, fake):
    """Make the service's runtime (created now) run `fake(real_run, plan)` instead of run(plan)."""
    rt = call(service, lambda rt: rt)
    real = rt.run
    monkeypatch.setattr(rt, "run", lambda plan, between=None, pipelines=None: fake(real, plan))
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


def test_no_adapter_is_probed_again_later(app, client, monkeypatch, native_runtime):
    app.state.native = native_service.NativeService(adapter_retry_s=0.5)
    with pytest.MonkeyPatch.context() as no_driver:
        no_driver.setattr(native, "runtime", lambda: (_ for _ in ()).throw(native.AdapterError("none yet")))
        assert client.get("/api/adapter").status_code == 503
    # the driver is back
    assert client.get("/api/adapter").status_code == 503  # remembered for adapter_retry_s
    time.sleep(0.6)
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
    assert service.runtime is not None and service.runtime is not lost
    assert service.runtime.device is not lost.device


def test_a_run_past_the_limit_gets_504_and_keeps_the_runtime(service, client, monkeypatch, native_runtime):
    """Over the per-request limit: 504 at the limit (not when the kernel ends), the run told to
    stop; the runtime keeps its device and every compiled pipeline (nothing is compiled again),
    and the run queued behind it is answered once the long one returns."""
    run_ok(client)  # SMALL's pipeline compiled
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 0.5)
    release = threading.Event()

    def slow(real, plan):
        release.wait(10)  # a kernel that does not come back until the test lets it
        return real(plan)

    rt = patch_run(monkeypatch, service, slow)
    cached = rt.pipeline_cache_stats()
    t0 = time.monotonic()
    r = client.post("/api/run", json={"config": SMALL})
    took = time.monotonic() - t0
    assert r.status_code == 504, r.text
    assert "longer than the server's limit of 0.5 s" in r.json()["detail"] and "stopped" in r.json()["detail"]
    assert took < 3, f"the client waited {took:.1f} s for a 0.5 s limit"
    assert service.runtime is rt and rt.pipeline_cache_stats()["entries"] == cached["entries"]
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 60.0)  # the next one waits for the slow one
    behind = {}
    t = threading.Thread(target=lambda: behind.update(r=client.post("/api/run", json={"config": SMALL})))
    t.start()
    time.sleep(0.2)
    assert "r" not in behind  # queued behind the run still on the device
    release.set()
    t.join(30)
    assert behind["r"].status_code == 200, behind["r"].text
    assert service.runtime is rt and rt.pipeline_cache_stats()["misses"] == cached["misses"]
    assert service.stats()["requests"]["timed_out"] == {"running": 1, "total": 1}


def test_a_device_that_does_not_return_is_replaced(service, client, monkeypatch, native_runtime):
    """A run still on the device twice the limit after it started (its client had its 504 at the
    limit) is taken for a hung device: the run waiting behind it is told to retry and the next
    run gets a fresh worker and device at once."""
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 0.3)
    release = threading.Event()

    def stuck(real, plan):
        release.wait(30)
        return real(plan)

    hung = patch_run(monkeypatch, service, stuck)
    first = {}
    t = threading.Thread(target=lambda: first.update(r=client.post("/api/run", json={"config": SMALL})))
    t.start()
    time.sleep(0.1)
    behind = client.post("/api/run", json={"config": SMALL})
    t.join(10)
    assert first["r"].status_code == 504, first["r"].text
    assert behind.status_code == 503 and "did not return from a run and has been replaced" in behind.json()["detail"]
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 60.0)
    run_ok(client)
    assert service.runtime is not None and service.runtime is not hung
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
    while service.stats()["queue"]["admitted"] < 3 and time.monotonic() < deadline:
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
    assert service.stats()["queue"]["admitted"] == 0
    run_ok(client)


def test_a_bad_plan_is_the_callers_error_and_keeps_the_runtime(service, client, monkeypatch, native_runtime):
    def does_not_fit(real, plan):
        raise ValueError("needs 2 GiB of storage; this adapter binds 128 MiB")

    rt = patch_run(monkeypatch, service, does_not_fit)
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 422 and "128 MiB" in r.json()["detail"]
    assert service.runtime is rt  # not a device fault: nothing recreated


def test_a_queued_run_whose_client_left_is_dropped_and_frees_its_place(service, monkeypatch, native_runtime):
    """Runs wait behind one held on the device; their clients leave: each is dropped without
    running, its place in the queue is free at once, and the held run is not disturbed."""
    monkeypatch.setattr(limits, "RUN_QUEUE", 3)
    entered, release = threading.Event(), threading.Event()
    ran = []

    def held(rt, stop):
        entered.set()
        release.wait(10)
        return "held"

    first = service.submit(held)
    assert entered.wait(10)

    async def abandoned():
        async def gone():
            return True

        with pytest.raises(native_service.Abandoned, match="dropped before it started"):
            await service.run(lambda rt, stop: ran.append(1), gone)

    for _ in range(5):  # more than the queue holds: each gave its place back
        asyncio.run(abandoned())
    second = service.submit(lambda rt, stop: ran.append(2) or "after")
    assert service.stats()["queue"]["admitted"] == 2
    release.set()
    assert first.future.result(10) == "held" and second.future.result(10) == "after"
    assert ran == [2]


def test_a_running_run_stops_at_its_next_dispatch_when_its_client_leaves(service, native_runtime):
    entered, release = threading.Event(), threading.Event()
    dispatched = []

    def two_dispatches(rt, stop):
        dispatched.append("first")
        entered.set()
        release.wait(10)
        stop()  # what NativeRuntime.run calls between dispatches
        dispatched.append("second")

    job = service.submit(two_dispatches)
    assert entered.wait(10)
    assert job.cancel() == "the run was told to stop at its next dispatch boundary"
    release.set()
    with pytest.raises(native_service.RunCancelled):
        job.future.result(10)
    assert dispatched == ["first"]
    assert service.stats()["runs"]["stopped"] == 1
    assert service.runtime is not None  # the caller's cancellation is no device fault


def test_shutdown_drops_queued_runs_and_does_not_wait_for_a_stuck_one(service, native_runtime):
    entered, release = threading.Event(), threading.Event()
    stuck = service.submit(lambda rt, stop: entered.set() or release.wait(30))
    assert entered.wait(10)
    queued = service.submit(lambda rt, stop: "never")
    t0 = time.monotonic()
    service.close(grace=0.3)
    assert time.monotonic() - t0 < 3
    with pytest.raises(native_service.DeviceFault, match="shutting down"):
        queued.future.result(1)
    assert not stuck.future.done()
    release.set()
    assert stuck.future.result(10) is True
