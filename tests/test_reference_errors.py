"""Every bad input to wgattn.reference raises ValueError naming the argument.

NumPy only; runs on CPython 3.8+ with NumPy 1.17+ (also inside Pyodide).
"""

from __future__ import annotations

import numpy as np
import pytest

from wgattn import reference as ref

RS = np.random.RandomState(0)
Q = RS.standard_normal((5, 4, 3))  # total_q 5, Hq 4, D 3
K = RS.standard_normal((6, 2, 3))  # total_k 6, Hkv 2
V = RS.standard_normal((6, 2, 3))
CU_Q = [0, 2, 5]
CU_K = [0, 4, 6]
OUT, LSE = ref.varlen_attention_fwd(Q, K, V, CU_Q, CU_K)
DOUT = RS.standard_normal(Q.shape)


def fwd(**over):
    args = dict(q=Q, k=K, v=V, cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K)
    kw = {}
    for name, val in over.items():
        if name in args:
            args[name] = val
        else:
            kw[name] = val
    return ref.varlen_attention_fwd(args["q"], args["k"], args["v"], args["cu_seqlens_q"], args["cu_seqlens_k"], **kw)


def bwd(**over):
    args = dict(dout=DOUT, q=Q, k=K, v=V, out=OUT, lse=LSE, cu_seqlens_q=CU_Q, cu_seqlens_k=CU_K)
    kw = {}
    for name, val in over.items():
        if name in args:
            args[name] = val
        else:
            kw[name] = val
    return ref.varlen_attention_bwd(
        args["dout"], args["q"], args["k"], args["v"], args["out"], args["lse"], args["cu_seqlens_q"], args["cu_seqlens_k"], **kw
    )


QP = RS.standard_normal((4, 3))  # Hq 4, D 3
KH = RS.standard_normal((7, 2, 3))  # history 7, Hkv 2


def probs(**over):
    args = dict(q=QP, k_hist=KH)
    kw = dict(pos=3)
    for name, val in over.items():
        if name in args:
            args[name] = val
        else:
            kw[name] = val
    return ref.attention_probs(args["q"], args["k_hist"], **kw)


QS = RS.standard_normal((2, 4, 3, 5))  # B 2, H 4, Sq 3, D 5
KS = RS.standard_normal((2, 2, 6, 5))  # Hkv 2, Sk 6
VS = RS.standard_normal((2, 2, 6, 5))


def sdpa(**over):
    args = dict(q=QS, k=KS, v=VS)
    kw = {}
    for name, val in over.items():
        if name in args:
            args[name] = val
        else:
            kw[name] = val
    return ref.sdpa(args["q"], args["k"], args["v"], **kw)


# id -> (thunk, regex the message must match)
VARLEN_ERRORS = {
    # q / k / v shapes and dtypes
    "q_ndim": (dict(q=Q[0]), r"q must be 3-D"),
    "k_ndim": (dict(k=K[None]), r"k must be 3-D"),
    "v_ndim": (dict(v=V[:, 0]), r"v must be 3-D"),
    "q_int": (dict(q=Q.astype(np.int64)), r"q must be a float16, float32 or float64 array"),
    "k_complex": (dict(k=K.astype(np.complex128)), r"k must be a float16, float32 or float64"),
    "v_bool": (dict(v=V > 0), r"v must be a float16, float32 or float64"),
    "q_object": (dict(q=np.array([[["a"]]], dtype=object)), r"q must be a float"),
    "d_mismatch": (dict(k=K[:, :, :2], v=V[:, :, :2]), r"k head dim must equal q head dim 3"),
    "v_shape": (dict(v=V[:, :, :2]), r"v must have k's shape"),
    "v_heads": (dict(v=np.repeat(V, 2, axis=1)), r"v must have k's shape"),
    "gqa_not_multiple": (
        dict(k=np.repeat(K, 3, axis=1)[:, :3], v=np.repeat(V, 3, axis=1)[:, :3]),
        r"q heads \(4\) must be a multiple of k/v heads \(3\)",
    ),
    "more_kv_heads": (
        dict(k=np.repeat(K, 4, axis=1), v=np.repeat(V, 4, axis=1)),
        r"q heads \(4\) must be a multiple of k/v heads \(8\)",
    ),
    "zero_kv_heads": (dict(k=K[:, :0], v=V[:, :0]), r"head counts must be >= 1"),
    "zero_head_dim": (dict(q=Q[:, :, :0], k=K[:, :, :0], v=V[:, :, :0]), r"q head dim D must be >= 1"),
    # cu_seqlens
    "cu_q_2d": (dict(cu_seqlens_q=[[0, 2, 5]]), r"cu_seqlens_q must be a 1-D integer array"),
    "cu_k_empty": (dict(cu_seqlens_k=np.zeros((0,), dtype=np.int32)), r"cu_seqlens_k must be .*length 0"),
    "cu_q_float": (dict(cu_seqlens_q=[0.0, 2.0, 5.0]), r"cu_seqlens_q must be a 1-D integer array, got dtype float"),
    "cu_k_bool": (dict(cu_seqlens_k=np.array([False, True])), r"cu_seqlens_k must be a 1-D integer array"),
    "cu_q_start": (dict(cu_seqlens_q=[3, 4, 5]), r"cu_seqlens_q must start at 0, got 3"),
    "cu_k_decreasing": (dict(cu_seqlens_k=[0, 5, 4, 6]), r"cu_seqlens_k must be non-decreasing"),
    "cu_q_last": (dict(cu_seqlens_q=[0, 2, 4]), r"cu_seqlens_q must end at total_q .*= 5, got 4"),
    "cu_k_last": (dict(cu_seqlens_k=[0, 4, 7]), r"cu_seqlens_k must end at total_k .*= 6, got 7"),
    "cu_batch_mismatch": (dict(cu_seqlens_k=[0, 1, 4, 6]), r"cu_seqlens_q and cu_seqlens_k must have the same length"),
    # keywords
    "window_below_minus1": (dict(window=(-2, 0)), r"window must be \(left, right\) with each >= -1, got \(-2, 0\)"),
    "window_right_below": (dict(window=(0, -5)), r"window must be \(left, right\) with each >= -1, got \(0, -5\)"),
    "window_scalar": (dict(window=3), r"window must be a pair \(left, right\)"),
    "window_triple": (dict(window=(1, 1, 1)), r"window must be a pair \(left, right\)"),
    "window_float": (dict(window=(1.5, 0)), r"window must be a pair \(left, right\) of integers"),
    "window_none": (dict(window=None), r"window must be a pair"),
    "causal_align": (dict(causal_align="bottom-right"), r"causal_align must be 'bottom_right' or 'top_left'"),
    "causal_align_none": (dict(causal_align=None), r"causal_align must be"),
    "causal_str": (dict(causal="yes"), r"causal must be True or False"),
    "softcap_negative": (dict(softcap=-1.0), r"softcap must be a finite real number >= 0"),
    "softcap_nan": (dict(softcap=float("nan")), r"softcap must be a finite real number >= 0"),
    "softcap_inf": (dict(softcap=float("inf")), r"softcap must be a finite"),
    "softcap_str": (dict(softcap="1"), r"softcap must be a finite"),
    "scale_zero": (dict(scale=0.0), r"scale must be None or a finite nonzero real number"),
    "scale_nan": (dict(scale=float("nan")), r"scale must be None or a finite nonzero"),
    "scale_inf": (dict(scale=-float("inf")), r"scale must be None or a finite nonzero"),
    "scale_str": (dict(scale="0.5"), r"scale must be None or a finite nonzero"),
    "dtype_float16": (dict(dtype=np.float16), r"dtype must be np.float32 or np.float64, got float16"),
    "dtype_int": (dict(dtype=np.int32), r"dtype must be np.float32 or np.float64"),
    "dtype_garbage": (dict(dtype="nonsense"), r"dtype must be np.float32 or np.float64"),
    "dtype_none": (dict(dtype=None), r"dtype must be np.float32 or np.float64, got None"),
    # per-head parameters: one finite float32 value per query head (decode_attention's rule)
    "alibi_length": (dict(alibi_slopes=[0.5, 0.25]), r"alibi_slopes must have one value per query head, shape \[Hq\] = \(4,\)"),
    "alibi_2d": (dict(alibi_slopes=np.ones((4, 1))), r"alibi_slopes must be 1-D with shape \[Hq\]"),
    "alibi_nan": (dict(alibi_slopes=[0.5, np.nan, 0.1, 0.1]), r"alibi_slopes\[1\] must be finite and representable in float32"),
    "alibi_int": (dict(alibi_slopes=np.ones(4, dtype=np.int32)), r"alibi_slopes must be a float16, float32 or float64 array"),
    "sinks_huge": (dict(sinks=[0.0, 0.0, 1e39, 0.0]), r"sinks\[2\] must be finite and representable in float32"),
    "sinks_inf": (dict(sinks=[-np.inf, 0.0, 0.0, 0.0]), r"sinks\[0\] must be finite"),
    "sinks_scalar": (dict(sinks=1.0), r"sinks must be 1-D"),
}


@pytest.mark.parametrize("name", sorted(VARLEN_ERRORS))
def test_varlen_fwd_errors(name):
    over, pattern = VARLEN_ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        fwd(**over)


@pytest.mark.parametrize("name", sorted(VARLEN_ERRORS))
def test_varlen_bwd_shares_fwd_errors(name):
    over, pattern = VARLEN_ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        bwd(**over)


BWD_ERRORS = {
    "dout_shape": (dict(dout=DOUT[:, :2]), r"dout must have q's shape"),
    "dout_ndim": (dict(dout=DOUT[0]), r"dout must be 3-D"),
    "dout_int": (dict(dout=DOUT.astype(np.int32)), r"dout must be a float16, float32 or float64"),
    "out_shape": (dict(out=OUT[:4]), r"out must have q's shape"),
    "out_complex": (dict(out=OUT.astype(np.complex64)), r"out must be a float"),
    "lse_shape": (dict(lse=LSE.T), r"lse must have shape \(5, 4\)"),
    "lse_ndim": (dict(lse=LSE[..., None]), r"lse must be 2-D"),
    "lse_int": (dict(lse=np.zeros((5, 4), dtype=np.int64)), r"lse must be a float"),
}


@pytest.mark.parametrize("name", sorted(BWD_ERRORS))
def test_varlen_bwd_errors(name):
    over, pattern = BWD_ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        bwd(**over)


PROBS_ERRORS = {
    "q_ndim": (dict(q=QP[None]), r"q must be 2-D"),
    "k_hist_ndim": (dict(k_hist=KH[0]), r"k_hist must be 3-D"),
    "q_int": (dict(q=QP.astype(np.int16)), r"q must be a float16, float32 or float64"),
    "k_hist_complex": (dict(k_hist=KH.astype(np.complex128)), r"k_hist must be a float"),
    "d_mismatch": (dict(k_hist=KH[:, :, :2]), r"k_hist head dim must equal q head dim 3"),
    "gqa_not_multiple": (dict(k_hist=np.repeat(KH, 3, axis=1)[:, :3]), r"q heads \(4\) must be a multiple of k_hist heads \(3\)"),
    "empty_history": (dict(k_hist=KH[:0], pos=0), r"k_hist must hold at least one key"),
    "pos_negative": (dict(pos=-1), r"pos must be in \[0, history_len\) = \[0, 7\), got -1"),
    "pos_too_big": (dict(pos=7), r"pos must be in \[0, history_len\) = \[0, 7\), got 7"),
    "pos_float": (dict(pos=2.0), r"pos must be an integer"),
    "pos_none": (dict(pos=None), r"pos must be an integer"),
    "window_negative": (dict(window=-1), r"window must be an integer >= 0 \(0 = unbounded\), got -1"),
    "window_pair": (dict(window=(1, 0)), r"window must be an integer >= 0"),
    "scale_zero": (dict(scale=0), r"scale must be None or a finite nonzero"),
    "scale_inf": (dict(scale=float("inf")), r"scale must be None or a finite nonzero"),
    "dtype": (dict(dtype=np.int8), r"dtype must be np.float32 or np.float64"),
}


@pytest.mark.parametrize("name", sorted(PROBS_ERRORS))
def test_attention_probs_errors(name):
    over, pattern = PROBS_ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        probs(**over)


SDPA_ERRORS = {
    "q_ndim": (dict(q=QS[0]), r"q must be 4-D with shape \[B, H, Sq, D\]"),
    "k_ndim_bshd": (
        dict(q=QS.transpose(0, 2, 1, 3), k=KS[0], v=VS[0], layout="bshd"),
        r"k must be 4-D with shape \[B, Sk, Hkv, D\]",
    ),
    "v_shape": (dict(v=VS[:, :, :5]), r"v must have k's shape"),
    "q_int": (dict(q=QS.astype(np.int64)), r"q must be a float16, float32 or float64"),
    "v_complex": (dict(v=VS.astype(np.complex64)), r"v must be a float"),
    "batch_mismatch": (dict(k=KS[:1], v=VS[:1]), r"k batch size must equal q batch size 2, got 1"),
    "d_mismatch": (dict(k=KS[..., :4], v=VS[..., :4]), r"k head dim must equal q head dim 5, got 4"),
    "gqa_not_multiple": (
        dict(k=np.repeat(KS, 3, axis=1)[:, :3], v=np.repeat(VS, 3, axis=1)[:, :3]),
        r"q heads \(4\) must be a multiple of k/v heads \(3\)",
    ),
    "layout": (dict(layout="bsdh"), r"layout must be 'bhsd' or 'bshd', got 'bsdh'"),
    "mask_float": (dict(mask=np.ones((3, 6))), r"mask must be a boolean array \(True = attend\), got dtype float64"),
    "mask_int": (dict(mask=np.ones((3, 6), dtype=np.int8)), r"mask must be a boolean array"),
    "mask_shape": (dict(mask=np.ones((3, 5), dtype=bool)), r"mask must be broadcastable to \[B, H, Sq, Sk\] = \(2, 4, 3, 6\)"),
    "mask_5d": (dict(mask=np.ones((1, 2, 4, 3, 6), dtype=bool)), r"mask must be broadcastable"),
    "window_below": (dict(window=(0, -2)), r"window must be \(left, right\) with each >= -1, got \(0, -2\)"),
    "window_int": (dict(window=2), r"window must be a pair \(left, right\)"),
    "causal_str": (dict(causal="true"), r"causal must be True or False"),
    "scale_zero": (dict(scale=0.0), r"scale must be None or a finite nonzero"),
    "scale_nan": (dict(scale=float("nan")), r"scale must be None or a finite nonzero"),
    "dtype": (dict(dtype=np.complex128), r"dtype must be np.float32 or np.float64"),
}


@pytest.mark.parametrize("name", sorted(SDPA_ERRORS))
def test_sdpa_errors(name):
    over, pattern = SDPA_ERRORS[name]
    with pytest.raises(ValueError, match=pattern):
        sdpa(**over)


def test_valid_edge_inputs_are_accepted():
    # negative scale, numpy scalars, numpy integer window/pos, numpy bool causal (0/1 are refused:
    # tests/test_one_validation_path.py)
    fwd(
        scale=np.float32(-0.5),
        window=(np.int64(1), np.int32(-1)),
        causal=np.bool_(True),
        softcap=np.float64(2.0),
        causal_align="top_left",
        dtype="float32",
    )
    probs(pos=np.int64(6), window=np.int32(7), scale=None)
    sdpa(window=[1, 1], mask=np.ones((6,), dtype=bool), causal=np.bool_(True), layout="bhsd")
    ref.varlen_attention_fwd(Q[:0], K[:0], V[:0], [0], [0])  # batch of zero sequences
