"""varlen_attention_bwd against central finite differences of the forward (the sinks' gradient
included).

Float64, tiny shapes.  NumPy only; runs on CPython 3.8+ with NumPy 1.17+.
"""

from __future__ import annotations

import numpy as np
import pytest

from wgattn import reference as ref


def cu_from_lens(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return cu


def numeric_grad(f, x, h=1e-6):
    """Central differences of scalar f() with respect to every entry of x (in place)."""
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    gf = g.reshape(-1)
    for idx in range(flat.size):
        old = flat[idx]
        flat[idx] = old + h
        fp = f()
        flat[idx] = old - h
        fm = f()
        flat[idx] = old
        gf[idx] = (fp - fm) / (2.0 * h)
    return g


# id -> (lens_q, lens_k, Hq, Hkv, D, causal, window, softcap, align, scale[, alibi, sinks])
GRAD_CASES = {
    "mha_full_br": ([3], [4], 2, 2, 3, False, (-1, -1), 0.0, "bottom_right", None),
    "gqa3_causal_br": ([3, 2], [2, 3], 3, 1, 2, True, (-1, -1), 0.0, "bottom_right", None),
    "gqa2_causal_tl": ([3, 2], [2, 3], 4, 2, 2, True, (-1, -1), 0.0, "top_left", None),
    "all_to_one_window_tl": ([4], [4], 3, 1, 2, False, (1, 0), 0.0, "top_left", 0.8),
    "window_right_only_br": ([3], [5], 2, 1, 3, False, (-1, 1), 0.0, "bottom_right", None),
    "softcap_gqa_window_br": ([3, 2], [4, 2], 4, 2, 2, True, (2, -1), 1.3, "bottom_right", 1.5),
    "softcap_tl": ([3], [3], 2, 2, 3, False, (-1, -1), 0.9, "top_left", 2.0),
    "empty_rows_and_seqs": ([0, 4, 2, 0], [2, 2, 0, 1], 2, 1, 2, True, (-1, -1), 0.0, "bottom_right", None),
    "alibi_both_sides_tl": ([3, 2], [4, 5], 2, 1, 3, False, (-1, -1), 0.0, "top_left", None, True, False),
    "sinks_gqa_window_br": ([3, 2], [2, 4], 4, 2, 2, False, (1, 1), 0.0, "bottom_right", 1.2, False, True),
    "alibi_sinks_softcap_empty_rows": ([0, 4, 2], [2, 2, 0], 2, 1, 3, True, (-1, -1), 1.1, "bottom_right", None, True, True),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_bwd_matches_finite_differences(name):
    lens_q, lens_k, hq, hkv, d, causal, window, softcap, align, scale, *heads = GRAD_CASES[name]
    with_alibi, with_sinks = heads or (False, False)
    rs = np.random.RandomState(sum(map(ord, name)))
    cu_q, cu_k = cu_from_lens(lens_q), cu_from_lens(lens_k)
    q = rs.standard_normal((cu_q[-1], hq, d))
    k = rs.standard_normal((cu_k[-1], hkv, d))
    v = rs.standard_normal((cu_k[-1], hkv, d))
    dout = rs.standard_normal(q.shape)
    sinks = rs.standard_normal(hq) if with_sinks else None
    alibi = 2.0 ** -np.arange(1, hq + 1) if with_alibi else None
    kw = dict(causal=causal, window=window, softcap=softcap, causal_align=align, scale=scale, alibi_slopes=alibi)

    def loss():
        out, _ = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, sinks=sinks, **kw)
        return float(np.sum(out * dout))

    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, cu_q, cu_k, sinks=sinks, **kw)
        dq, dk, dv, dsinks = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, sinks=sinks, **kw)
        nq = numeric_grad(loss, q)
        nk = numeric_grad(loss, k)
        nv = numeric_grad(loss, v)
        ns = numeric_grad(loss, sinks) if with_sinks else np.zeros(hq)
    for got, want in ((dq, nq), (dk, nk), (dv, nv), (dsinks, ns)):
        assert got.shape == want.shape and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    # rows without a visible key: no gradient at all
    empty = np.isneginf(lse)
    assert np.all(dq[empty] == 0.0)
    if name == "empty_rows_and_seqs":
        assert empty.any()
    if with_sinks:  # a row with no key has the sink alone: lse = sink, nothing else moves
        assert np.all(np.isfinite(lse)) and np.any(dsinks != 0.0)


def test_bwd_gqa_sums_over_group():
    # dk/dv with Hkv=1 equal the sum over heads of dk/dv with repeated kv heads.
    rs = np.random.RandomState(21)
    cu = [0, 3, 5]
    q = rs.standard_normal((5, 3, 4))
    k = rs.standard_normal((5, 1, 4))
    v = rs.standard_normal((5, 1, 4))
    dout = rs.standard_normal(q.shape)
    kw = dict(causal=True, softcap=2.0, window=(1, -1), alibi_slopes=[0.5, 0.1, 0.02], sinks=[0.3, -1.0, 2.0])
    out, lse = ref.varlen_attention_fwd(q, k, v, cu, cu, **kw)
    dq, dk, dv, _ = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu, cu, **kw)
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    out_r, lse_r = ref.varlen_attention_fwd(q, kr, vr, cu, cu, **kw)
    dq_r, dk_r, dv_r, _ = ref.varlen_attention_bwd(dout, q, kr, vr, out_r, lse_r, cu, cu, **kw)
    np.testing.assert_allclose(dq, dq_r, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dk, dk_r.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dv, dv_r.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-14)
