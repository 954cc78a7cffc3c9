"""Brute-force and property tests for wgattn.reference (NumPy only).

The oracles here are plain Python loops over scalars (math.fsum, math.exp) on
small shapes, written from the contract in docs/contract.md rather than from
reference.py.  Runs on CPython 3.8+ with NumPy 1.17+ (also inside Pyodide).
"""

from __future__ import annotations

import ast
import glob
import math
import os
import re

import numpy as np
import pytest

from wgattn import reference as ref

# ---------------------------------------------------------------------------
# plain-Python oracles
# ---------------------------------------------------------------------------


def visible(i, j, len_q, len_k, causal, window, align):
    """Is key j visible to query i (both local to one sequence)?"""
    left, right = window
    offset = len_k - len_q if align == "bottom_right" else 0
    if causal and j > i + offset:
        return False
    if left != -1 and j < i + offset - left:
        return False
    if right != -1 and j > i + offset + right:
        return False
    return 0 <= j < len_k


def dot(a, b):
    return math.fsum(x * y for x, y in zip(a, b))


def softmax_rows(scores):
    """scores: list of (index, value) -> (list of (index, prob), lse)."""
    if not scores:
        return [], -math.inf
    m = max(s for _, s in scores)
    w = [(j, math.exp(s - m)) for j, s in scores]
    z = math.fsum(x for _, x in w)
    return [(j, x / z) for j, x in w], m + math.log(z)


def brute_varlen_fwd(q, k, v, cu_q, cu_k, causal=False, scale=None, window=(-1, -1), softcap=0.0, causal_align="bottom_right"):
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    ql, kl, vl = q.tolist(), k.tolist(), v.tolist()
    out = [[[0.0] * d for _ in range(hq)] for _ in range(total_q)]
    lse = [[-math.inf] * hq for _ in range(total_q)]
    for b in range(len(cu_q) - 1):
        len_q = cu_q[b + 1] - cu_q[b]
        len_k = cu_k[b + 1] - cu_k[b]
        for i in range(len_q):
            t = cu_q[b] + i
            for h in range(hq):
                g = h // group
                scores = []
                for j in range(len_k):
                    if not visible(i, j, len_q, len_k, causal, window, causal_align):
                        continue
                    s = scale * dot(ql[t][h], kl[cu_k[b] + j][g])
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    scores.append((j, s))
                probs, row_lse = softmax_rows(scores)
                lse[t][h] = row_lse
                for e in range(d):
                    out[t][h][e] = math.fsum(p * vl[cu_k[b] + j][g][e] for j, p in probs)
    return np.array(out, dtype=np.float64).reshape(q.shape), np.array(lse).reshape(total_q, hq)


def brute_probs(q, k_hist, pos, window=0, scale=1.0):
    hq, d = q.shape
    n, hkv, _ = k_hist.shape
    group = hq // hkv
    earliest = max(0, pos + 1 - window) if window else 0
    ql, kl = q.tolist(), k_hist.tolist()
    probs = [[0.0] * n for _ in range(hq)]
    for h in range(hq):
        scores = [(t, scale * dot(ql[h], kl[t][h // group])) for t in range(earliest, pos + 1)]
        for t, p in softmax_rows(scores)[0]:
            probs[h][t] = p
    return np.array(probs)


def brute_sdpa_bhsd(q, k, v, mask=None, causal=False, window=None, scale=None):
    bsz, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if mask is None:
        full = np.ones((bsz, hq, sq, sk), dtype=bool)
    else:
        full = np.broadcast_to(np.asarray(mask), (bsz, hq, sq, sk))
    fl = full.tolist()
    left, right = window if window is not None else (-1, -1)
    ql, kl, vl = q.tolist(), k.tolist(), v.tolist()
    out = np.zeros(q.shape)
    for b in range(bsz):
        for h in range(hq):
            g = h // group
            for i in range(sq):
                scores = []
                for j in range(sk):
                    if not fl[b][h][i][j]:
                        continue
                    if causal and j > i:
                        continue
                    if left != -1 and j < i - left:
                        continue
                    if right != -1 and j > i + right:
                        continue
                    scores.append((j, scale * dot(ql[b][h][i], kl[b][g][j])))
                probs = softmax_rows(scores)[0]
                for e in range(d):
                    out[b, h, i, e] = math.fsum(p * vl[b][g][j][e] for j, p in probs)
    return out


def cu_from_lens(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return cu


def make_varlen(seed, lens_q, lens_k, hq, hkv, d, mag=1.0):
    rs = np.random.RandomState(seed)
    q = rs.standard_normal((sum(lens_q), hq, d)) * mag
    k = rs.standard_normal((sum(lens_k), hkv, d)) * mag
    v = rs.standard_normal((sum(lens_k), hkv, d))
    return q, k, v, cu_from_lens(lens_q), cu_from_lens(lens_k)


def assert_lse_equal(got, want, atol=1e-12):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape
    inf_w = np.isneginf(want)
    assert np.array_equal(np.isneginf(got), inf_w), "lse -inf pattern differs"
    np.testing.assert_allclose(got[~inf_w], want[~inf_w], rtol=1e-12, atol=atol)


# ---------------------------------------------------------------------------
# varlen forward against the brute-force oracle
# ---------------------------------------------------------------------------

# id -> (lens_q, lens_k, Hq, Hkv, D, causal, window, softcap, scale)
VARLEN_CASES = {
    "mha_full": ([3, 4], [3, 4], 2, 2, 4, False, (-1, -1), 0.0, None),
    "gqa3_causal_unequal": ([2, 5], [4, 3], 6, 2, 3, True, (-1, -1), 0.0, None),
    "all_to_one_causal": ([4, 1], [2, 6], 4, 1, 5, True, (-1, -1), 0.0, None),
    "empty_seqs_first_last": ([0, 3, 0, 2, 0], [2, 0, 2, 3, 0], 3, 3, 4, True, (-1, -1), 0.0, None),
    "empty_batch_all_zero": ([0, 0], [0, 0], 2, 1, 3, False, (-1, -1), 0.0, None),
    "lq_gt_lk_causal": ([5], [3], 2, 1, 3, True, (-1, -1), 0.0, None),
    "lq_lt_lk_causal": ([3], [5], 2, 2, 3, True, (-1, -1), 0.0, None),
    "window_left0": ([4, 3], [4, 5], 2, 1, 3, False, (0, -1), 0.0, None),
    "window_right0": ([4, 3], [4, 5], 2, 1, 3, False, (-1, 0), 0.0, None),
    "window_left_only": ([5, 3], [5, 6], 3, 1, 3, False, (2, -1), 0.0, None),
    "window_right_only": ([5, 3], [5, 6], 3, 3, 3, False, (-1, 2), 0.0, None),
    "window_both_0_0": ([5, 4], [3, 6], 2, 2, 3, False, (0, 0), 0.0, None),
    "window_1_1_lq_gt_lk": ([5], [3], 2, 1, 4, False, (1, 1), 0.0, None),
    "window_causal_2_1": ([6, 2], [6, 5], 6, 2, 3, True, (2, 1), 0.0, None),
    "window_excludes_rows": ([6], [2], 2, 2, 3, False, (0, 0), 0.0, None),
    "softcap": ([4, 3], [5, 3], 3, 1, 4, False, (-1, -1), 0.7, 2.0),
    "softcap_causal_gqa": ([3, 4], [3, 6], 4, 2, 4, True, (1, -1), 5.0, None),
    "negative_scale": ([3], [4], 2, 2, 3, False, (-1, -1), 0.0, -0.75),
}

ALIGNS = ["bottom_right", "top_left"]


@pytest.mark.parametrize("align", ALIGNS)
@pytest.mark.parametrize("name", sorted(VARLEN_CASES))
def test_varlen_fwd_matches_brute_force(name, align):
    lens_q, lens_k, hq, hkv, d, causal, window, softcap, scale = VARLEN_CASES[name]
    q, k, v, cu_q, cu_k = make_varlen(len(name), lens_q, lens_k, hq, hkv, d, mag=1.5)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(
            q,
            k,
            v,
            np.array(cu_q, dtype=np.int32),
            np.array(cu_k, dtype=np.int64),
            causal=causal,
            scale=scale,
            window=window,
            softcap=softcap,
            causal_align=align,
        )
    want_out, want_lse = brute_varlen_fwd(q, k, v, cu_q, cu_k, causal, scale, window, softcap, align)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    assert out.shape == q.shape and lse.shape == (q.shape[0], hq)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-13)
    assert_lse_equal(lse, want_lse)
    assert not np.isnan(out).any() and not np.isnan(lse).any()


def test_rows_without_keys_give_zero_out_and_neg_inf_lse():
    # seq 0: q 5 x k 3, bottom-right causal -> rows 0 and 1 see nothing
    # seq 1: q 2 x k 0 -> both rows see nothing; seq 2 empty
    q, k, v, cu_q, cu_k = make_varlen(7, [5, 2, 0], [3, 0, 0], 4, 2, 3)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True)
    empty_rows = [0, 1, 5, 6]
    assert np.all(out[empty_rows] == 0.0)
    assert np.all(np.isneginf(lse[empty_rows]))
    assert np.all(np.isfinite(lse[[2, 3, 4]]))


def test_visible_keys_match_lse_exactly_by_construction():
    # lse is log(sum(exp(visible scores))): check against a direct formula.
    q, k, v, cu_q, cu_k = make_varlen(3, [4], [6], 2, 2, 3)
    out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, window=(1, 1), causal_align="top_left", scale=0.5)
    for i in range(4):
        for h in range(2):
            js = [j for j in range(6) if i - 1 <= j <= i + 1]
            s = [0.5 * float(np.dot(q[i, h], k[j, h])) for j in js]
            assert abs(lse[i, h] - math.log(math.fsum(math.exp(x) for x in s))) < 1e-12


def test_large_scores_are_stable():
    q, k, v, cu_q, cu_k = make_varlen(11, [4, 3], [5, 3], 2, 1, 4, mag=30.0)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True)
    want_out, want_lse = brute_varlen_fwd(q, k, v, cu_q, cu_k, causal=True)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(lse))
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)


def test_gqa_equals_repeated_kv_heads():
    q, k, v, cu_q, cu_k = make_varlen(5, [3, 4], [5, 2], 6, 2, 4)
    out_g, lse_g = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True)
    k_rep = np.repeat(k, 3, axis=1)
    v_rep = np.repeat(v, 3, axis=1)
    out_m, lse_m = ref.varlen_attention_fwd(q, k_rep, v_rep, cu_q, cu_k, causal=True)
    np.testing.assert_allclose(out_g, out_m, rtol=1e-13, atol=1e-14)
    assert_lse_equal(lse_g, lse_m)


def test_varlen_equals_per_sequence_calls():
    q, k, v, cu_q, cu_k = make_varlen(6, [3, 0, 4], [2, 3, 5], 2, 1, 3)
    out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True, window=(2, -1))
    for b in range(3):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        o1, l1 = ref.varlen_attention_fwd(
            q[qs], k[ks], v[ks], [0, cu_q[b + 1] - cu_q[b]], [0, cu_k[b + 1] - cu_k[b]], causal=True, window=(2, -1)
        )
        np.testing.assert_array_equal(o1, out[qs])
        np.testing.assert_array_equal(l1, lse[qs])


def test_inputs_are_not_modified_and_lists_accepted():
    q, k, v, cu_q, cu_k = make_varlen(8, [3], [3], 2, 2, 2)
    copies = [x.copy() for x in (q, k, v)]
    out, lse = ref.varlen_attention_fwd(q.tolist(), k.tolist(), v.tolist(), cu_q, cu_k, causal=True)
    for a, b in zip((q, k, v), copies):
        np.testing.assert_array_equal(a, b)
    out2, _ = ref.varlen_attention_fwd(q, k, v, np.array(cu_q, dtype=np.uint32), cu_k, causal=True)
    np.testing.assert_array_equal(out, out2)


# ---------------------------------------------------------------------------
# backward: structural checks (finite differences and torch are elsewhere)
# ---------------------------------------------------------------------------


def test_bwd_zero_for_rows_and_keys_without_attention():
    q, k, v, cu_q, cu_k = make_varlen(9, [5, 2], [3, 0], 4, 2, 3)
    rs = np.random.RandomState(1)
    dout = rs.standard_normal(q.shape)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True, window=(0, -1))
        dq, dk, dv, _ = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, causal=True, window=(0, -1))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    # bottom-right causal 5x3 with left=0: rows 0,1 see nothing; rows 2..4 see
    # exactly one key each, so the softmax is constant and dq = 0 everywhere
    # (exactly on the empty rows, up to rounding on the others).
    assert np.all(dq[[0, 1, 5, 6]] == 0.0)
    assert np.abs(dq).max() < 1e-13
    assert not np.isnan(dk).any() and not np.isnan(dv).any()
    # dv of key j = sum of dout of the rows that see it (probability 1).
    np.testing.assert_allclose(dv[0], dout[2].reshape(2, 2, 3).sum(axis=1), rtol=1e-13)


def test_bwd_accepts_flash_attention_style_inf_lse_for_empty_rows():
    # FlashAttention-2 stores +inf as the lse of a row with no visible key; the
    # backward treats any non-finite lse row as contributing nothing.
    q, k, v, cu_q, cu_k = make_varlen(19, [4, 3], [2, 3], 2, 1, 3)
    dout = np.random.RandomState(6).standard_normal(q.shape)
    out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True)
    assert np.isneginf(lse).any()
    lse_fa = np.where(np.isneginf(lse), np.inf, lse)
    with np.errstate(all="raise"):
        a = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, causal=True)
        b = ref.varlen_attention_bwd(dout, q, k, v, out, lse_fa, cu_q, cu_k, causal=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_bwd_linear_in_dout_and_dv_sums_probabilities():
    q, k, v, cu_q, cu_k = make_varlen(10, [4], [4], 2, 1, 3)
    out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True)
    ones = np.ones(q.shape)
    _, _, dv, _ = ref.varlen_attention_bwd(ones, q, k, v, out, lse, cu_q, cu_k, causal=True)
    # with dout = 1, dv[j, :, e] = sum over rows and heads of P[row, j]; the
    # total over keys is (#rows * #heads)
    np.testing.assert_allclose(dv[:, 0, 0].sum(), 4 * 2, rtol=1e-13)


# ---------------------------------------------------------------------------
# attention_probs
# ---------------------------------------------------------------------------

# id -> (history_len, Hq, Hkv, D, pos, window, scale)
PROBS_CASES = {
    "unbounded_last": (7, 2, 2, 4, 6, 0, 1.0),
    "unbounded_first": (7, 2, 1, 4, 0, 0, 1.0),
    "window1_only_self": (6, 3, 1, 3, 4, 1, 1.0),
    "window3_mid": (9, 6, 2, 3, 5, 3, 1.0),
    "window_larger_than_pos": (9, 4, 4, 3, 1, 5, 1.0),
    "window_equals_pos_plus_1": (9, 4, 2, 3, 4, 5, 1.0),
    "history_1": (1, 2, 1, 5, 0, 0, 1.0),
    "scaled_gqa3": (8, 6, 2, 4, 7, 4, 0.3),
    "odd_history": (13, 3, 3, 2, 9, 0, 1.0),
}


@pytest.mark.parametrize("name", sorted(PROBS_CASES))
def test_attention_probs_matches_brute_force(name):
    n, hq, hkv, d, pos, window, scale = PROBS_CASES[name]
    rs = np.random.RandomState(len(name))
    q = rs.standard_normal((hq, d))
    k_hist = rs.standard_normal((n, hkv, d))
    with np.errstate(all="raise"):
        probs = ref.attention_probs(q, k_hist, pos=pos, window=window, scale=scale)
    want = brute_probs(q, k_hist, pos, window, scale)
    assert probs.shape == (hq, n) and probs.dtype == np.float64
    np.testing.assert_allclose(probs, want, rtol=1e-12, atol=1e-15)
    earliest = pos + 1 - window if (window != 0 and pos + 1 >= window) else 0
    invisible = [t for t in range(n) if not earliest <= t <= pos]
    assert np.all(probs[:, invisible] == 0.0)
    assert np.all(probs[:, earliest : pos + 1] > 0.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-13)


def test_attention_probs_default_scale_is_unscaled():
    rs = np.random.RandomState(2)
    q = rs.standard_normal((2, 4))
    k_hist = rs.standard_normal((5, 2, 4))
    p_default = ref.attention_probs(q, k_hist, pos=4)
    p_one = ref.attention_probs(q, k_hist, pos=4, scale=1.0)
    p_none = ref.attention_probs(q, k_hist, pos=4, scale=None)
    p_half = ref.attention_probs(q, k_hist, pos=4, scale=0.5)
    np.testing.assert_array_equal(p_default, p_one)
    np.testing.assert_allclose(p_none, p_half, rtol=1e-13)  # 1/sqrt(4) = 0.5


def test_attention_probs_agrees_with_varlen_last_row():
    rs = np.random.RandomState(4)
    q_all = rs.standard_normal((6, 4, 3))
    k = rs.standard_normal((6, 2, 3))
    v = rs.standard_normal((6, 2, 3))
    out, _ = ref.varlen_attention_fwd(q_all, k, v, [0, 6], [0, 6], causal=True, window=(2, -1), scale=1.0)
    probs = ref.attention_probs(q_all[4], k, pos=4, window=3)
    want = np.einsum("ht,thd->hd", probs, np.repeat(v, 2, axis=1))
    np.testing.assert_allclose(out[4], want, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# sdpa
# ---------------------------------------------------------------------------


def make_sdpa(seed, bsz, hq, hkv, sq, sk, d):
    rs = np.random.RandomState(seed)
    return (
        rs.standard_normal((bsz, hq, sq, d)),
        rs.standard_normal((bsz, hkv, sk, d)),
        rs.standard_normal((bsz, hkv, sk, d)),
        rs,
    )


# id -> (B, Hq, Hkv, Sq, Sk, D, mask kind, causal, window)
SDPA_CASES = {
    "plain": (2, 2, 2, 3, 4, 3, None, False, None),
    "causal_sq_lt_sk": (1, 3, 1, 3, 5, 3, None, True, None),
    "causal_sq_gt_sk": (1, 2, 2, 5, 3, 3, None, True, None),
    "gqa3_padding_mask": (2, 6, 2, 4, 4, 2, "padding", False, None),
    "full_4d_mask_with_empty_rows": (2, 4, 1, 3, 4, 3, "full", False, None),
    "mask_broadcast_heads": (2, 2, 1, 3, 3, 3, "b1qk", True, None),
    "window_seed_c_style": (1, 2, 2, 6, 6, 3, None, True, (2, 0)),
    "window_both_sides": (1, 2, 1, 5, 7, 2, None, False, (1, 2)),
    "window_causal_and_mask": (2, 2, 2, 5, 5, 3, "padding", True, (1, -1)),
    "all_masked": (1, 2, 2, 2, 3, 3, "none_visible", False, None),
    "window_excludes_rows": (1, 1, 1, 5, 2, 2, None, False, (0, 0)),
    "sk_zero": (1, 2, 1, 3, 0, 2, None, False, None),
}


def sdpa_mask(kind, rs, bsz, hq, sq, sk):
    if kind is None:
        return None
    if kind == "padding":  # [B, 1, 1, Sk]: last keys of batch 1 are padding
        m = np.ones((bsz, 1, 1, sk), dtype=bool)
        m[-1, :, :, sk - 2 :] = False
        return m
    if kind == "full":
        m = rs.rand(bsz, hq, sq, sk) > 0.5
        m[0, 1, 2, :] = False
        m[1, 0, 0, :] = False
        return m
    if kind == "b1qk":
        return rs.rand(bsz, 1, sq, sk) > 0.3
    if kind == "none_visible":
        return np.zeros((sk,), dtype=bool)
    raise AssertionError(kind)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name", sorted(SDPA_CASES))
def test_sdpa_matches_brute_force(name, layout):
    bsz, hq, hkv, sq, sk, d, kind, causal, window = SDPA_CASES[name]
    q, k, v, rs = make_sdpa(len(name), bsz, hq, hkv, sq, sk, d)
    mask = sdpa_mask(kind, rs, bsz, hq, sq, sk)
    want = brute_sdpa_bhsd(q, k, v, mask, causal, window)
    if layout == "bshd":
        args = [x.transpose(0, 2, 1, 3).copy() for x in (q, k, v)]
    else:
        args = [q, k, v]
    with np.errstate(all="raise"):
        out = ref.sdpa(*args, mask=mask, causal=causal, window=window, layout=layout)
    if layout == "bshd":
        out = out.transpose(0, 2, 1, 3)
    assert out.shape == q.shape and out.dtype == np.float64
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


def test_sdpa_fully_masked_rows_are_zero():
    q, k, v, rs = make_sdpa(1, 2, 2, 2, 3, 4, 3)
    mask = np.ones((2, 2, 3, 4), dtype=bool)
    mask[1, 0, 1, :] = False
    with np.errstate(all="raise"):
        out = ref.sdpa(q, k, v, mask=mask)
    assert np.all(out[1, 0, 1] == 0.0)
    assert np.all(out[0] != 0.0)


def test_sdpa_layouts_agree():
    q, k, v, rs = make_sdpa(3, 2, 6, 3, 5, 4, 3)
    mask = rs.rand(2, 1, 5, 4) > 0.4
    a = ref.sdpa(q, k, v, mask=mask, causal=True, window=(1, -1), scale=0.4)
    b = ref.sdpa(*[x.transpose(0, 2, 1, 3) for x in (q, k, v)], mask=mask, causal=True, window=(1, -1), scale=0.4, layout="bshd")
    assert b.shape == (2, 5, 6, 3)
    np.testing.assert_array_equal(a, b.transpose(0, 2, 1, 3))


def test_sdpa_equals_varlen_top_left():
    q, k, v, rs = make_sdpa(4, 2, 4, 2, 3, 5, 3)
    out = ref.sdpa(q, k, v, causal=True, window=(1, -1))
    qv = q.transpose(0, 2, 1, 3).reshape(6, 4, 3)
    kv_k = k.transpose(0, 2, 1, 3).reshape(10, 2, 3)
    kv_v = v.transpose(0, 2, 1, 3).reshape(10, 2, 3)
    o2, _ = ref.varlen_attention_fwd(qv, kv_k, kv_v, [0, 3, 6], [0, 5, 10], causal=True, window=(1, -1), causal_align="top_left")
    np.testing.assert_allclose(out.transpose(0, 2, 1, 3).reshape(6, 4, 3), o2, rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------------------
# dtypes: float32 mode, float16 inputs
# ---------------------------------------------------------------------------


def test_float32_mode_varlen_returns_float32_close_to_float64():
    q, k, v, cu_q, cu_k = make_varlen(12, [7, 9], [9, 6], 4, 2, 16)
    dout = np.random.RandomState(3).standard_normal(q.shape)
    kw = dict(causal=True, window=(4, -1), softcap=3.0, alibi_slopes=[0.5, 0.25, 0.125, 0.0625], sinks=[0.0, 1.0, 2.0, -1.0])
    with np.errstate(all="raise"):
        o64, l64 = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, **kw)
        o32, l32 = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, dtype=np.float32, **kw)
        g64 = ref.varlen_attention_bwd(dout, q, k, v, o64, l64, cu_q, cu_k, **kw)
        g32 = ref.varlen_attention_bwd(dout, q, k, v, o32, l32, cu_q, cu_k, dtype=np.float32, **kw)
    assert o32.dtype == np.float32 and l32.dtype == np.float32
    err = float(np.abs(o32 - o64).max())
    assert 0.0 < err < 1e-5
    np.testing.assert_allclose(l32, l64, rtol=1e-5, atol=1e-5)
    for a, b in zip(g32, g64):
        assert a.dtype == np.float32
        assert 0.0 < float(np.abs(a - b).max()) < 1e-4


def test_float32_mode_probs_and_sdpa():
    rs = np.random.RandomState(13)
    q = rs.standard_normal((4, 8))
    k_hist = rs.standard_normal((11, 2, 8))
    p32 = ref.attention_probs(q, k_hist, pos=9, window=6, dtype=np.float32)
    p64 = ref.attention_probs(q, k_hist, pos=9, window=6)
    assert p32.dtype == np.float32
    np.testing.assert_allclose(p32, p64, rtol=1e-5, atol=1e-6)
    assert np.all(p32[:, :4] == 0) and np.all(p32[:, 10:] == 0)
    qq, kk, vv, _ = make_sdpa(14, 1, 2, 1, 6, 7, 8)
    s32 = ref.sdpa(qq, kk, vv, causal=True, dtype="float32")
    s64 = ref.sdpa(qq, kk, vv, causal=True)
    assert s32.dtype == np.float32
    np.testing.assert_allclose(s32, s64, rtol=1e-5, atol=1e-6)


def test_float32_mode_empty_rows():
    q, k, v, cu_q, cu_k = make_varlen(15, [4, 2], [2, 0], 2, 1, 3)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, causal=True, dtype=np.float32)
    assert np.all(out[[0, 1, 4, 5]] == 0) and np.all(np.isneginf(lse[[0, 1, 4, 5]]))
    assert lse.dtype == np.float32


def test_float16_and_float32_inputs_accepted():
    q, k, v, cu_q, cu_k = make_varlen(16, [3], [4], 2, 2, 4)
    o64, _ = ref.varlen_attention_fwd(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), cu_q, cu_k)
    assert o64.dtype == np.float64
    want, _ = brute_varlen_fwd(
        q.astype(np.float16).astype(np.float64),
        k.astype(np.float16).astype(np.float64),
        v.astype(np.float16).astype(np.float64),
        cu_q,
        cu_k,
    )
    np.testing.assert_allclose(o64, want, rtol=1e-12, atol=1e-14)
    o32, _ = ref.varlen_attention_fwd(q.astype(np.float32), k, v, cu_q, cu_k, dtype=np.float32)
    assert o32.dtype == np.float32


# ---------------------------------------------------------------------------
# no NaN / no warnings for finite inputs, including all-masked rows
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_no_nan_or_fp_errors_anywhere(dtype):
    dt = np.dtype(dtype)
    q, k, v, cu_q, cu_k = make_varlen(17, [0, 6, 3, 0], [4, 2, 0, 3], 4, 1, 3, mag=10.0)
    dout = np.random.RandomState(5).standard_normal(q.shape)
    with np.errstate(all="raise"):
        for align in ALIGNS:
            for window in [(-1, -1), (0, 0), (1, -1), (-1, 1), (3, 2)]:
                for softcap in [0.0, 2.0]:
                    kw = dict(causal=True, window=window, softcap=softcap, causal_align=align, dtype=dt)
                    out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, **kw)
                    grads = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, **kw)
                    assert not np.isnan(out).any() and not np.isnan(lse).any()
                    assert not np.isposinf(lse).any()
                    for g in grads:
                        assert np.all(np.isfinite(g))
        qq, kk, vv, _ = make_sdpa(18, 1, 2, 2, 3, 4, 3)
        out = ref.sdpa(qq * 50, kk, vv, mask=np.zeros((1, 1, 3, 4), dtype=bool), dtype=dt)
        assert np.all(out == 0)
        p = ref.attention_probs(qq[0, :, 0] * 100, kk[0].transpose(1, 0, 2), pos=2, dtype=dt)
        assert np.all(np.isfinite(p))


# ---------------------------------------------------------------------------
# Python 3.8 / NumPy 1.17 compatibility of the sources
# ---------------------------------------------------------------------------


def _sources():
    here = os.path.dirname(os.path.abspath(__file__))
    files = [ref.__file__]
    files += sorted(glob.glob(os.path.join(here, "test_reference*.py")))
    return files


@pytest.mark.parametrize("path", _sources(), ids=os.path.basename)
def test_sources_parse_as_python_3_8(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    ast.parse(src, filename=path, feature_version=(3, 8))


# Names that appeared after Python 3.8 / NumPy 1.17 and must not be used.
_NEWER_APIS = [
    r"\.removeprefix\(",
    r"\.removesuffix\(",
    r"functools\.cache\b",
    r"math\.lcm",
    r"math\.nextafter",
    r"sliding_window_view",
    r"default_rng",
    r"\bzip\([^)]*strict=",
    r"\bcopy=None\b",
    r"np\.unstack",
    r"np\.concat\(",
    r"np\.trapezoid",
    r"np\.bool\b",
    r"np\.long\b",
    r"np\.astype\(",
    r"\bmatch \w+:",
]


@pytest.mark.parametrize("path", _sources(), ids=os.path.basename)
def test_sources_avoid_newer_apis(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    this = os.path.abspath(__file__)
    if os.path.abspath(path) == this:
        src = src.split("_NEWER_APIS = [")[0]
    for pat in _NEWER_APIS:
        assert re.search(pat, src) is None, "%s uses %s" % (os.path.basename(path), pat)


# ---------------------------------------------------------------------------
# the ASCII masks drawn in the docstrings and in docs/contract.md are right
# ---------------------------------------------------------------------------

_MASK_HEAD = re.compile(
    r"mask: len_q=(\d+) len_k=(\d+) causal=(True|False) window=\((-?\d+), (-?\d+)\) "
    r"align=(bottom_right|top_left)"
)
_VIS_HEAD = re.compile(r"visible: history_len=(\d+) pos=(\d+) window=(\d+)")
_DECODE_HEAD = re.compile(r"decode: seq_len=(\d+) new=(\d+) window_left=(-?\d+)")
_ALIBI_HEAD = re.compile(_MASK_HEAD.pattern.replace("mask:", "alibi:"))


def _check_drawings(text, where):
    lines = text.splitlines()
    found = 0
    for n, line in enumerate(lines):
        m = _MASK_HEAD.search(line)
        if m:
            len_q, len_k = int(m.group(1)), int(m.group(2))
            causal = m.group(3) == "True"
            window = (int(m.group(4)), int(m.group(5)))
            rows = lines[n + 2 : n + 2 + len_q]
            for i, row in enumerate(rows):
                cells = row.split()
                assert cells[0] == "q%d" % i, (where, line, row)
                got = [c == "1" for c in cells[1:]]
                want = [visible(i, j, len_q, len_k, causal, window, m.group(6)) for j in range(len_k)]
                assert got == want, (where, line, row)
            found += 1
        m = _ALIBI_HEAD.search(line)
        if m:  # the ALiBi bias in slopes, -|j - (i + offset)|, on visible keys; "." on masked ones
            len_q, len_k = int(m.group(1)), int(m.group(2))
            causal, window, align = m.group(3) == "True", (int(m.group(4)), int(m.group(5))), m.group(6)
            distance = ref.seq_distance(len_q, len_k, align)
            for i, row in enumerate(lines[n + 2 : n + 2 + len_q]):
                cells = row.split()
                assert cells[0] == "q%d" % i, (where, line, row)
                want = [str(-distance[i, j]) if visible(i, j, len_q, len_k, causal, window, align) else "." for j in range(len_k)]
                assert cells[1:] == want, (where, line, row)
            found += 1
        m = _VIS_HEAD.search(line)
        if m:
            hist, pos, window = int(m.group(1)), int(m.group(2)), int(m.group(3))
            earliest = max(0, pos + 1 - window) if window else 0
            cells = lines[n + 2].split()
            assert cells[0] == "vis"
            assert [c == "1" for c in cells[1:]] == [earliest <= t <= pos for t in range(hist)]
            found += 1
        m = _DECODE_HEAD.search(line)
        if m:  # decode_attention: new token i at pos = seq_len - new + i sees pos - window_left .. pos
            seq_len, new, wl = (int(x) for x in m.groups())
            for i, row in enumerate(lines[n + 2 : n + 2 + new]):
                cells = row.split()
                assert cells[0] == "q%d" % i, (where, line, row)
                pos = seq_len - new + i
                want = [j <= pos and (wl < 0 or j >= pos - wl) for j in range(seq_len)]
                assert [c == "1" for c in cells[1:]] == want, (where, line, row)
            found += 1
    return found


def test_docstring_drawings_are_correct():
    found = 0
    for fn in (ref.varlen_attention_fwd, ref.attention_probs, ref.sdpa, ref.decode_attention):
        found += _check_drawings(fn.__doc__, fn.__name__)
    assert found >= 11


def test_contract_doc_drawings_are_correct():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, os.pardir, "docs", "contract.md")
    if not os.path.exists(path):
        pytest.skip("docs/contract.md is not shipped alongside the tests here")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert _check_drawings(text, "contract.md") >= 11


def test_public_api_and_docstrings():
    assert sorted(ref.__all__) == sorted(
        ["varlen_attention_fwd", "varlen_attention_bwd", "attention_probs", "attention_probs_batched", "sdpa", "decode_attention"]
    )
    assert ref.__doc__
    for name in ref.__all__:
        doc = getattr(ref, name).__doc__
        assert doc and "Returns" in doc and "dtype" in doc
