"""wgpu-py (wgpu-native) across threads, as the server uses it (app/native_service.py): pipelines
created on one thread while another submits runs on the same device, and a plan run on a second
device while the first one runs. wgpu-core synchronises a device internally; this holds
wgpu-py's side of it to that: no error, no deadlock, every result right."""

import threading

import numpy as np

from wgattn import live, native, tolerance

SMALL = {"batch": 1, "heads": 2, "seq_q": 6, "seq_k": 9, "head_dim": 4, "mask": "none"}


def check(run, outputs):
    ref, naive = run.expected()
    for name, want in ref.items():
        err = tolerance.max_abs_err(outputs[name], want)
        assert err <= tolerance.allowance(tolerance.max_abs_err(naive[name], want), want), (name, err)


def test_pipelines_are_created_on_one_thread_while_another_runs(native_runtime):
    rt = native_runtime
    small = live.build("sdpa_arena.seed", SMALL)
    small_plan = small.plan(rt.target)
    rt.run(small_plan)
    # Shapes of three kernels (flash_fwd, decode, the backward's three passes), prepared (created,
    # not dispatched) on a thread of their own.
    runs = [
        live.build("flash_fwd.tiled", {"batch": 1, "heads": 2, "seq_q": 5, "seq_k": 7, "head_dim": 6}),
        live.build("paged_decode.split", {"batch": 2, "heads": 2, "heads_kv": 1, "seq_len": 40, "head_dim": 6}),
        live.build("varlen_bwd.tiled", {"batch": 1, "heads": 1, "seq_q": 4, "seq_k": 4, "head_dim": 6}),
    ]
    plans = [r.plan(rt.target) for r in runs]
    errors = []
    done = threading.Event()

    def prepare():
        try:
            for _ in range(3):
                for plan in plans:
                    rt.prepare(plan)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=prepare)
    t.start()
    runs_meanwhile = 0
    while not done.is_set() or runs_meanwhile < 3:
        check(small, rt.run(small_plan).outputs)
        runs_meanwhile += 1
    t.join(600)
    assert not errors, errors
    for run, plan in zip(runs, plans):
        pipelines = rt.cached_pipelines(plan)
        assert pipelines is not None  # every one cached by the other thread
        check(run, rt.run(plan, pipelines=pipelines).outputs)


def test_a_second_device_runs_while_the_first_does(native_runtime):
    """The server's compile device: its runs (where lavapipe compiles) beside the run device's."""
    rt = native_runtime
    other = native.NativeRuntime(check_loops=False, trusted=rt.trusted)
    small = live.build("sdpa_arena.seed", SMALL)
    flash = live.build("flash_fwd.tiled", {"batch": 1, "heads": 2, "seq_q": 5, "seq_k": 7, "head_dim": 10, "seed": 1})
    results, errors = [], []

    def on_other():
        try:
            for _ in range(3):
                results.append(other.run(flash.plan(other.target)).outputs)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=on_other)
    t.start()
    while t.is_alive():
        check(small, rt.run(small.plan(rt.target)).outputs)
    t.join()
    assert not errors, errors
    assert len(results) == 3
    for outputs in results:
        check(flash, outputs)
    np.testing.assert_array_equal(results[0]["out"], results[2]["out"])
