"""The live check for every registered kernel, driven from CPython the way the page drives it:
PageSession.prepare -> the plan run natively standing in for the browser -> POST /api/run (the
server's native run, through FastAPI's TestClient) -> PageSession.finish, then the pictures."""

import base64
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import main
from helpers import LOCAL, needs_features
from wgattn import bench, interfaces, live, pictures, registry
from wgattn.page import PageSession

client = TestClient(main, base_url=LOCAL)
page = PageSession()  # as the page's JS holds one (each test uses its own runs)
REG = registry.load()
# Small configurations with every knob of each family turned (GQA, windows, softcap, ragged lengths)
SMALL = {
    "paged_decode": {
        "batch": 3,
        "new_tokens": 2,
        "heads": 4,
        "heads_kv": 2,
        "seq_len": 45,
        "head_dim": 12,
        "block_size": 8,
        "window_left": 20,
        "softcap": 5.0,
        "alibi": True,
        "sinks": True,
    },
    "paged_prefill": {
        "batch": 3,
        "new_tokens": 37,
        "heads": 4,
        "heads_kv": 2,
        "seq_len": 60,
        "head_dim": 12,
        "block_size": 8,
        "window_left": 20,
        "softcap": 5.0,
        "alibi": True,
        "sinks": True,
    },
    "sdpa_arena": {"batch": 2, "heads": 2, "seq_q": 19, "seq_k": 23, "head_dim": 7, "mask": "padding", "seed": 3},
    "varlen_fwd": {"batch": 3, "heads": 2, "seq_q": 21, "seq_k": 17, "head_dim": 9, "causal": True, "padding": True},
    "flash_fwd": {
        "batch": 3,
        "heads": 4,
        "heads_kv": 2,
        "seq_q": 21,
        "seq_k": 30,
        "head_dim": 12,
        "causal": True,
        "window_left": 6,
        "window_right": 2,
        "softcap": 5.0,
        "alibi": True,
        "sinks": True,
        "padding": True,
        "seed": 1,
    },
    "varlen_bwd": {
        "batch": 2,
        "heads": 3,
        "heads_kv": 1,
        "seq_q": 17,
        "seq_k": 25,
        "head_dim": 8,
        "causal_align": "top_left",
        "window_left": 5,
        "softcap": 4.0,
        "sinks": True,
        "padding": True,
    },
    "attn_probs": {"heads": 4, "heads_kv": 2, "history": 70, "head_dim": 16, "window": 9},
    "attn_probs_batched": {"heads": 4, "heads_kv": 1, "history": 70, "head_dim": 13, "positions": 20, "window": 9, "scale": 0.7},
}
KERNELS = sorted(REG.kernels)


def _live_check(kernel_id, config, native_runtime, browser_bytes=None):
    page.use_target(json.dumps(native_runtime.target.to_json()))  # the browser stand-in's device
    prepared = json.loads(page.prepare(json.dumps({"kernel": kernel_id, "config": config})))
    plan = page.plan(prepared["run"])
    raw = native_runtime.run(plan).raw if browser_bytes is None else browser_bytes(plan)
    for name, data in raw.items():
        page.add_buffer(prepared["run"], name, data)
    r = client.post("/api/run", json={"kernel": kernel_id, "config": prepared["config"]})
    assert r.status_code == 200, r.text
    return prepared, json.loads(page.finish(prepared["run"], json.dumps({"timings": {}}), r.text))


@pytest.mark.parametrize("kernel_id", KERNELS)
def test_every_kernel_passes_live_on_every_output(kernel_id, native_runtime):
    kernel = REG.kernel(kernel_id)
    needs_features(native_runtime, kernel)
    prepared, result = _live_check(kernel_id, SMALL[kernel.interface], native_runtime)
    assert result["pass"] is True, result["pairs"]
    assert (result["verdict"]["state"], result["verdict"]["word"]) == ("pass", "PASS")
    outputs = result["outputs"]
    assert outputs and set(outputs) == set(interfaces.of(kernel).OUTPUTS)
    pairs = {(p["a"], p["b"], p["output"]) for p in result["pairs"]}
    assert pairs == {
        (a, b, o) for a, b in [("browser", "pyodide"), ("browser", "native"), ("pyodide", "native")] for o in outputs
    }
    assert result["digest"] == prepared["digest"]
    # the pictures of the run
    heads = result["heads"]
    heat = json.loads(page.heatmap(result["run"], heads - 1))
    assert heat["width"] > 0 and heat["height"] > 0
    assert len(base64.b64decode(heat["rgba"])) == 4 * heat["width"] * heat["height"]
    for output in outputs:
        err = json.loads(page.error_map(result["run"], output, "browser", "native", 0))
        assert err["over"] == 0 and err["max_abs_err"] <= err["allowance"]


def test_f16_kernel_is_judged_against_a_naive_f16_run(native_runtime):
    if "shader-f16" not in native_runtime.features:
        pytest.skip("the native adapter lacks shader-f16")
    _, result = _live_check("flash_fwd.tiled_f16", SMALL["flash_fwd"], native_runtime)
    _, f32 = _live_check("flash_fwd.tiled", SMALL["flash_fwd"], native_runtime)
    assert result["precision"] == "f16" and result["pass"]
    # a naive float16 run errs far more than a float32 one: the yardstick follows the precision
    assert result["naive_err"]["out"] > 50 * f32["naive_err"]["out"]


def test_a_kernel_the_browser_cannot_run_is_reported_unavailable_never_passing(native_runtime):
    prepared = json.loads(
        page.prepare(json.dumps({"kernel": "flash_fwd.tiled_f16", "config": {"batch": 1, "seq_q": 8, "seq_k": 8, "head_dim": 8}}))
    )
    why = "flash_fwd.tiled_f16.main needs adapter features shader-f16, which this device lacks"
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled_f16", "config": prepared["config"]})
    result = json.loads(page.finish(prepared["run"], json.dumps({"skipped": why}), r.text))
    assert result["runtimes"]["browser"] == {"ok": False, "skipped": why}
    assert all("browser" not in (p["a"], p["b"]) for p in result["pairs"])
    verdict = result["verdict"]
    assert verdict["not_run"][0] == {"runtime": "browser", "kind": "skipped", "reason": why}
    if r.status_code == 200:  # the reference and the native run agree: never a plain pass
        assert (verdict["state"], verdict["word"], verdict["unchecked"]) == ("partial", "PASS where it ran", False)
        assert "does not count as passing in this browser" in verdict["notes"][0]


def test_a_wrong_row_fails_and_shows_as_a_line(native_runtime):
    """A browser result with one query row wrong (a mask-edge bug) fails browser pairs, and the
    error map has a red line exactly on that row."""

    def planted(plan):
        raw = dict(native_runtime.run(plan).raw)
        out = np.frombuffer(raw["out"], np.float32).copy().reshape(-1, 4, 12)
        out[5, 0, :] += 0.5
        raw["out"] = out.tobytes()
        return raw

    config = dict(SMALL["flash_fwd"], padding=False)
    _, result = _live_check("flash_fwd.tiled", config, native_runtime, planted)
    verdict = {(p["a"], p["b"], p["output"]): p["pass"] for p in result["pairs"]}
    assert verdict[("browser", "native", "out")] is False and verdict[("pyodide", "native", "out")] is True
    assert result["pass"] is False
    assert result["verdict"]["state"] == "fail" and "browser and native disagree on out" in result["verdict"]["text"]
    err = json.loads(page.error_map(result["run"], "out", "browser", "native", 0))
    rgba = np.frombuffer(base64.b64decode(err["rgba"]), np.uint8).reshape(err["height"], err["width"], 4)
    red = np.all(rgba[..., :3] == pictures.OVER, axis=2)
    assert err["over"] == 12 and red[5].all() and red.sum() == 12


def test_heatmap_shows_masks_and_empty_rows():
    # sdpa causal: the upper triangle is masked; padding with a batch keeping no key: empty rows
    run_ = live.build("sdpa_arena.seed", {"batch": 1, "heads": 1, "seq_q": 6, "seq_k": 6, "head_dim": 4})
    pic = pictures.heatmap(run_.interface, run_.case, 0)
    assert pic["masked"] == 15 and pic["empty_rows"] == 0
    rgba = np.frombuffer(base64.b64decode(pic["rgba"]), np.uint8).reshape(6, 6, 4)
    assert np.all(rgba[0, 1:, :3] == pictures.MASKED) and not np.all(rgba[5, :, :3] == pictures.MASKED)
    run_ = live.build("flash_fwd.tiled", {"batch": 1, "heads": 1, "seq_q": 8, "seq_k": 4, "head_dim": 4})
    pic = pictures.heatmap(run_.interface, run_.case, 0)  # bottom-right causal, 8 queries on 4 keys
    assert pic["empty_rows"] == 4
    probs = live.build("attn_probs_batched.fast", {"history": 40, "positions": 10, "window": 5})
    pic = pictures.heatmap(probs.interface, probs.case, 7)
    assert (pic["height"], pic["width"]) == (10, 40) and pic["masked"] == 10 * 40 - 10 * 5


def test_a_long_causal_heatmap_is_not_dark():
    """Row 0 of a causal mask sees one key (probability 1); scaled by that, every longer row of
    S=1024 was near the bottom of the scale. The scale's top is a high percentile instead: most
    visible cells use the upper part of the colour bar, and the bar's labels say its range."""
    run_ = live.build("sdpa_arena.seed", {"batch": 1, "heads": 1, "seq_q": 1024, "seq_k": 1024, "head_dim": 16})
    pic = pictures.heatmap(run_.interface, run_.case, 0)
    assert pic["max"] == 1.0 and pic["top"] < 0.1
    rgba = np.frombuffer(base64.b64decode(pic["rgba"]), np.uint8).reshape(pic["height"], pic["width"], 4)
    lower = np.tril(np.ones((pic["height"], pic["width"]), bool))
    dark = np.array(pictures._VIRIDIS[0], np.uint8)
    far_from_dark = np.abs(rgba[..., :3].astype(int) - dark).sum(axis=2) > 120
    assert far_from_dark[lower].mean() > 0.5
    assert (pic["rows"], pic["cols"]) == (1024, 1024) and pic["ticks"][-1] == (1.0, f">= {pic['top']:.2g}")


def test_large_pictures_are_pooled_keeping_a_single_bad_element():
    a = np.zeros((2000, 64))
    b = a.copy()
    b[1234, 7] = 1.0
    pic = pictures.error_map(a, b, 1e-6)
    assert pic["height"] <= pictures.MAX_SIDE and pic["over"] == 1
    rgba = np.frombuffer(base64.b64decode(pic["rgba"]), np.uint8).reshape(pic["height"], pic["width"], 4)
    assert np.all(rgba[..., :3] == pictures.OVER, axis=2).sum() == 1


def test_identical_elements_are_drawn_apart_from_tiny_errors():
    """An error map showed |a - b| = 0 in the colour of the smallest errors (noise to the eye):
    identical elements are white, the tiniest error is the scale's dark end, and the picture
    counts them and says what its rows and columns are."""
    a = np.zeros((4, 8))
    b = a.copy()
    b[1, 2] = 1e-30  # far below the scale: the darkest colour, not white
    b[3, 5] = 1.0  # over the allowance
    pic = pictures.error_map(a, b, 1e-6, ("query", "dim"))
    rgba = np.frombuffer(base64.b64decode(pic["rgba"]), np.uint8).reshape(4, 8, 4)[..., :3]
    white = np.all(rgba == pictures.IDENTICAL, axis=2)
    assert pic["identical"] == 30 and white.sum() == 30 and not white[1, 2] and not white[3, 5]
    assert tuple(rgba[1, 2]) == tuple(pictures._VIRIDIS[0].astype(np.uint8)) and tuple(rgba[3, 5]) == pictures.OVER
    assert (pic["rows_axis"], pic["cols_axis"]) == ("query", "dim")
    assert any("identical" in what for _, what in pic["keys"]) and "30 of 32" in pic["legend"]


def test_a_decode_picture_groups_every_head_s_rows():
    """A decode head has a row per (sequence, new token): a few. The picture shows every head's,
    grouped, and names its axes."""
    run_ = live.build("paged_decode.split", {"batch": 3, "heads": 4, "heads_kv": 2, "seq_len": 30, "new_tokens": 2})
    pic = pictures.heatmap(run_.interface, run_.case, 1, run_.config.heads)
    assert pic["heads"] == [0, 1, 2, 3] and pic["rows"] == 4 * 3 * 2
    assert pic["groups"] == [(f"head {h}", 6 * h, 6 * h + 6) for h in range(4)]
    assert (pic["rows_axis"], pic["cols_axis"]) == ("sequence × new token", "cache position")
    sdpa = live.build("sdpa_arena.seed", {})
    one = pictures.heatmap(sdpa.interface, sdpa.case, 0, sdpa.config.heads)
    assert one["heads"] == [0] and one["groups"] == []  # other interfaces: the chosen head alone


def test_every_live_field_is_labelled_in_words():
    """The form shows labels, not raw names (new_tokens, seq_len, block_size were)."""
    for iface, rows in live.schema().items():
        for f in rows:
            assert "_" not in f["label"], (iface, f["name"], f["label"])


@pytest.mark.parametrize(
    "kernel, config, expected",
    [
        (
            "flash_fwd.tiled",
            {"mask": "causal"},
            "['mask'] for flash_fwd; they are fields of the configuration of sdpa_arena, not of flash_fwd",
        ),
        (
            "sdpa_arena.seed",
            {"heads_kv": 2, "window_left": 3},
            "for sdpa_arena; they are fields of the configuration of flash_fwd, paged_decode, paged_prefill, varlen_bwd, "
            "not of sdpa_arena",
        ),
        ("flash_fwd.tiled", {"mask": "causal", "heads_kv": 2}, "unknown config field(s) ['mask'] for flash_fwd; its fields: ["),
        (
            "varlen_fwd.seed",
            {"heads_kv": 2},
            "['heads_kv'] for varlen_fwd; they are fields of the configuration of attn_probs, attn_probs_batched, flash_fwd",
        ),
        ("varlen_fwd.seed", {"window_left": 3}, "unknown config field(s) ['window_left'] for varlen_fwd"),
        (
            "varlen_fwd.seed",
            {"causal_align": "bottom_right", "seq_q": 8, "seq_k": 9},
            "causal_align='bottom_right' with causal=True",
        ),
        ("flash_fwd.tiled", {"heads": 6, "heads_kv": 4}, "heads (6) must be a multiple of heads_kv (4)"),
        ("flash_fwd.tiled", {"seq_q": "many"}, "seq_q must be an integer in 1..65536, got 'many'"),
        ("flash_fwd.tiled", {"causal": "yes"}, "causal must be true or false"),
        ("flash_fwd.tiled", {"softcap": -1}, "softcap must be a finite real number >= 0"),
        ("flash_fwd.tiled", {"batch": 64, "seq_q": 4096, "seq_k": 4096}, "case too large"),
        (
            "attn_probs.seed",
            {"positions": 4},
            "['positions'] for attn_probs; they are fields of the configuration of attn_probs_batched",
        ),
        ("attn_probs_batched.fast", {"positions": 0}, "positions must be an integer in 1.."),
        ("attn_probs_batched.fast", {"positions": 300}, "positions must be an integer in 1..256"),
        ("attn_probs_batched.fast", {"scale": 0}, "scale must be a finite real number: a magnitude in"),
        ("attn_probs_batched.fast", {"scale": 1e-40}, "scale must be a finite real number: a magnitude in"),
        ("attn_probs_batched.fast", {"scale": None}, "scale must be a finite real number: a magnitude in"),
        ("flash_fwd.tiled", {"softcap": 1e-320}, "softcap must be a finite real number >= 0: 0 (off) or a value in"),
        ("flash_fwd.tiled", {"softcap": 3.5e38}, "softcap must be a finite real number >= 0: 0 (off) or a value in"),
        ("sdpa_arena.seed", {"seq_q": 60000, "seq_k": 60000, "head_dim": 1, "heads": 1}, "scores; at most"),
    ],
)
def test_bad_configurations_say_what_is_wrong(kernel, config, expected):
    """The same message from the page's Python and from the API (a 422)."""
    with pytest.raises(ValueError) as exc:
        page.prepare(json.dumps({"kernel": kernel, "config": config}))
    assert expected in str(exc.value)
    r = client.post("/api/run", json={"kernel": kernel, "config": config})
    assert r.status_code == 422
    assert expected in r.text


def test_an_unknown_kernel_is_named_by_the_page_and_listed_by_the_api():
    """The page names the id it was given; the API's request model, which chooses the
    configuration model by kernel, lists the registered ones."""
    with pytest.raises(ValueError, match="unknown kernel 'nope.seed'"):
        page.prepare(json.dumps({"kernel": "nope.seed", "config": {}}))
    r = client.post("/api/run", json={"kernel": "nope.seed", "config": {}})
    assert r.status_code == 422 and "kernel must be a registered kernel id, one of ['sdpa_arena.seed'" in r.text


def test_a_kernel_that_cannot_take_the_sizes_says_so(native_runtime):
    """A configuration valid for the interface but past a kernel's limit: the page's plan says why
    the browser cannot run it (the reference still runs), the API answers 422 with the reason."""
    config = {"head_dim": 600, "batch": 1, "seq_q": 8, "seq_k": 8}
    prepared = json.loads(page.prepare(json.dumps({"kernel": "flash_fwd.tiled", "config": config})))
    assert "flash_fwd.tiled supports head_dim <= 512, got 600" in prepared["plan"]["unavailable"]
    assert prepared["plan"]["dispatches"] == []
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled", "config": config})
    assert r.status_code == 422 and "supports head_dim <= 512" in r.json()["detail"]


def test_api_runs_any_interface_on_client_inputs(native_runtime):
    from wgattn import wire

    config = {"batch": 2, "heads": 2, "seq_q": 9, "seq_k": 11, "head_dim": 4, "padding": True}
    seeded = live.seeded_tensors("flash_fwd.tiled", config)
    assert sorted(seeded) == ["cu_seqlens_k", "cu_seqlens_q", "dout", "k", "q", "v"]
    sent = {k: wire.encode(v) for k, v in seeded.items() if v.dtype.kind == "f"}
    sent["v"] = wire.encode(np.ones_like(seeded["v"]))  # attention over ones is one (0 on empty rows)
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled", "config": config, "inputs": sent})
    assert r.status_code == 200, r.text
    out = wire.decode(r.json()["outputs"]["out"])
    lse = wire.decode(r.json()["outputs"]["lse"])
    assert np.allclose(out[np.isfinite(lse)], 1.0, atol=1e-6) and np.all(out[~np.isfinite(lse)] == 0)
    sent["cu_seqlens_q"] = wire.encode(seeded["cu_seqlens_q"])
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled", "config": config, "inputs": sent})
    assert r.status_code == 422 and "unknown inputs ['cu_seqlens_q']" in r.text


def test_bench_import_checks_records():
    old = {
        "op": "fwd",
        "impl": "torch.sdpa",
        "shape": [1, 8, 1024, 64],
        "causal": True,
        "dtype": "f16",
        "adapter": "NVIDIA H100 80GB HBM3",
        "median_ms": 0.05,
        "tflops": 170.0,
        "runs": 10,
        "timer": "gpu",
    }
    # Records from before the measurement protocol: read, and marked as not warmed (no spread known).
    (got,) = json.loads(page.bench_import(json.dumps([old])))["bench"]
    assert set(got) == set(bench.Record.__dataclass_fields__)
    assert got["rounds"] == 10 and got["warmed"] is False and got["spread"] == 0 and got["runtime"] == "native"
    assert got["q1_ms"] == got["median_ms"] == 0.05 and got["mode"] == "" and got["flags"] == []
    now = dict(got, impl="flash_fwd.blocked", mode="trusted", config="BR=64 BC=32 WG=128", warmed=True, spread=0.01)
    assert json.loads(page.bench_import(json.dumps([now]))) == {"bench": [now], "bandwidth": []}  # read as they are
    # JSON Lines (bench/history's files) read the same
    assert json.loads(page.bench_import(json.dumps(now) + "\n" + json.dumps(now) + "\n"))["bench"] == [now, now]
    for bad, expected in [
        ("[]", "non-empty list"),
        ("nope", "not JSON"),
        (json.dumps([dict(now, mode=3)]), "mode must be a string"),
        (json.dumps([dict(now, extra=1)]), "expected the fields"),
        (json.dumps([dict(old, op="mul")]), "op must be one of"),
        (json.dumps([dict(old, shape=[1, 2])]), "shape must be 4 positive integers"),
        (json.dumps([{"op": "fwd"}]), "expected the fields"),
        (json.dumps([dict(now, spread=-1)]), "spread must be a finite number >= 0"),
        (json.dumps([dict(now, warmed="yes")]), "warmed must be true or false"),
        (json.dumps([dict(now, flags="--x")]), "flags must be a list of strings"),
        (json.dumps([{k: v for k, v in old.items() if k != "runs"}]), "number of rounds is missing"),
    ]:
        with pytest.raises(ValueError, match=expected):
            page.bench_import(bad)


def test_heatmaps_of_large_cases_stay_within_memory():
    """Pictures compute at most MAX_CELLS probabilities and say what they left out."""
    for kernel, config in [
        ("flash_fwd.tiled", {"batch": 1, "heads": 1, "seq_q": 4096, "seq_k": 4096, "head_dim": 4}),
        ("flash_fwd.tiled", {"batch": 64, "heads": 1, "seq_q": 300, "seq_k": 300, "head_dim": 4}),
        ("sdpa_arena.seed", {"batch": 4, "heads": 1, "seq_q": 2048, "seq_k": 2048, "head_dim": 4}),
    ]:
        run_ = live.build(kernel, config)
        p, visible, layout = run_.interface.probabilities(run_.case, 0, pictures.MAX_CELLS)
        assert p.size <= pictures.MAX_CELLS and p.shape == visible.shape and "fit" in layout, (config, p.shape)
        pic = pictures.heatmap(run_.interface, run_.case, 0)
        assert max(pic["width"], pic["height"]) <= pictures.MAX_SIDE
