"""One rule for every accepted request, through real HTTP: the answer is within the tolerance of the
float64 reference on the inputs as sent, or the request is refused with a 422 that says what
range the kernel accepts (wgattn.ranges; Interface.check_range, which every entry point plans
through). Per class: values a float16 kernel cannot hold, parameters and input magnitudes whose
float32 arithmetic would overflow (scores, sums of values, gradients), and the largest accepted
values of each, answered right."""

import numpy as np
import pytest
from real_server import post

from bench.demo import start
from wgattn import conformance, interfaces, live, registry, tolerance, wire

DECODE = {"batch": 2, "heads": 2, "heads_kv": 1, "seq_len": 40, "head_dim": 16, "block_size": 16}
PREFILL = dict(DECODE, new_tokens=20)
FLASH = {"batch": 1, "heads": 2, "seq_q": 8, "seq_k": 8, "head_dim": 8}
PROBS = {"heads": 2, "heads_kv": 1, "history": 16, "head_dim": 8, "positions": 4}
SDPA = {"batch": 1, "heads": 1, "seq_q": 8, "seq_k": 8, "head_dim": 8, "mask": "none"}


@pytest.fixture(scope="module")
def server(native_runtime, tmp_path_factory):
    with start(tmp_path_factory.mktemp("ranges")) as s:
        yield s.url


def seeded(kernel, config):
    """The configuration's float tensors, as a client would replace them."""
    return {n: a for n, a in live.seeded_tensors(kernel, config).items() if a.dtype.kind == "f"}


def send(url, kernel, config, tensors):
    inputs = {n: wire.encode(a) for n, a in tensors.items()}
    return post(url, {"kernel": kernel, "config": config, "inputs": inputs}, timeout=3600)


def assert_right(kernel_id, config, tensors, body):
    """Every output against the float64 reference on the inputs as sent, allowed the tolerance
    rule's multiple of the naive run in the kernel's precision (an f16 kernel's on its inputs
    rounded to f16) on the same inputs; the allowance is finite (the check can fail)."""
    kernel = registry.load().kernel(kernel_id)
    iface = interfaces.of(kernel)
    cfg = live.make_config(iface, config)
    sent = iface.live_case(cfg, live.check_tensors(cfg.tensors(), tensors), "sent")
    ref = iface.reference(sent)
    naive = iface.reference(conformance.judged_case(kernel, sent), dtype=np.float16 if kernel.precision == "f16" else np.float32)
    for name, want in ref.items():
        got = wire.decode(body["outputs"][name])
        allowed = tolerance.allowance(tolerance.max_abs_err(naive[name], want), want)
        assert np.isfinite(allowed), (name, allowed)
        err = tolerance.max_abs_err(got, want)
        assert err <= allowed, f"{kernel_id} {name}: max abs error {err:.3g} over {allowed:.3g}"


def scaled_to(a, largest):
    return (a / np.abs(a).max() * largest).astype(np.float32)


@pytest.mark.parametrize("cache", ["k_cache", "v_cache"])
@pytest.mark.parametrize("kernel, config", [("paged_decode.split_f16", DECODE), ("paged_prefill.tiled_f16", PREFILL)])
def test_a_float16_cache_past_65504_is_refused(server, cache, kernel, config):
    t = seeded(kernel, config)
    t[cache] = t[cache] * np.float32(70000)
    status, body, _ = send(server, kernel, config, t)
    assert status == 422, body
    f32 = kernel.replace("_f16", "")  # the float32 kernel the refusal points to
    assert f"accepts max|{cache}| <= 65504" in body["detail"] and f32 in body["detail"]


def test_a_float16_cache_at_65504_is_right(server):
    t = seeded("paged_decode.split_f16", DECODE)
    t["k_cache"], t["v_cache"] = scaled_to(t["k_cache"], 65504), scaled_to(t["v_cache"], 65504)
    status, body, _ = send(server, "paged_decode.split_f16", DECODE, t)
    assert status == 200, body
    assert_right("paged_decode.split_f16", DECODE, t, body)


def test_values_a_float16_forward_sums_past_its_range_are_refused_and_its_largest_is_right(server):
    """flash_fwd.tiled_f16 sums four p * v in float16 (p <= 1): |v| up to 65504 / 4."""
    t = seeded("flash_fwd.tiled_f16", FLASH)
    t["v"] = t["v"] * np.float32(70000)
    status, body, _ = send(server, "flash_fwd.tiled_f16", FLASH, t)
    assert status == 422, body
    assert "accepts max|v| <= 16376" in body["detail"] and "flash_fwd.tiled" in body["detail"]
    t["v"] = scaled_to(t["v"], 16376)
    status, body, _ = send(server, "flash_fwd.tiled_f16", FLASH, t)
    assert status == 200, body
    assert_right("flash_fwd.tiled_f16", FLASH, t, body)


def test_a_scale_whose_scores_overflow_float32_is_refused_and_a_large_one_is_right(server):
    config = dict(PROBS, scale=3.4028e38)  # inside the schema: a normal float32
    status, body, _ = send(server, "attn_probs_batched.fast", config, {})
    assert status == 422, body
    assert "the scores" in body["detail"] and "accepts |scale| <=" in body["detail"]
    config = dict(PROBS, scale=1e30)
    status, body, _ = send(server, "attn_probs_batched.fast", config, {})
    assert status == 200, body
    assert_right("attn_probs_batched.fast", config, seeded("attn_probs_batched.fast", config), body)


# A backward recomputes P from the float32 lse it is given: its scores stay under 2^24
# (wgattn.ranges.RECOMPUTED), so its largest slopes are smaller.
@pytest.mark.parametrize(
    "kernel, config, large",
    [
        ("paged_decode.split", DECODE, -1e30),
        ("paged_prefill.tiled", PREFILL, -1e30),
        ("flash_fwd.tiled", FLASH, -1e30),
        ("varlen_bwd.tiled", FLASH, -1e5),
    ],
)
def test_alibi_slopes_whose_bias_overflows_float32_are_refused_and_large_ones_are_right(server, kernel, config, large):
    config = dict(config, alibi=True)
    t = seeded(kernel, config)
    t["alibi_slopes"] = np.full_like(t["alibi_slopes"], -3.4028e38)
    status, body, _ = send(server, kernel, config, t)
    assert status == 422, body
    assert "accepts |alibi_slopes| <=" in body["detail"]
    t["alibi_slopes"] = np.full_like(t["alibi_slopes"], large)
    status, body, _ = send(server, kernel, config, t)
    assert status == 200, body
    assert_right(kernel, config, t, body)


def test_inputs_whose_scores_overflow_float32_are_refused_and_large_ones_are_right(server):
    t = seeded("sdpa_arena.seed", SDPA)
    big = {"q": t["q"] * np.float32(1e19), "k": t["k"] * np.float32(1e19)}
    status, body, _ = send(server, "sdpa_arena.seed", SDPA, big)
    assert status == 422, body
    assert "the scores" in body["detail"] and "max ||q_i|| * max ||k_j|| <=" in body["detail"]
    large = {"q": t["q"] * np.float32(1e17), "k": t["k"] * np.float32(1e17)}
    status, body, _ = send(server, "sdpa_arena.seed", SDPA, large)
    assert status == 200, body
    assert_right("sdpa_arena.seed", SDPA, large, body)


def test_values_whose_running_sum_overflows_float32_are_refused_and_large_ones_are_right(server):
    """out sums up to seq_k (8) weights <= 1 times v before it divides."""
    t = seeded("flash_fwd.tiled", FLASH)
    status, body, _ = send(server, "flash_fwd.tiled", FLASH, {"v": scaled_to(t["v"], 3e37)})
    assert status == 422, body
    assert "out's running sum" in body["detail"] and "accepts max|v| <=" in body["detail"]
    large = {"v": scaled_to(t["v"], 1e36)}
    status, body, _ = send(server, "flash_fwd.tiled", FLASH, large)
    assert status == 200, body
    assert_right("flash_fwd.tiled", FLASH, large, body)


def test_gradients_that_overflow_float32_are_refused_and_large_ones_are_right(server):
    t = seeded("varlen_bwd.tiled", FLASH)
    status, body, _ = send(server, "varlen_bwd.tiled", FLASH, {"dout": scaled_to(t["dout"], 1e36)})
    assert status == 422, body
    assert "the gradients" in body["detail"] and "accepts max ||dout_i|| <=" in body["detail"]
    large = {"dout": scaled_to(t["dout"], 1e30)}
    status, body, _ = send(server, "varlen_bwd.tiled", FLASH, large)
    assert status == 200, body
    assert_right("varlen_bwd.tiled", FLASH, large, body)


def test_a_null_scale_is_refused(server):
    status, body, _ = post(server, {"kernel": "attn_probs_batched.fast", "config": dict(PROBS, scale=None)})
    assert status == 422, body
    assert "scale must be a finite real number" in str(body)
