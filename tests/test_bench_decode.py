"""bench/decode_bandwidth.py, the GPU benchmark of the decode kernels, runs end to end on whatever
adapter is here (shrunk cases, --smoke): it checks each output against the float64 reference
before timing it, times one interleaved series per case by wgattn.protocol, and its records carry
the bandwidth figures the H100 run reports."""

import json

import numpy as np

from bench import decode_bandwidth
from wgattn.interfaces.paged_decode import bytes_touched


def _dst_after(runtime, plan, src: np.ndarray) -> np.ndarray:
    """A stream plan run with `src` in its first buffer: its "dst" buffer as u32 words."""
    from dataclasses import replace

    from wgattn.plan import Output

    plan.buffers[0].data = src.tobytes()
    i = next(i for i, b in enumerate(plan.buffers) if b.name == "dst")
    plan.buffers[i] = replace(plan.buffers[i], read=True)
    plan.outputs = [Output("dst", "dst", 0, (plan.buffers[i].size // 4,), "uint32")]
    return runtime.run(plan).outputs["dst"]


def test_cases_start_with_the_target_and_count_their_bytes():
    target = decode_bandwidth.cases()[0]
    assert (target.batch, target.heads_q, target.heads_kv, target.head_dim, target.seq_len) == (8, 32, 8, 128, 32768)
    assert (target.new_tokens, target.cache) == (1, "f16")
    assert decode_bandwidth.bytes_touched(target) == 2 * 8 * 32768 * 8 * 128 * 2  # K and V, once each
    x = decode_bandwidth.inputs(decode_bandwidth.cases()[0].__class__("tiny", 2, 4, 2, 8, 37, 1, 16, "f16"))
    assert x["k_cache"].dtype.name == "float16" and x["block_table"].shape == (2, 3)
    assert sorted(x["block_table"].ravel().tolist()) == list(range(6))  # every block once, shuffled


def test_smoke_run_records_checked_figures(native_runtime, tmp_path):
    out = tmp_path / "decode.json"
    decode_bandwidth.main(
        ["--smoke", "--case", "target", "--modes", "trusted", "--sweep", "2", "--rounds", "5", "--warm", "0", "--json", str(out)]
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    copy = [r for r in records if r["kind"] == "copy" and r["impl"] == "wgsl.copy"]
    decode = [r for r in records if r["kind"] == "decode" and r["impl"].startswith("paged_decode.split")]
    assert copy and copy[0]["gbps"] > 0 and copy[0]["rounds"] == 5
    (rule,) = [r for r in decode if r["rule"]]
    assert rule["mode"] == "trusted" and rule["gbps"] > 0 and rule["median_ms"] > 0 and rule["q1_ms"] <= rule["q3_ms"]
    assert [r["splits"] for r in decode if not r["rule"]] == [2]  # the sweep, in the same series
    assert rule["bytes"] == bytes_touched([700, 700], -1, 1, 8, 128, 2)


def test_the_stream_kernel_copies_every_byte_and_the_read_writes_nothing(native_runtime):
    """The copy a decode kernel is compared with moves exactly its bytes, a ragged tail included
    (not a whole step of 8 vec4s an invocation); the read-only stream leaves dst as it was."""
    from wgattn.interfaces.paged_decode_bench import stream_plan

    nbytes = 16 * (256 * 8 * 3 + 37)
    src = np.random.default_rng(1).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    for write in (True, False):
        got = _dst_after(native_runtime, stream_plan(nbytes, write=write), src)
        np.testing.assert_array_equal(got, src if write else np.zeros(4, np.uint32))
