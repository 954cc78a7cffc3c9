"""Tests for wgattn.reference.attention_probs_batched (NumPy only).

The oracle is a plain Python loop over scalars (math.fsum, math.exp) written from the contract in
docs/contract.md: for each query row, the keys earliest(p) .. p of its position p are visible.
Runs on CPython 3.8+ with NumPy 1.17+ and pytest 3.6+ (also inside Pyodide).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from wgattn import reference as ref


def earliest_key(pos, window):
    return pos + 1 - window if (window != 0 and pos + 1 >= window) else 0


def brute_probs_batched(q, k_hist, positions, window=0, scale=1.0):
    """[n_pos, Hq, history_len] by loops over scalars."""
    n_pos, hq, d = q.shape
    n, hkv, _ = k_hist.shape
    group = hq // hkv
    ql, kl = q.tolist(), k_hist.tolist()
    out = np.zeros((n_pos, hq, n))
    for i, pos in enumerate(positions):
        lo = earliest_key(int(pos), window)
        for h in range(hq):
            scores = [(t, scale * math.fsum(a * b for a, b in zip(ql[i][h], kl[t][h // group]))) for t in range(lo, int(pos) + 1)]
            m = max(s for _, s in scores)
            w = [(t, math.exp(s - m)) for t, s in scores]
            z = math.fsum(x for _, x in w)
            for t, x in w:
                out[i, h, t] = x / z
    return out


# id -> (history_len, n_pos, Hq, Hkv, D, positions, window, scale)
CASES = {
    "one_key": (1, 1, 1, 1, 1, [0], 0, 1.0),
    "tail_unbounded": (9, 4, 2, 2, 3, [5, 6, 7, 8], 0, 1.0),
    "any_order_repeats": (9, 6, 4, 2, 3, [8, 0, 4, 4, 0, 8], 0, 1.0),
    "window1_only_self": (7, 3, 3, 1, 4, [0, 3, 6], 1, 1.0),
    "window3": (10, 4, 6, 2, 2, [9, 1, 2, 5], 3, 1.0),
    "window_larger_than_pos": (6, 3, 2, 1, 3, [0, 2, 5], 9, 1.0),
    "window_equals_pos_plus_1": (8, 2, 2, 2, 3, [4, 7], 5, 1.0),
    "scaled_mqa": (8, 3, 4, 1, 5, [7, 3, 5], 4, 0.3),
    "negative_scale": (5, 2, 2, 2, 2, [4, 2], 0, -1.5),
    "scale_none": (6, 2, 2, 1, 4, [5, 1], 2, None),
}


def _draw(name, history_len, n_pos, hq, hkv, d):
    rs = np.random.RandomState(len(name) + 7 * n_pos)
    return rs.standard_normal((n_pos, hq, d)), rs.standard_normal((history_len, hkv, d))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_brute_force(name):
    n, n_pos, hq, hkv, d, positions, window, scale = CASES[name]
    q, k_hist = _draw(name, n, n_pos, hq, hkv, d)
    with np.errstate(all="raise"):
        probs = ref.attention_probs_batched(q, k_hist, positions, window=window, scale=scale)
    eff_scale = 1.0 / math.sqrt(d) if scale is None else scale
    want = brute_probs_batched(q, k_hist, positions, window, eff_scale)
    assert probs.shape == (n_pos, hq, n) and probs.dtype == np.float64
    np.testing.assert_allclose(probs, want, rtol=1e-12, atol=1e-15)
    for i, pos in enumerate(positions):
        lo = earliest_key(pos, window)
        assert np.all(probs[i, :, :lo] == 0.0)
        assert np.all(probs[i, :, pos + 1 :] == 0.0)
        assert np.all(probs[i, :, lo : pos + 1] > 0.0)
    np.testing.assert_allclose(probs.sum(axis=2), 1.0, rtol=1e-13)


@pytest.mark.parametrize("name", sorted(CASES))
def test_stacks_attention_probs(name):
    n, n_pos, hq, hkv, d, positions, window, scale = CASES[name]
    q, k_hist = _draw(name, n, n_pos, hq, hkv, d)
    for dt in (np.float64, np.float32):
        probs = ref.attention_probs_batched(q, k_hist, positions, window=window, scale=scale, dtype=dt)
        assert probs.dtype == np.dtype(dt)
        for i, pos in enumerate(positions):
            want = ref.attention_probs(q[i], k_hist, pos=pos, window=window, scale=scale, dtype=dt)
            np.testing.assert_array_equal(probs[i], want)


def test_repeated_positions_with_equal_queries_give_equal_rows():
    rs = np.random.RandomState(11)
    q = np.repeat(rs.standard_normal((1, 2, 4)), 3, axis=0)
    k_hist = rs.standard_normal((12, 1, 4))
    probs = ref.attention_probs_batched(q, k_hist, [7, 7, 7], window=4)
    np.testing.assert_array_equal(probs[0], probs[1])
    np.testing.assert_array_equal(probs[0], probs[2])


def test_default_scale_is_unscaled_and_none_is_inverse_sqrt_d():
    rs = np.random.RandomState(2)
    q = rs.standard_normal((2, 2, 4))
    k_hist = rs.standard_normal((5, 2, 4))
    p_default = ref.attention_probs_batched(q, k_hist, [4, 2])
    p_one = ref.attention_probs_batched(q, k_hist, [4, 2], scale=1.0)
    p_none = ref.attention_probs_batched(q, k_hist, [4, 2], scale=None)
    p_half = ref.attention_probs_batched(q, k_hist, [4, 2], scale=0.5)
    np.testing.assert_array_equal(p_default, p_one)
    np.testing.assert_allclose(p_none, p_half, rtol=1e-13)  # 1/sqrt(4) = 0.5


def test_position_dtypes_and_containers():
    rs = np.random.RandomState(3)
    q = rs.standard_normal((3, 2, 3))
    k_hist = rs.standard_normal((6, 1, 3))
    want = ref.attention_probs_batched(q, k_hist, [5, 0, 3])
    for positions in (
        np.array([5, 0, 3], dtype=np.int32),
        np.array([5, 0, 3], dtype=np.uint16),
        np.array([5, 0, 3], dtype=np.int64),
        (5, 0, 3),
    ):
        np.testing.assert_array_equal(ref.attention_probs_batched(q, k_hist, positions), want)


def test_no_positions_gives_an_empty_result():
    k_hist = np.zeros((4, 1, 2))
    for positions in ([], np.zeros((0,), dtype=np.int32)):
        probs = ref.attention_probs_batched(np.zeros((0, 2, 2)), k_hist, positions)
        assert probs.shape == (0, 2, 4) and probs.dtype == np.float64


def test_float16_inputs_and_float32_mode():
    rs = np.random.RandomState(5)
    q = rs.standard_normal((2, 2, 8)).astype(np.float16)
    k_hist = rs.standard_normal((10, 2, 8)).astype(np.float16)
    p32 = ref.attention_probs_batched(q, k_hist, [9, 4], window=6, dtype=np.float32)
    p64 = ref.attention_probs_batched(q, k_hist, [9, 4], window=6)
    assert p32.dtype == np.float32 and p64.dtype == np.float64
    np.testing.assert_allclose(p32, p64, rtol=1e-5, atol=1e-6)


def test_large_scores_raise_no_floating_point_error():
    rs = np.random.RandomState(6)
    q = rs.standard_normal((3, 2, 4)) * 100
    k_hist = rs.standard_normal((9, 1, 4)) * 100
    for dt in (np.float64, np.float32):
        with np.errstate(all="raise"):
            probs = ref.attention_probs_batched(q, k_hist, [8, 0, 4], dtype=dt)
        assert np.all(np.isfinite(probs))
        np.testing.assert_allclose(probs.astype(np.float64).sum(axis=2), 1.0, rtol=1e-5)


Q = np.random.RandomState(9).standard_normal((3, 4, 3))
KH = np.random.RandomState(10).standard_normal((7, 2, 3))


def call(**over):
    args = dict(q=Q, k_hist=KH, positions=[6, 0, 3])
    kw = {}
    for name, val in over.items():
        if name in args:
            args[name] = val
        else:
            kw[name] = val
    return ref.attention_probs_batched(args["q"], args["k_hist"], args["positions"], **kw)


# id -> (overrides, regex the message must match)
ERRORS = {
    "q_ndim": (dict(q=Q[0]), r"q must be 3-D with shape \[n_pos, Hq, D\]"),
    "k_hist_ndim": (dict(k_hist=KH[0]), r"k_hist must be 3-D with shape \[history_len, Hkv, D\]"),
    "q_int": (dict(q=Q.astype(np.int32)), r"q must be a float16, float32 or float64 array"),
    "k_hist_complex": (dict(k_hist=KH.astype(np.complex64)), r"k_hist must be a float16, float32 or float64"),
    "zero_head_dim": (dict(q=Q[:, :, :0], k_hist=KH[:, :, :0]), r"q head dim D must be >= 1"),
    "d_mismatch": (dict(k_hist=KH[:, :, :2]), r"k_hist head dim must equal q head dim 3"),
    "gqa_not_multiple": (dict(k_hist=np.repeat(KH, 3, axis=1)[:, :3]), r"q heads \(4\) must be a multiple of k_hist heads \(3\)"),
    "zero_kv_heads": (dict(k_hist=KH[:, :0]), r"head counts must be >= 1"),
    "empty_history": (dict(k_hist=KH[:0], positions=[0, 0, 0]), r"k_hist must hold at least one key"),
    "positions_2d": (
        dict(positions=[[6, 0, 3]]),
        r"positions must be a 1-D integer array of length n_pos = 3, got shape \(1, 3\)",
    ),
    "positions_scalar": (dict(positions=3), r"positions must be a 1-D integer array"),
    "positions_float": (dict(positions=[6.0, 0.0, 3.0]), r"positions must be a 1-D integer array, got dtype float64"),
    "positions_bool": (dict(positions=[True, False, True]), r"positions must be a 1-D integer array, got dtype bool"),
    "positions_short": (
        dict(positions=[6, 0]),
        r"positions must have one entry per query row: length n_pos = q.shape\[0\] = 3, got length 2",
    ),
    "position_too_big": (dict(positions=[6, 7, 3]), r"positions\[1\] must be in \[0, history_len\) = \[0, 7\), got 7"),
    "position_negative": (dict(positions=[6, 0, -1]), r"positions\[2\] must be in \[0, history_len\) = \[0, 7\), got -1"),
    "window_negative": (dict(window=-1), r"window must be an integer >= 0 \(0 = unbounded\), got -1"),
    "window_float": (dict(window=2.0), r"window must be an integer >= 0"),
    "window_pair": (dict(window=(1, 0)), r"window must be an integer >= 0"),
    "window_bool": (dict(window=True), r"window must be an integer >= 0"),
    "scale_zero": (dict(scale=0.0), r"scale must be None or a finite nonzero real number"),
    "scale_nan": (dict(scale=float("nan")), r"scale must be None or a finite nonzero"),
    "scale_str": (dict(scale="1"), r"scale must be None or a finite nonzero"),
    "dtype_float16": (dict(dtype=np.float16), r"dtype must be np.float32 or np.float64, got float16"),
    "dtype_none": (dict(dtype=None), r"dtype must be np.float32 or np.float64, got None"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_name_the_argument(name):
    over, pattern = ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        call(**over)


def test_keyword_checks_apply_with_no_positions():
    """window, scale and dtype are checked even when there is no row to compute."""
    q = np.zeros((0, 2, 3))
    for kw, pattern in (
        (dict(window=-2), r"window must be"),
        (dict(scale=0.0), r"scale must be"),
        (dict(dtype=np.int8), r"dtype must be"),
    ):
        with pytest.raises(ValueError, match=pattern):
            ref.attention_probs_batched(q, KH, [], **kw)


_VIS_HEAD = re.compile(r"visible: history_len=(\d+) pos=(\d+) window=(\d+)")


def test_docstring_drawings_are_correct():
    lines = ref.attention_probs_batched.__doc__.splitlines()
    found = 0
    for n, line in enumerate(lines):
        m = _VIS_HEAD.search(line)
        if m:
            hist, pos, window = int(m.group(1)), int(m.group(2)), int(m.group(3))
            cells = lines[n + 2].split()
            assert cells[0] == "vis"
            lo = earliest_key(pos, window)
            assert [c == "1" for c in cells[1:]] == [lo <= t <= pos for t in range(hist)]
            found += 1
    assert found == 3
    doc = ref.attention_probs_batched.__doc__
    assert "Returns" in doc and "dtype" in doc
