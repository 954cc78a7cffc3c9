"""Compiles off the path of cached runs (app/native_service.py): a run whose pipelines are compiled
never waits behind another's compile; a compile whose every requester left before it started is
not started; a started one is kept whatever became of its requests, a timeout included; clients
take turns in the compile queue; the start-up compiles leave the pipelines they were given.

Each compile is held at a gate the test opens (`held`), so every verdict follows from the order
of events, never from how long a compile takes on this machine."""

import asyncio
import threading
import time

import pytest
from fastapi.testclient import TestClient

from app import create_app, limits, native_service
from helpers import LOCAL
from wgattn import live, tolerance, wire

SMALL = {"kernel": "sdpa_arena.seed", "config": {"batch": 1, "heads": 2, "seq_q": 6, "seq_k": 9, "head_dim": 4, "mask": "none"}}
FLASH = {"batch": 1, "heads": 1, "seq_q": 3, "seq_k": 5}
PREFILL = {"batch": 1, "heads": 2, "heads_kv": 1, "seq_len": 20, "new_tokens": 17, "block_size": 8}


@pytest.fixture
def app(native_runtime):
    app = create_app()
    yield app
    app.state.native.close(grace=1)


@pytest.fixture
def client(app):
    with TestClient(app, base_url=LOCAL) as c:
        yield c


class Gate:
    """Compile jobs stop at the gate until the test opens it; `started` lists the pipelines
    (key sets) of each, in the order they started."""

    def __init__(self, monkeypatch):
        self.open = threading.Event()
        self.started = []
        real = native_service.Compiler.compile

        def compile(compiler, job, device):
            self.started.append(job.keys)
            assert self.open.wait(120), "the test never opened the gate"
            return real(compiler, job, device)

        monkeypatch.setattr(native_service.Compiler, "compile", compile)

    def wait_started(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        while len(self.started) < n:
            assert time.monotonic() < deadline, f"{len(self.started)} compiles started, waited for {n}"
            time.sleep(0.01)


@pytest.fixture
def held(monkeypatch):
    gate = Gate(monkeypatch)
    yield gate
    gate.open.set()


# Small configurations whose head_dim a test varies to get shapes not compiled yet: the forward's,
# and a chunked prefill's over a paged cache (its own interface and kernels, the same queues).
SHAPES = {"flash_fwd.tiled": FLASH, "paged_prefill.tiled": PREFILL}


def new_shapes(rt, n, kernel="flash_fwd.tiled"):
    """`n` requests of `kernel` whose pipelines `rt` has not compiled (the smallest head_dim
    classes first: they compile fastest), each with its plan."""
    return [(request, plan) for request, plan, _ in new_shapes_keys(rt, n, kernel)]


def new_shapes_keys(rt, n, kernel="flash_fwd.tiled"):
    """`new_shapes`, each with the key set of its missing pipelines."""
    found, seen = [], set()
    for d in range(1, 257):
        config = dict(SHAPES[kernel], head_dim=d)
        plan = live.build(kernel, config).plan(rt.target)
        keys = frozenset(rt.missing(plan))
        if keys and keys not in seen:
            seen.add(keys)
            found.append(({"kernel": kernel, "config": config}, plan, keys))
            if len(found) == n:
                return found
    raise AssertionError(f"no uncompiled {kernel} shape left")


def assert_right(body, request):
    run = live.build(request["kernel"], request["config"])
    ref, naive = run.expected()
    for name, want in ref.items():
        err = tolerance.max_abs_err(wire.decode(body["outputs"][name]), want)
        assert err <= tolerance.allowance(tolerance.max_abs_err(naive[name], want), want), (name, err)


def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=fn()))
    t.start()
    return t, out


def runtime(client, app):
    assert client.post("/api/run", json=SMALL).status_code == 200
    return app.state.native.runtime


@pytest.mark.parametrize("kernel", list(SHAPES))
def test_a_cached_run_does_not_wait_behind_a_compile(app, client, held, kernel):
    held.open.set()
    rt = runtime(client, app)  # SMALL compiled
    held.open.clear()
    ((request, _),) = new_shapes(rt, 1, kernel)
    n0 = len(held.started)
    t, new = in_thread(lambda: client.post("/api/run", json=request))
    held.wait_started(n0 + 1)
    for _ in range(3):  # while the compile is held: answered, and right
        r = client.post("/api/run", json=SMALL)
        assert r.status_code == 200
        assert_right(r.json(), SMALL)
    assert "r" not in new and app.state.native.stats()["compiles"]["running"] == 1
    held.open.set()
    t.join(300)
    assert new["r"].status_code == 200, new["r"].text
    assert_right(new["r"].json(), request)


def test_a_compile_every_requester_left_is_not_started_and_a_started_one_is_kept(app, client, held):
    held.open.set()
    rt = runtime(client, app)
    held.open.clear()
    (first, first_plan, first_keys), (second, second_plan, _) = new_shapes_keys(rt, 2)
    service = app.state.native
    before = service.stats()["compiles"]
    n0 = len(held.started)
    t, answer = in_thread(lambda: client.post("/api/run", json=first))
    held.wait_started(n0 + 1)

    async def leaves_after(plan, seconds):
        t0 = time.monotonic()

        async def gone():
            return time.monotonic() - t0 > seconds

        with pytest.raises(native_service.Abandoned) as left:
            await service.run_plan(plan, "another client", gone)
        return str(left.value)

    # Queued behind the held compile, its one requester leaves: dropped, never started.
    assert asyncio.run(leaves_after(second_plan, 0.2)) == "its kernel's compile had not started and was dropped"
    # The held compile's requester leaves too, after it started: it compiles on.
    assert asyncio.run(leaves_after(first_plan, 0.2)) == "its kernel compiles on for other requests"
    held.open.set()
    t.join(300)
    assert answer["r"].status_code == 200
    stats = service.stats()["compiles"]
    assert (stats["finished"] - before["finished"], stats["dropped"] - before["dropped"], stats["queued"]) == (1, 1, 0), stats
    assert held.started[n0:] == [first_keys]  # the second never started
    assert rt.missing(first_plan) == [] and rt.missing(second_plan) != []


def test_a_timeout_keeps_the_compile(app, client, held, monkeypatch):
    """The request gets 504 at the limit; the compile goes on, and the next request of the shape
    runs on its pipelines without compiling anything."""
    held.open.set()
    rt = runtime(client, app)
    held.open.clear()
    ((request, plan),) = new_shapes(rt, 1)
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    r = client.post("/api/run", json=request)
    assert r.status_code == 504, r.text
    assert "not compiled within the server's limit of 0.5 s" in r.json()["detail"]
    assert "compiles on, and is kept" in r.json()["detail"]
    assert time.monotonic() - t0 < 5
    monkeypatch.setattr(limits, "RUN_TIMEOUT_S", 24 * 3600.0)
    held.open.set()
    deadline = time.monotonic() + 300
    while rt.missing(plan) and time.monotonic() < deadline:
        time.sleep(0.05)
    service = app.state.native
    compiles, misses = service.stats()["compiles"]["finished"], rt.pipeline_cache_stats()["misses"]
    r = client.post("/api/run", json=request)
    assert r.status_code == 200
    assert_right(r.json(), request)
    assert service.stats()["compiles"]["finished"] == compiles and rt.pipeline_cache_stats()["misses"] == misses
    assert service.stats()["requests"]["timed_out"] == {"compiling": 1, "total": 1}


def test_clients_take_turns_in_the_compile_queue(app, client, held, monkeypatch):
    """Client A's compile holds the worker and three more of A's wait; then B asks for one: B's
    is the next to start, then A's in order. Past its share a client is told to retry."""
    held.open.set()
    rt = runtime(client, app)
    held.open.clear()
    service = app.state.native
    shapes = new_shapes_keys(rt, 5)
    n0 = len(held.started)
    jobs = [service.compiler.request(rt, shapes[0][1], "A")]
    held.wait_started(n0 + 1)
    jobs += [service.compiler.request(rt, plan, "A") for _, plan, _ in shapes[1:4]]
    monkeypatch.setattr(limits, "COMPILES_PER_CLIENT", 3)
    with pytest.raises(native_service.Busy, match="3 kernel compiles queued"):
        service.compiler.request(rt, shapes[4][1], "A")
    jobs.append(service.compiler.request(rt, shapes[4][1], "B"))
    held.open.set()
    for job in jobs:
        job.future.result(300)
    keys = [k for _, _, k in shapes]
    assert held.started[n0:] == [keys[0], keys[4], keys[1], keys[2], keys[3]]
    assert all(rt.missing(plan) == [] for _, plan, _ in shapes)


def test_the_client_is_its_address():
    assert native_service.client_key("127.0.0.2") == "127.0.0.2"
    assert native_service.client_key("::ffff:10.0.0.7") == "10.0.0.7"
    assert native_service.client_key("2001:db8::1") == native_service.client_key("2001:db8::ffff") == "2001:db8::/64"
    assert native_service.client_key(None) == "-"


def test_the_start_up_compiles_leave_their_pipelines(native_runtime, monkeypatch):
    """With WGATTN_WARMUP on, the server compiles what `warmup_plans` gives as it starts; a run of
    those shapes then compiles nothing. (The real list, every kernel's page default and grid,
    takes minutes on lavapipe: two of them here.)"""
    rt = native_runtime
    picked = new_shapes(rt, 2)
    monkeypatch.setattr(limits, "WARMUP", True)
    monkeypatch.setattr(native_service, "warmup_plans", lambda target: iter([("a", picked[0][1]), ("b", picked[1][1])]))
    app = create_app()
    with TestClient(app, base_url=LOCAL) as c:
        service = app.state.native
        deadline = time.monotonic() + 300
        while not service.stats()["warmup"]["done"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert service.stats()["warmup"] == {"planned": 2, "compiled": 2, "failed": 0, "done": True}
        finished = service.stats()["compiles"]["finished"]
        r = c.post("/api/run", json=picked[1][0])
        assert r.status_code == 200
        assert_right(r.json(), picked[1][0])
        assert service.stats()["compiles"]["finished"] == finished  # nothing compiled for it
    app.state.native.close(grace=1)


def test_the_start_up_compiles_cover_every_kernels_page_default_first(native_runtime):
    from wgattn import registry

    rt = native_runtime
    runnable = [k.id for k in registry.load().kernels.values() if not rt.target.lacks(k)]
    plans = native_service.warmup_plans(rt.target)
    firsts = [next(plans)[0] for _ in runnable]
    assert firsts == [f"{k} (page default)" for k in runnable]
    label, plan = next(plans)  # then the grids
    assert label.startswith(runnable[0] + " ") and plan.dispatches
