"""Tests for wgattn.reference.decode_attention (NumPy only).

The oracle is a plain Python loop over scalars (math.fsum, math.exp) written from the contract in
docs/contract.md: each key found through the block table one at a time, the sink added to the
denominator by hand. Cross-checks tie the paged decode to the contract's other functions (the
cache gathered into one sequence is varlen_attention_fwd, bottom-right causal). The drawings of
visible keys are checked with the others' (test_reference.py). `paged` builds the scattered
caches the decode tests share. Runs on CPython 3.8+ with NumPy 1.17+ and pytest 3.6+ (also inside
Pyodide).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wgattn import reference as ref


def paged(rs, lens, sq, hq, hkv, d, block_size, spare_blocks=3, fill=-1):
    """Random q and a paged cache for sequences of `lens` tokens: each sequence's blocks are
    scattered over the cache in a shuffled order; unused block-table entries hold `fill`."""
    need = [-(-n // block_size) for n in lens]
    num_blocks = sum(need) + spare_blocks
    order = rs.permutation(num_blocks)
    max_blocks = max(need + [1]) + 1
    table = np.full((len(lens), max_blocks), fill, dtype=np.int32)
    at = 0
    for b, k in enumerate(need):
        table[b, :k] = order[at : at + k]
        at += k
    q = rs.standard_normal((len(lens), sq, hq, d))
    k_cache = rs.standard_normal((num_blocks, block_size, hkv, d))
    v_cache = rs.standard_normal((num_blocks, block_size, hkv, d))
    return q, k_cache, v_cache, table, np.array(lens, dtype=np.int32)


def brute_decode(q, k_cache, v_cache, table, lens, scale=None, window_left=-1, softcap=0.0, alibi=None, sinks=None):
    """(out, lse) by loops over scalars, every key looked up through the block table."""
    bsz, sq, hq, d = q.shape
    _, bs, hkv, _ = k_cache.shape
    group = hq // hkv
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    out = np.zeros(q.shape)
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(bsz):
        n = int(lens[b])
        for i in range(sq):
            pos = n - sq + i
            for h in range(hq):
                g = h // group
                logits = []
                for j in range(n):
                    if j > pos or (window_left >= 0 and j < pos - window_left):
                        continue
                    blk = int(table[b][j // bs])
                    k = k_cache[blk][j % bs][g]
                    s = sc * math.fsum(float(x) * float(y) for x, y in zip(q[b, i, h], k))
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    if alibi is not None:
                        s += float(alibi[h]) * (j - pos)
                    logits.append((j, s))
                top = max([s for _, s in logits] + ([float(sinks[h])] if sinks is not None else []), default=None)
                if top is None:
                    continue  # nothing visible, no sink: out 0, lse -inf
                w = [(j, math.exp(s - top)) for j, s in logits]
                z = math.fsum([x for _, x in w] + ([math.exp(float(sinks[h]) - top)] if sinks is not None else []))
                for j, x in w:
                    out[b, i, h] += (x / z) * v_cache[int(table[b][j // bs])][j % bs][g]
                lse[b, i, h] = top + math.log(z)
    return out, lse


def check_close(got, want, tol=1e-12):
    assert got.shape == want.shape
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    assert np.all(np.isfinite(got) == finite)
    if finite.any():
        assert float(np.abs(got[finite] - want[finite]).max()) < tol


# id -> (lens, Sq_new, Hq, Hkv, D, block_size, options)
BRUTE_CASES = {
    "one-token-mha": ([7, 1], 1, 2, 2, 5, 4, {}),
    "gqa4-five-new-mid-block": ([13, 6], 5, 8, 2, 3, 4, {}),
    "mqa-window-left2": ([11], 3, 3, 1, 4, 3, {"window_left": 2}),
    "window-left0-sees-itself": ([9, 4], 2, 2, 1, 3, 4, {"window_left": 0}),
    "softcap-alibi": ([10], 2, 4, 2, 3, 4, {"softcap": 2.0, "alibi": [0.5, 0.25, 0.125, 0.0625]}),
    "sinks-idle-slot": ([0, 6, 0, 9], 2, 4, 4, 3, 2, {"sinks": [0.5, -1.0, 3.0, 0.0]}),
    "everything-block1": ([8, 3], 3, 6, 2, 4, 1, {"window_left": 3, "softcap": 4.0, "alibi": [0.3] * 6, "sinks": [1.0] * 6}),
    "idle-slot-no-sink": ([0, 5], 1, 2, 1, 3, 4, {}),
    "scale-negative": ([6], 2, 2, 2, 4, 4, {"scale": -0.7}),
    # chunked prefill: more new tokens than a decoding step has, a whole prompt among them
    "prefill-whole-prompt-idle": ([20, 0, 35], 20, 4, 2, 3, 4, {"sinks": [0.5, -1.0, 3.0, 0.0]}),
    "prefill-window-alibi-block1": ([40, 25], 25, 2, 1, 3, 1, {"window_left": 6, "alibi": [0.25, 0.5]}),
}


@pytest.mark.parametrize("name", sorted(BRUTE_CASES))
def test_matches_brute_force_loops(name):
    lens, sq, hq, hkv, d, bs, opts = BRUTE_CASES[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    q, kc, vc, table, sl = paged(rs, lens, sq, hq, hkv, d, bs)
    kw = dict(scale=opts.get("scale"), window_left=opts.get("window_left", -1), softcap=opts.get("softcap", 0.0))
    alibi, sinks = opts.get("alibi"), opts.get("sinks")
    with np.errstate(all="raise", under="ignore"):
        out, lse = ref.decode_attention(q, kc, vc, table, sl, alibi_slopes=alibi, sinks=sinks, **kw)
    want_out, want_lse = brute_decode(q, kc, vc, table, sl, alibi=alibi, sinks=sinks, **kw)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    check_close(out, want_out)
    check_close(lse, want_lse)


def test_scores_taken_in_row_chunks_change_nothing(monkeypatch):
    """A long prefill's scores are taken a chunk of new tokens at a time (each row's softmax is
    its own): chunks of 7 rows give the same output as one chunk (to float64's rounding: BLAS
    may sum a product of other shapes in another order)."""
    rs = np.random.RandomState(4)
    q, kc, vc, table, sl = paged(rs, [90, 61, 0], 61, 6, 2, 5, 8)
    kw = dict(window_left=30, softcap=3.0, alibi_slopes=np.linspace(0.1, 0.6, 6), sinks=np.linspace(-1, 1, 6))
    whole = ref.decode_attention(q, kc, vc, table, sl, **kw)
    monkeypatch.setattr(ref, "_CHUNK_SCORES", 3 * 7 * 90)  # G * rows * n: 7 new tokens a chunk of the first sequence
    chunked = ref.decode_attention(q, kc, vc, table, sl, **kw)
    for a, b in zip(whole, chunked):
        check_close(b, a, 1e-13)


def test_idle_slot_gives_zero_and_minus_inf_or_the_sink():
    rs = np.random.RandomState(1)
    q, kc, vc, table, sl = paged(rs, [0, 5, 0], 2, 4, 2, 8, 4)
    out, lse = ref.decode_attention(q, kc, vc, table, sl)
    assert np.all(out[[0, 2]] == 0.0) and np.all(np.isneginf(lse[[0, 2]]))
    assert np.all(np.isfinite(lse[1]))
    sinks = np.array([0.5, -2.0, 7.0, 0.0])
    out, lse = ref.decode_attention(q, kc, vc, table, sl, sinks=sinks)
    assert np.all(out[[0, 2]] == 0.0)
    assert np.array_equal(lse[0], np.broadcast_to(sinks, (2, 4)))


def test_is_varlen_forward_on_the_gathered_cache():
    """Gather each sequence's keys through its block table into one packed sequence: decode is
    varlen_attention_fwd with causal bottom-right alignment and window (window_left, -1), the same
    ALiBi slopes and sinks."""
    rs = np.random.RandomState(2)
    lens, sq, hq, hkv, d, bs = [37, 16, 50], 5, 6, 2, 7, 16
    q, kc, vc, table, sl = paged(rs, lens, sq, hq, hkv, d, bs)
    slopes, sinks = 2.0 ** -np.arange(1, hq + 1), rs.standard_normal(hq) * 2
    for wl, cap, alibi, sink in [(-1, 0.0, None, None), (9, 0.0, slopes, None), (0, 3.0, None, sinks), (20, 5.0, slopes, sinks)]:
        heads = dict(alibi_slopes=alibi, sinks=sink)
        out, lse = ref.decode_attention(q, kc, vc, table, sl, window_left=wl, softcap=cap, **heads)
        k = np.concatenate([kc[table[b, : -(-n // bs)]].reshape(-1, hkv, d)[:n] for b, n in enumerate(lens)])
        v = np.concatenate([vc[table[b, : -(-n // bs)]].reshape(-1, hkv, d)[:n] for b, n in enumerate(lens)])
        cu_q = np.arange(len(lens) + 1) * sq
        cu_k = np.concatenate([[0], np.cumsum(lens)])
        want_out, want_lse = ref.varlen_attention_fwd(
            q.reshape(-1, hq, d), k, v, cu_q, cu_k, causal=True, window=(wl, -1), softcap=cap, **heads
        )
        check_close(out.reshape(-1, hq, d), want_out, 1e-13)
        check_close(lse.reshape(-1, hq), want_lse, 1e-13)


def test_one_new_token_is_attention_probs_times_v():
    """Sq_new = 1: the probabilities are attention_probs' at pos = seq_len - 1 (its window counts
    the current key: window = window_left + 1)."""
    rs = np.random.RandomState(3)
    q, kc, vc, table, sl = paged(rs, [21], 1, 4, 2, 6, 8)
    n = 21
    k = kc[table[0, :3]].reshape(-1, 2, 6)[:n]
    v = vc[table[0, :3]].reshape(-1, 2, 6)[:n]
    for wl in (-1, 0, 5, 30):
        out, _ = ref.decode_attention(q, kc, vc, table, sl, window_left=wl, scale=0.4)
        p = ref.attention_probs(q[0, 0], k, pos=n - 1, window=0 if wl < 0 else wl + 1, scale=0.4)
        want = np.einsum("ht,thd->hd", p, np.repeat(v, 2, axis=1))
        check_close(out[0, 0], want, 1e-13)


def test_sink_joins_the_denominator_only():
    rs = np.random.RandomState(4)
    q, kc, vc, table, sl = paged(rs, [12, 30], 3, 4, 1, 5, 4)
    out0, lse0 = ref.decode_attention(q, kc, vc, table, sl)
    sinks = np.array([0.0, 1.5, -3.0, 10.0])
    out, lse = ref.decode_attention(q, kc, vc, table, sl, sinks=sinks)
    want_lse = np.logaddexp(lse0, sinks)
    check_close(lse, want_lse, 1e-13)
    check_close(out, out0 * np.exp(lse0 - want_lse)[..., None], 1e-13)
    # a sink far below every score changes nothing; one far above takes all the weight
    out, lse = ref.decode_attention(q, kc, vc, table, sl, sinks=np.full(4, -1e30))
    check_close(out, out0, 1e-15)
    out, lse = ref.decode_attention(q, kc, vc, table, sl, sinks=np.full(4, 1e30))
    assert np.all(out == 0.0) and np.all(lse == 1e30)


def test_window_left_zero_returns_the_own_value():
    rs = np.random.RandomState(5)
    q, kc, vc, table, sl = paged(rs, [9], 4, 2, 2, 3, 4)
    out, lse = ref.decode_attention(q, kc, vc, table, sl, window_left=0, alibi_slopes=[2.0, 0.5])
    for i in range(4):
        pos = 9 - 4 + i
        own_v = vc[table[0, pos // 4], pos % 4]  # [Hkv, D]
        own_k = kc[table[0, pos // 4], pos % 4]
        assert np.array_equal(out[0, i], own_v)
        check_close(lse[0, i], np.einsum("hd,hd->h", q[0, i], own_k) / math.sqrt(3), 1e-14)


def test_pages_can_move_and_spare_entries_hold_anything():
    """The same tokens in other blocks (the table updated) give the same bits; entries past a
    sequence's last block are never read, whatever they hold."""
    rs = np.random.RandomState(6)
    q, kc, vc, table, sl = paged(rs, [19, 4], 2, 4, 2, 5, 8, fill=-1)
    out, lse = ref.decode_attention(q, kc, vc, table, sl, window_left=7, alibi_slopes=[0.1] * 4, sinks=[0.2] * 4)
    perm = rs.permutation(kc.shape[0])
    inv = np.argsort(perm)
    moved = np.where(table >= 0, inv[np.maximum(table, 0)], 2**31 - 1)  # spare entries: int32 max
    out2, lse2 = ref.decode_attention(q, kc[perm], vc[perm], moved, sl, window_left=7, alibi_slopes=[0.1] * 4, sinks=[0.2] * 4)
    assert np.array_equal(out, out2) and np.array_equal(lse, lse2)


def test_float32_mode_is_float32_throughout_and_close():
    rs = np.random.RandomState(7)
    q, kc, vc, table, sl = paged(rs, [40, 0, 17], 4, 8, 2, 16, 16)
    kw = dict(window_left=11, softcap=6.0, alibi_slopes=np.linspace(0.0, 1.0, 8), sinks=np.linspace(-1, 1, 8))
    out64, lse64 = ref.decode_attention(q, kc, vc, table, sl, **kw)
    out32, lse32 = ref.decode_attention(q, kc, vc, table, sl, dtype=np.float32, **kw)
    assert out32.dtype == np.float32 and lse32.dtype == np.float32
    assert 0 < float(np.abs(out32 - out64).max()) < 1e-5
    check_close(lse32.astype(np.float64), lse64, 1e-5)
    # a float16 cache is read as it is
    out16, _ = ref.decode_attention(q, kc.astype(np.float16), vc.astype(np.float16), table, sl, **kw)
    assert 1e-5 < float(np.abs(out16 - out64).max()) < 1e-2


def test_no_floating_point_errors_on_extreme_scores():
    rs = np.random.RandomState(8)
    q, kc, vc, table, sl = paged(rs, [33, 0], 3, 2, 1, 4, 8)
    with np.errstate(all="raise", under="ignore"):
        for dt in (np.float64, np.float32):
            for sinks in (None, [1e30, -1e30]):
                out, lse = ref.decode_attention(q * 300, kc, vc, table, sl, alibi_slopes=[50.0, -50.0], sinks=sinks, dtype=dt)
                assert not np.isnan(out).any() and not np.isnan(lse).any() and not np.isposinf(lse).any()


# ---------------------------------------------------------------------------
# errors: ValueError naming the argument
# ---------------------------------------------------------------------------

RS = np.random.RandomState(9)
EQ, EK, EV, ET, EL = paged(RS, [6, 0, 9], 2, 4, 2, 3, 4)


def call(**over):
    args = dict(q=EQ, k_cache=EK, v_cache=EV, block_table=ET, seq_lens=EL)
    kw = {name: val for name, val in over.items() if name not in args}
    args.update((name, val) for name, val in over.items() if name in args)
    return ref.decode_attention(args["q"], args["k_cache"], args["v_cache"], args["block_table"], args["seq_lens"], **kw)


def _table(**at):
    t = ET.copy()
    for key, val in at.items():
        b, i = (int(x) for x in key[1:].split("_"))
        t[b, i] = val
    return t


ERRORS = [
    (dict(q=EQ[0]), r"q must be 4-D with shape \[B, Sq_new, Hq, D\]"),
    (dict(q=EQ.astype(np.int32)), r"q must be a float16, float32 or float64 array"),
    (dict(q=np.zeros((3, 0, 4, 3))), r"q must hold at least one new token per sequence"),
    (
        dict(q=np.zeros((3, 2, 4, 0)), k_cache=np.zeros((5, 4, 2, 0)), v_cache=np.zeros((5, 4, 2, 0))),
        r"q head dim D must be >= 1",
    ),
    (dict(k_cache=EK[..., :2]), r"k_cache head dim must equal q head dim 3"),
    (dict(v_cache=EV[:-1]), r"v_cache must have k_cache's shape"),
    (dict(k_cache=EK[:0], v_cache=EV[:0]), r"k_cache must hold at least one block"),
    (
        dict(k_cache=EK[:, :, :1].repeat(3, axis=2), v_cache=EV[:, :, :1].repeat(3, axis=2)),
        r"q heads \(4\) must be a multiple of k_cache heads \(3\)",
    ),
    (dict(block_table=ET[0]), r"block_table must be 2-D with shape \[B, max_blocks\]"),
    (dict(block_table=ET[:2]), r"block_table must have one row per sequence, B = q.shape\[0\] = 3"),
    (dict(block_table=ET.astype(np.float32)), r"block_table must be an integer \(int32\) array"),
    (dict(block_table=ET.astype(np.int64) + 2**31), r"block_table must hold int32 values"),
    (dict(seq_lens=EL[:2]), r"seq_lens must have one entry per sequence"),
    (dict(seq_lens=EL.reshape(3, 1)), r"seq_lens must be 1-D with shape \[B\]"),
    (dict(seq_lens=[6.0, 0.0, 9.0]), r"seq_lens must be an integer \(int32\) array"),
    (
        dict(seq_lens=[1, 0, 9]),
        r"seq_lens\[0\] must be 0 \(an idle slot\) or in \[Sq_new, max_blocks \* block_size\] = \[2, 16\]",
    ),
    (
        dict(seq_lens=[6, 0, 17]),
        r"seq_lens\[2\] must be 0 \(an idle slot\) or in \[Sq_new, max_blocks \* block_size\] = \[2, 16\]",
    ),
    (dict(seq_lens=[6, -2, 9]), r"seq_lens\[1\] must be 0"),
    (dict(block_table=_table(t2_2=-1)), r"block_table\[2, 2\] = -1 is out of range \[0, num_blocks\) = \[0, 8\); sequence 2"),
    (dict(block_table=_table(t0_1=8)), r"block_table\[0, 1\] = 8 is out of range"),
    (dict(window_left=-2), r"window_left must be an integer >= -1"),
    (dict(window_left=2.0), r"window_left must be an integer >= -1"),
    (dict(window_left=True), r"window_left must be an integer >= -1"),
    (dict(softcap=-1.0), r"softcap must be a finite real number >= 0"),
    (dict(scale=0.0), r"scale must be None or a finite nonzero real number"),
    (dict(scale=1e-40), r"scale must be None or a finite nonzero real number"),
    (dict(alibi_slopes=[0.1] * 3), r"alibi_slopes must have one value per query head, shape \[Hq\] = \(4,\)"),
    (dict(alibi_slopes=[[0.1] * 4]), r"alibi_slopes must be 1-D"),
    (dict(alibi_slopes=[0.1, np.nan, 0.1, 0.1]), r"alibi_slopes\[1\] must be finite and representable in float32"),
    (dict(alibi_slopes=[0.1, 0.1, 0.1, 1e39]), r"alibi_slopes\[3\] must be finite and representable in float32"),
    (dict(alibi_slopes=np.arange(4)), r"alibi_slopes must be a float16, float32 or float64 array"),
    (dict(sinks=[0.0] * 5), r"sinks must have one value per query head"),
    (dict(sinks=[0.0, 0.0, -np.inf, 0.0]), r"sinks\[2\] must be finite and representable in float32"),
    (dict(dtype=np.float16), r"dtype must be np.float32 or np.float64"),
]


@pytest.mark.parametrize("over, match", ERRORS, ids=[m for _, m in ERRORS])
def test_bad_arguments_raise_value_error_naming_them(over, match):
    with pytest.raises(ValueError, match=match):
        call(**over)


def test_spare_table_entries_and_an_idle_slot_are_not_checked():
    t = ET.copy()
    t[0, 2:] = 2**31 - 1  # after sequence 0's two blocks
    t[1, :] = -5  # an idle slot uses no block
    out, lse = call(block_table=t)
    want_out, want_lse = call()
    assert np.array_equal(out, want_out) and np.array_equal(lse, want_lse)


def test_check_decode_args_gives_the_resolved_values():
    a = ref.check_decode_args(EQ, EK, EV, ET, EL, window_left=3, sinks=np.float32([1, 2, 3, 4]))
    assert a.scale == 1.0 / math.sqrt(3) and a.window_left == 3 and a.softcap == 0.0
    assert a.seq_lens == (6, 0, 9) and a.block_table.dtype == np.int64 and a.alibi_slopes is None
    assert a.sinks.dtype == np.float64 and list(a.sinks) == [1.0, 2.0, 3.0, 4.0]
