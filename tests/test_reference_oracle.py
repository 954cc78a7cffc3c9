"""wgattn.reference against an independent oracle, JAX on the CPU in float64: forward, LSE and
autodiff gradients, the SDPA (through jax.nn.dot_product_attention itself, GQA and masks included),
the probabilities and decode attention over a paged cache.

JAX's CPU wheels are on PyPI (about 90 MB with jaxlib) and do float64 and autodiff, which is what an
oracle for a float64 reference and its backward needs. Every test imports jax with
pytest.importorskip, so the module skips cleanly where jax is absent (Pyodide runs this file in the
page). The worst absolute error seen against the oracle over all cases is recorded; a module-scoped
fixture reports it when the module's tests are done, in whatever order they ran: it prints it (even
without -s) and appends it as one JSON line to the file named by the environment variable
WGATTN_REPORT when that is set. Each comparison asserts the bound itself (``record``), so no test
depends on running last.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from test_reference_decode import paged

from wgattn import reference as ref

# worst absolute error against the oracle over every comparison in this module
WORST = {"abs_err": 0.0, "case": None, "comparisons": 0}
# no comparison may be off by more than this (float64 against float64)
BOUND = 1e-10


def _jax():
    """jax with float64 enabled (its default is float32), or a skip saying why (Pyodide's pytest
    takes no reason= here: its message names jax)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.fixture(scope="module", autouse=True)
def _report_worst(request):
    """After the module's last test, whichever it is: report the worst error seen."""
    yield
    if WORST["comparisons"] == 0:
        return
    import jax  # a comparison ran, so jax is there

    line = "wgattn.reference: worst abs error vs JAX %s (float64) = %.3e at %s over %d comparisons" % (
        jax.__version__,
        WORST["abs_err"],
        WORST["case"],
        WORST["comparisons"],
    )
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:  # pytest -p no:capture
        print("\n" + line)
    else:
        with capture.global_and_fixture_disabled():
            print("\n" + line)
    path = os.environ.get("WGATTN_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "source": "tests/test_reference_oracle.py",
                        "metric": "worst_abs_error_vs_jax_float64",
                        "value": WORST["abs_err"],
                        "case": WORST["case"],
                        "comparisons": WORST["comparisons"],
                        "jax": jax.__version__,
                    }
                )
                + "\n"
            )


def record(case, quantity, got, want):
    """Record max |got - want| over entries where want is finite; return it.
    Fails the calling test when it exceeds BOUND."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (case, quantity, got.shape, want.shape)
    finite = np.isfinite(want)
    err = float(np.abs(got[finite] - want[finite]).max()) if finite.any() else 0.0
    WORST["comparisons"] += 1
    if err >= WORST["abs_err"]:
        WORST["abs_err"] = err
        WORST["case"] = "%s:%s" % (case, quantity)
    assert err < BOUND, (case, quantity, err)
    return err


def cu_from_lens(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return cu


def oracle_visible(jnp, len_q, len_k, causal, window, align):
    """Boolean [len_q, len_k] mask of one sequence built from the contract with jax.numpy."""
    offset = len_k - len_q if align == "bottom_right" else 0
    return _band(jnp, jnp.arange(len_q)[:, None] + offset, jnp.arange(len_k)[None, :], causal, window)


def _band(jnp, i, j, causal, window):
    """Key j visible from the query at (aligned) position i under causal and (left, right)."""
    left, right = window
    vis = jnp.ones(jnp.broadcast_shapes(i.shape, j.shape), dtype=bool)
    if causal:
        vis = vis & (j <= i)
    if left != -1:
        vis = vis & (j >= i - left)
    if right != -1:
        vis = vis & (j <= i + right)
    return vis


def oracle_varlen(q, k, v, dout, cu_q, cu_k, causal, window, softcap, align, scale, alibi=None, sinks=None):
    """Attention over the whole packed batch at once in jax.numpy: scores [Hq, total_q, total_k]
    with a mask that is block-diagonal over sequences (a formulation unlike the reference's loop
    over sequences), FlashAttention's ALiBi bias -slope * |i + offset - j| and the sink as gpt-oss
    writes it (a column appended to the scores, the softmax taken, the column dropped); out and
    lse, and dq, dk, dv (and dsinks) from jax.vjp."""
    jax = _jax()
    jnp = jax.numpy
    hq, d = q.shape[1], q.shape[2]
    group = hq // k.shape[1]
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    lens_q, lens_k = np.diff(cu_q), np.diff(cu_k)
    seq_q, seq_k = np.repeat(np.arange(len(lens_q)), lens_q), np.repeat(np.arange(len(lens_k)), lens_k)
    pos_q = np.arange(len(seq_q)) - np.asarray(cu_q)[seq_q]
    pos_k = np.arange(len(seq_k)) - np.asarray(cu_k)[seq_k]
    if align == "bottom_right":
        pos_q = pos_q + (lens_k - lens_q)[seq_q]
    vis = (seq_q[:, None] == seq_k[None, :]) & _band(np, pos_q[:, None], pos_k[None, :], causal, window)
    row_any = vis.any(axis=1)[None, :, None]  # [1, total_q, 1]
    distance = np.abs(pos_k[None, :] - pos_q[:, None])  # |j - (i + offset)| (within a sequence)

    def forward(qt, kt, vt, st):
        kh, vh = (jnp.repeat(x, group, axis=1) for x in (kt, vt))  # [total_k, Hq, D]
        s = sc * jnp.einsum("qhd,khd->hqk", qt, kh)
        if softcap > 0:
            s = softcap * jnp.tanh(s / softcap)
        if alibi is not None:
            s = s - jnp.asarray(alibi)[:, None, None] * distance[None]
        if sinks is not None:
            column = jnp.broadcast_to(st[:, None, None], s.shape[:2] + (1,))
            s = jnp.concatenate([jnp.where(vis, s, -jnp.inf), column], axis=-1)
            lse = jax.nn.logsumexp(s, axis=-1)
            p = jax.nn.softmax(s, axis=-1)[..., :-1]
        else:
            lse = jax.nn.logsumexp(jnp.where(vis, s, -jnp.inf), axis=-1)  # [Hq, total_q], -inf if empty
            p = jax.nn.softmax(jnp.where(vis, s, jnp.where(row_any, -jnp.inf, 0.0)), axis=-1) * row_any
        return jnp.einsum("hqk,khd->qhd", p, vh), lse.T

    st = np.zeros(q.shape[1]) if sinks is None else np.asarray(sinks, dtype=np.float64)
    if len(seq_q) == 0 or len(seq_k) == 0:  # nothing to attend: the contract's zeros and -inf (or the sink)
        lse = np.full(q.shape[:2], -np.inf) if sinks is None else np.tile(st, (q.shape[0], 1))
        return np.zeros(q.shape), lse, (np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape), np.zeros(st.shape))

    # one compiled program per case: JAX compiles every operation for each new shape when run
    # op by op, which costs seconds a case; jit compiles the forward and its pullback once
    @jax.jit
    def forward_and_grads(qt, kt, vt, stt, dot):
        (out, lse), pullback = jax.vjp(forward, qt, kt, vt, stt)
        return out, lse, pullback((dot, jnp.zeros(lse.shape)))

    out, lse, grads = forward_and_grads(*(jnp.asarray(x) for x in (q, k, v, st, dout)))
    return np.asarray(out), np.asarray(lse), tuple(np.asarray(g) for g in grads)


# id -> (lens_q, lens_k, Hq, Hkv, D, causal, window, softcap, align, scale[, alibi, sinks])
ORACLE_CASES = {
    "d59_1x147_mha_causal_br": ([1], [147], 2, 2, 59, True, (-1, -1), 0.0, "bottom_right", None),
    "d59_1x147_gqa3_softcap_tl": ([1], [147], 3, 1, 59, False, (-1, -1), 4.0, "top_left", 0.9),
    "d111_113x203_gqa3_causal_br": ([113], [203], 6, 2, 111, True, (-1, -1), 0.0, "bottom_right", None),
    "d111_113x203_window_tl": ([113], [203], 3, 3, 111, False, (7, 0), 0.0, "top_left", None),
    "d256_1023x1024_all_to_one_causal_br": ([1023], [1024], 3, 1, 256, True, (-1, -1), 0.0, "bottom_right", None),
    "d64_1024x1023_causal_br_empty_row": ([1024], [1023], 2, 2, 64, True, (-1, -1), 0.0, "bottom_right", None),
    "d59_empty_seqs_gqa3": ([0, 17, 5, 0, 9, 0], [4, 0, 12, 3, 9, 0], 3, 1, 59, True, (-1, -1), 0.0, "bottom_right", None),
    "d111_window_left0_br": ([33, 7], [40, 7], 2, 1, 111, False, (0, -1), 0.0, "bottom_right", None),
    "d59_window_right_only_br": ([21, 30], [30, 21], 4, 4, 59, False, (-1, 3), 0.0, "bottom_right", None),
    "d59_window_both_causal_tl": ([40], [25], 2, 1, 59, True, (5, 2), 0.0, "top_left", None),
    "d256_softcap_gqa_window_br": ([37, 64], [64, 37], 4, 2, 256, True, (16, -1), 5.0, "bottom_right", 0.2),
    "d111_window_excludes_rows_tl": ([20], [5], 2, 2, 111, False, (0, 0), 0.0, "top_left", None),
    "d64_lq_gt_lk_window_br": ([50], [20], 3, 1, 64, False, (2, 2), 0.0, "bottom_right", None),
    # ALiBi (both sides of the diagonal without causal) and sinks (rows with no key: lse = sink)
    "d59_alibi_sinks_causal_br_empty_rows": (
        [5, 30, 0],
        [3, 41, 6],
        4,
        2,
        59,
        True,
        (-1, -1),
        0.0,
        "bottom_right",
        None,
        True,
        True,
    ),
    "d111_alibi_dense_tl_gqa3": ([40, 17], [25, 60], 6, 2, 111, False, (-1, -1), 0.0, "top_left", 0.3, True, False),
    "d64_sinks_softcap_window_br": ([33, 20], [20, 50], 3, 1, 64, False, (6, 2), 4.0, "bottom_right", None, False, True),
    "d256_alibi_sinks_window_right_tl": ([1, 70], [147, 64], 2, 2, 256, False, (-1, 3), 2.0, "top_left", None, True, True),
}


@pytest.mark.parametrize("name", list(ORACLE_CASES))
def test_varlen_against_oracle_autodiff(name):
    lens_q, lens_k, hq, hkv, d, causal, window, softcap, align, scale, *heads = ORACLE_CASES[name]
    with_alibi, with_sinks = heads or (False, False)
    rs = np.random.RandomState(sum(map(ord, name)))
    cu_q, cu_k = cu_from_lens(lens_q), cu_from_lens(lens_k)
    q = rs.standard_normal((cu_q[-1], hq, d))
    k = rs.standard_normal((cu_k[-1], hkv, d))
    v = rs.standard_normal((cu_k[-1], hkv, d))
    dout = rs.standard_normal(q.shape)
    alibi = 2.0 ** -np.linspace(1, 8, hq) if with_alibi else None  # ALiBi's geometric slopes
    sinks = 3.0 + 2.0 * rs.standard_normal(hq) if with_sinks else None
    kw = dict(causal=causal, window=window, softcap=softcap, causal_align=align, scale=scale, alibi_slopes=alibi, sinks=sinks)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, np.array(cu_q, dtype=np.int32), np.array(cu_k, dtype=np.int32), **kw)
        dq, dk, dv, dsinks = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, **kw)
    t_out, t_lse, (t_dq, t_dk, t_dv, t_dsinks) = oracle_varlen(
        q, k, v, dout, cu_q, cu_k, causal, window, softcap, align, scale, alibi, sinks
    )
    # rows with no visible key: the oracle's logsumexp gives -inf (or the sink), same as the contract
    assert np.array_equal(np.isneginf(lse), np.isneginf(t_lse))
    assert np.all(out[np.isneginf(lse)] == 0.0)
    quantities = [("out", out, t_out), ("lse", lse, t_lse), ("dq", dq, t_dq), ("dk", dk, t_dk), ("dv", dv, t_dv)]
    if with_sinks:
        quantities.append(("dsinks", dsinks, t_dsinks))
    else:
        assert np.all(dsinks == 0.0)
    for qty, got, want in quantities:
        assert not np.isnan(got).any()
        scale_ = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))
        err = record(name, qty, got, want)
        assert err <= 1e-11 * scale_, (qty, err)
    if name.endswith("empty_row") or "excludes" in name or "lq_gt_lk" in name:
        assert np.isneginf(lse).any()
    if name.endswith("empty_rows"):  # 5 queries on 3 keys, bottom-right: rows 0 and 1 see no key
        assert np.array_equal(lse[:2], np.tile(sinks, (2, 1))) and np.all(out[:2] == 0.0)


# SDPA cases: id -> (B, Hq, Hkv, Sq, Sk, D, mask kind, causal, window)
SDPA_ORACLE_CASES = {
    "d59_bool_mask_gqa3": (2, 6, 2, 37, 53, 59, "random", False, None),
    "d111_causal_sq_gt_sk": (1, 2, 2, 41, 17, 111, None, True, None),
    "d256_padding_causal_all_to_one": (2, 4, 1, 29, 29, 256, "padding", True, None),
    "d64_window_seed_c_style": (1, 3, 3, 50, 50, 64, None, True, (8, 0)),
    "d59_window_and_mask_fully_masked_rows": (2, 2, 1, 23, 31, 59, "rows_off", False, (3, 4)),
}


def sdpa_case_mask(kind, rs, bsz, hq, sq, sk):
    if kind is None:
        return None
    if kind == "random":
        return rs.rand(bsz, hq, sq, sk) > 0.3
    if kind == "padding":
        m = np.ones((bsz, 1, 1, sk), dtype=bool)
        m[1, :, :, sk - 7 :] = False
        return m
    if kind == "rows_off":
        m = rs.rand(bsz, 1, sq, sk) > 0.2
        m[0, 0, 3, :] = False
        m[1, 0, 10:12, :] = False
        return m
    raise AssertionError(kind)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name", list(SDPA_ORACLE_CASES))
def test_sdpa_against_oracle(name, layout):
    """Against jax.nn.dot_product_attention itself: its own GQA (fewer key/value heads) and mask."""
    jax = _jax()
    jnp = jax.numpy
    bsz, hq, hkv, sq, sk, d, kind, causal, window = SDPA_ORACLE_CASES[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    q = rs.standard_normal((bsz, hq, sq, d))
    k = rs.standard_normal((bsz, hkv, sk, d))
    v = rs.standard_normal((bsz, hkv, sk, d))
    mask = sdpa_case_mask(kind, rs, bsz, hq, sq, sk)
    if layout == "bhsd":
        args = (q, k, v)
    else:
        args = tuple(x.transpose(0, 2, 1, 3) for x in (q, k, v))
    with np.errstate(all="raise"):
        out = ref.sdpa(*args, mask=mask, causal=causal, window=window, layout=layout)
    if layout == "bshd":
        out = out.transpose(0, 2, 1, 3)
    # the oracle: every mask folded into one explicit boolean mask [B, Hq, Sq, Sk]
    full = jnp.ones((bsz, hq, sq, sk), dtype=bool)
    if mask is not None:
        full = full & jnp.asarray(mask)
    full = full & oracle_visible(jnp, sq, sk, causal, window or (-1, -1), "top_left")
    empty = ~np.asarray(full).any(axis=-1)
    # float64, by hand: key/value head j serves query heads j*G .. j*G+G-1
    kq, vq = (jnp.repeat(jnp.asarray(x), hq // hkv, axis=1) for x in (k, v))
    s = jnp.einsum("bhqd,bhkd->bhqk", jnp.asarray(q), kq) / math.sqrt(d)
    p = jax.nn.softmax(jnp.where(full, s, -jnp.inf), axis=-1)
    t_out = np.asarray(jnp.einsum("bhqk,bhkd->bhqd", jnp.where(full, p, 0.0), vq))
    # fully masked rows: the contract says 0
    assert np.all(out[empty] == 0.0)
    assert not np.isnan(out).any()
    err = record(name + "_" + layout, "sdpa_out", out[~empty], t_out[~empty])
    assert err < 1e-12
    # jax.nn.dot_product_attention itself (its own GQA head mapping and mask handling) agrees to
    # float32's precision: it computes the softmax in float32 whatever the input's dtype
    bthd = lambda x: jnp.asarray(x.transpose(0, 2, 1, 3))  # noqa: E731  (it takes [B, T, N, H])
    lib = jax.nn.dot_product_attention(bthd(q), bthd(k), bthd(v), mask=full, implementation="xla")
    lib = np.asarray(lib).transpose(0, 2, 1, 3)
    assert float(np.abs(lib[~empty] - out[~empty]).max()) < 1e-5
    if "fully_masked" in name:
        assert empty.any()


# probs cases: id -> (history_len, Hq, Hkv, D, pos, window, scale)
PROBS_ORACLE_CASES = {
    "d111_hist300_window64_gqa4": (300, 8, 2, 111, 250, 64, 1.0),
    "d256_hist1_all_to_one": (1, 4, 1, 256, 0, 0, 1.0),
    "d59_hist147_unbounded_scaled": (147, 3, 3, 59, 100, 0, 1.0 / math.sqrt(59)),
    "d64_window_larger_than_pos": (77, 2, 1, 64, 10, 40, 1.0),
}


@pytest.mark.parametrize("name", list(PROBS_ORACLE_CASES))
def test_attention_probs_against_oracle(name):
    jax = _jax()
    jnp = jax.numpy
    n, hq, hkv, d, pos, window, scale = PROBS_ORACLE_CASES[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    q = rs.standard_normal((hq, d)) * 0.3
    k_hist = rs.standard_normal((n, hkv, d)) * 0.3
    with np.errstate(all="raise"):
        probs = ref.attention_probs(q, k_hist, pos=pos, window=window, scale=scale)
    kt = jnp.repeat(jnp.asarray(k_hist), hq // hkv, axis=1)  # [n, Hq, D]
    s = scale * jnp.einsum("hd,thd->ht", jnp.asarray(q), kt)
    t = jnp.arange(n)
    earliest = pos + 1 - window if (window != 0 and pos + 1 >= window) else 0
    vis = (t >= earliest) & (t <= pos)
    t_probs = np.asarray(jax.nn.softmax(jnp.where(vis, s, -jnp.inf), axis=-1))
    assert np.all(probs[:, ~np.asarray(vis)] == 0.0)
    err = record(name, "probs", probs, t_probs)
    assert err < 1e-13


def test_float32_mode_against_the_oracle():
    """The naive float32 reference and the oracle on float32-rounded inputs land near each other."""
    rs = np.random.RandomState(77)
    cu = [0, 60, 100]
    q = rs.standard_normal((100, 4, 64))
    k = rs.standard_normal((100, 2, 64))
    v = rs.standard_normal((100, 2, 64))
    out32, _ = ref.varlen_attention_fwd(q, k, v, cu, cu, causal=True, dtype=np.float32)
    out64, _ = ref.varlen_attention_fwd(q, k, v, cu, cu, causal=True)
    r32 = [x.astype(np.float32).astype(np.float64) for x in (q, k, v)]
    t32, _, _ = oracle_varlen(*r32, np.zeros(q.shape), cu, cu, True, (-1, -1), 0.0, "bottom_right", None)
    assert out32.dtype == np.float32
    assert float(np.abs(out32 - out64).max()) < 1e-5
    assert float(np.abs(out32 - t32).max()) < 1e-5


def oracle_decode(q, k_cache, v_cache, table, lens, scale, window_left, softcap, alibi, sinks):
    """Decode attention in jax.numpy, float64, formulated apart from the reference: each
    sequence's pages gathered with jnp.take, every query head given its own copy of its key
    head, the mask, ALiBi and softcap applied to [Hq, Sq_new, n] scores, and the sink as gpt-oss
    writes it: a column appended to the scores, the softmax taken, the column dropped."""
    jax = _jax()
    jnp = jax.numpy
    bsz, sq, hq, d = q.shape
    _, bs, hkv, _ = k_cache.shape
    sc = 1.0 / math.sqrt(d) if scale is None else scale

    def one_sequence(qb, pages, n):
        k = jnp.take(k_cache, pages, axis=0).reshape(-1, hkv, d)[:n]
        v = jnp.take(v_cache, pages, axis=0).reshape(-1, hkv, d)[:n]
        k, v = (jnp.repeat(x, hq // hkv, axis=1) for x in (k, v))  # [n, Hq, D]
        s = sc * jnp.einsum("ihd,jhd->hij", qb, k)
        if softcap > 0:
            s = softcap * jnp.tanh(s / softcap)
        pos = (n - sq + jnp.arange(sq))[:, None]
        j = jnp.arange(n)[None, :]
        if alibi is not None:
            s = s + jnp.asarray(alibi)[:, None, None] * (j - pos)[None]
        vis = j <= pos
        if window_left >= 0:
            vis = vis & (j >= pos - window_left)
        s = jnp.where(vis[None], s, -jnp.inf)
        if sinks is not None:
            s = jnp.concatenate([s, jnp.broadcast_to(jnp.asarray(sinks)[:, None, None], (hq, sq, 1))], axis=-1)
        w = jax.nn.softmax(s, axis=-1)[..., :n]
        return jnp.einsum("hij,jhd->ihd", w, v), jax.nn.logsumexp(s, axis=-1).T

    # one compiled program per sequence length (op by op, JAX compiles every operation anew)
    run = jax.jit(one_sequence, static_argnums=2)
    out = np.zeros(q.shape)
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(bsz):
        n = int(lens[b])
        if n == 0:  # an idle slot
            if sinks is not None:
                lse[b] = np.broadcast_to(sinks, (sq, hq))
            continue
        o, l_ = run(jnp.asarray(q[b]), jnp.asarray(table[b, : -(-n // bs)]), n)
        out[b], lse[b] = np.asarray(o), np.asarray(l_)
    return out, lse


# id -> (lens, Sq_new, Hq, Hkv, D, block_size, window_left, softcap, alibi, sinks, scale)
DECODE_ORACLE_CASES = {
    "d59_bs16_gqa8_one_token_mid_block": ([37, 100, 16], 1, 8, 1, 59, 16, -1, 0.0, False, False, None),
    "d111_bs64_mqa_five_new_sinks": ([65, 5, 0, 130], 5, 6, 1, 111, 64, -1, 0.0, False, True, None),
    "d128_bs16_gqa4_long_alibi_window": ([3001], 3, 8, 2, 128, 16, 700, 0.0, True, False, 0.07),
    "d64_bs1_softcap_sixteen_new": ([16, 40], 16, 4, 2, 64, 1, -1, 5.0, False, True, None),
    "d59_bs7_everything": ([50, 0, 23], 4, 6, 3, 59, 7, 9, 3.0, True, True, 0.3),
    # chunked prefill: a whole prompt (its new tokens fill the cache) and a chunk after a history
    "d64_bs16_gqa4_prefill_whole_prompt_sinks": ([90, 0, 200], 90, 8, 2, 64, 16, -1, 0.0, False, True, None),
    "d32_bs7_prefill_chunk_window_alibi": ([333, 120], 120, 4, 1, 32, 7, 50, 8.0, True, False, None),
}


@pytest.mark.parametrize("name", list(DECODE_ORACLE_CASES))
def test_decode_against_oracle(name):
    lens, sq, hq, hkv, d, bs, wl, cap, with_alibi, with_sinks, scale = DECODE_ORACLE_CASES[name]
    _jax()
    rs = np.random.RandomState(sum(map(ord, name)))
    q, k_cache, v_cache, table, _ = paged(rs, lens, sq, hq, hkv, d, bs)
    alibi = 2.0 ** -np.arange(1, hq + 1) if with_alibi else None  # ALiBi's geometric slopes
    sinks = rs.standard_normal(hq) * 2 if with_sinks else None
    kw = dict(scale=scale, window_left=wl, softcap=cap, alibi_slopes=alibi, sinks=sinks)
    with np.errstate(all="raise"):
        out, lse = ref.decode_attention(q, k_cache, v_cache, table, np.array(lens, dtype=np.int32), **kw)
    t_out, t_lse = oracle_decode(q, k_cache, v_cache, table, lens, scale, wl, cap, alibi, sinks)
    assert np.array_equal(np.isneginf(lse), np.isneginf(t_lse))
    record(name, "decode_out", out, t_out)
    record(name, "decode_lse", lse, t_lse)
