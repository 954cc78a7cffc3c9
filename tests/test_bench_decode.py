"""bench/decode_bandwidth.py, the GPU benchmark of the decode kernels, runs end to end on whatever
adapter is here (shrunk cases, --smoke): it checks each output against the float64 reference
before timing it, times one interleaved series per case by wgattn.protocol, and its records carry
the bandwidth figures the H100 run reports."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from wgattn.interfaces.paged_decode import bytes_touched

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str = "decode_bandwidth"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


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
    bench = _script()
    target = bench.cases()[0]
    assert (target.batch, target.heads_q, target.heads_kv, target.head_dim, target.seq_len) == (8, 32, 8, 128, 32768)
    assert (target.new_tokens, target.cache) == (1, "f16")
    assert bench.bytes_touched(target) == 2 * 8 * 32768 * 8 * 128 * 2  # K and V, once each
    x = bench.inputs(bench.cases()[0].__class__("tiny", 2, 4, 2, 8, 37, 1, 16, "f16"))
    assert x["k_cache"].dtype.name == "float16" and x["block_table"].shape == (2, 3)
    assert sorted(x["block_table"].ravel().tolist()) == list(range(6))  # every block once, shuffled


def test_smoke_run_records_checked_figures(native_runtime, tmp_path):
    out = tmp_path / "decode.json"
    _script().main(
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


def test_every_phase_variant_applies_to_the_kernel():
    """bench/decode_phases.py edits the kernel's text: each variant must still find what it edits."""
    phases = _script("decode_phases")
    text = (ROOT / "shaders" / phases.SHADER).read_text()
    for name in phases.VARIANTS:
        assert phases.variant(text, name) != text, name


def test_phases_smoke_times_variants_shapes_and_splits_in_one_series(native_runtime, capsys):
    phases = _script("decode_phases")
    args = ["--smoke", "--shapes", "64x4", "--variants", "no exps", "--splits", "2", "--rounds", "5", "--warm", "0"]
    assert phases.main(args) == 0
    table = capsys.readouterr().out.split("% of the WGSL copy")[-1]
    rows = [line.split()[0:3] for line in table.splitlines() if "ms" in line]
    assert [r[0] for r in rows][:4] == ["kernel", "no", "kernel", "wgsl.copy"], table
    assert "splits=2" in table and "NS 2]" in table and "KPG 4" in table


def test_the_stream_kernel_copies_every_byte_and_the_read_writes_nothing(native_runtime):
    """The copy a decode kernel is compared with moves exactly its bytes, a ragged tail included
    (not a whole step of 8 vec4s an invocation); the read-only stream leaves dst as it was."""
    from wgattn.interfaces.paged_decode_bench import stream_plan

    nbytes = 16 * (256 * 8 * 3 + 37)
    src = np.random.default_rng(1).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    for write in (True, False):
        got = _dst_after(native_runtime, stream_plan(nbytes, write=write), src)
        np.testing.assert_array_equal(got, src if write else np.zeros(4, np.uint32))


def test_read_ceiling_smoke_records_every_stream(native_runtime, tmp_path):
    out = tmp_path / "read.jsonl"
    assert _script("read_ceiling").main(["--mb", "1", "--rounds", "5", "--warm", "0", "--json", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    names = [r["impl"] for r in records if r["impl"].startswith("wgsl.")]
    streams = [f"wgsl.{kind} PER={p}" for kind in ("copy", "read") for p in (1, 2, 4, 8, 16)]
    paged = [f"wgsl.read paged, {order} PER={p}" for order in ("shuffled", "in order") for p in (4, 8)]
    assert names == streams + paged
    assert all(r["gbps"] > 0 and r["rounds"] == 5 for r in records)


def test_the_paged_read_takes_whole_blocks_in_the_tables_order(native_runtime):
    """The paged read ceiling reads every byte of K's and V's blocks once, each block through the
    table: gathered (WRITE), block e of each half is block table[e] of the source; the read alone
    writes nothing."""
    read_ceiling = _script("read_ceiling")
    block_bytes, table = 16 * 256 * 2, np.array([3, 0, 4, 1, 2])
    src = np.random.default_rng(2).integers(0, 2**32, 2 * len(table) * block_bytes // 4, dtype=np.uint32)
    want = src.reshape(2, len(table), -1)[:, table].ravel()
    for write in (True, False):
        got = _dst_after(native_runtime, read_ceiling.paged_plan(table, block_bytes, per=2, write=write), src)
        np.testing.assert_array_equal(got, want if write else np.zeros(4, np.uint32))


def test_phases_times_a_template_at_its_own_split_count_on_blocks_in_order(native_runtime, capsys):
    phases = _script("decode_phases")
    template = f"{ROOT / 'shaders' / phases.SHADER}+no exps@NS=3"
    args = ["--smoke", "--sequential", "--shapes", "64x4", "--variants", "", "--template", template]
    args += ["--rounds", "5", "--warm", "0"]
    assert phases.main(args) == 0
    table = capsys.readouterr().out.split("% of the WGSL copy")[-1]
    assert "no exps@NS=3 [WG 64 KPG 4 RB 4 NS 3]" in table, table
