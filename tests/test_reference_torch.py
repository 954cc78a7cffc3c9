"""wgattn.reference against PyTorch (CPU, float64), forward, LSE and autograd.

Every test imports torch with pytest.importorskip, so the module skips cleanly
where torch is absent (Pyodide).  The worst absolute error seen against
PyTorch over all cases is recorded; a module-scoped fixture reports it when
the module's tests are done, in whatever order they ran: it prints it (even
without -s) and appends it as one JSON line to the file named by the
environment variable WGATTN_REPORT when that is set.  Each comparison asserts
the bound itself (``record``), so no test depends on running last.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from wgattn import reference as ref

# worst absolute error against PyTorch over every comparison in this module
WORST = {"abs_err": 0.0, "case": None, "comparisons": 0}
# no comparison may be off by more than this (float64 against float64)
BOUND = 1e-10


@pytest.fixture(scope="module", autouse=True)
def _report_worst(request):
    """After the module's last test, whichever it is: report the worst error seen."""
    yield
    if WORST["comparisons"] == 0:
        return
    import torch  # a comparison ran, so torch is there

    line = "wgattn.reference: worst abs error vs PyTorch %s (float64) = %.3e at %s over %d comparisons" % (
        torch.__version__,
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
                        "source": "tests/test_reference_torch.py",
                        "metric": "worst_abs_error_vs_pytorch_float64",
                        "value": WORST["abs_err"],
                        "case": WORST["case"],
                        "comparisons": WORST["comparisons"],
                        "torch": torch.__version__,
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


def torch_visible(torch, len_q, len_k, causal, window, align):
    """Boolean [len_q, len_k] mask built from the contract with torch ops."""
    left, right = window
    offset = len_k - len_q if align == "bottom_right" else 0
    i = torch.arange(len_q).unsqueeze(1) + offset
    j = torch.arange(len_k).unsqueeze(0)
    vis = torch.ones(len_q, len_k, dtype=torch.bool)
    if causal:
        vis = vis & (j <= i)
    if left != -1:
        vis = vis & (j >= i - left)
    if right != -1:
        vis = vis & (j <= i + right)
    return vis


def torch_varlen(torch, q, k, v, dout, cu_q, cu_k, causal, window, softcap, align, scale):
    """Attention built by hand in torch, per sequence; returns out, lse, grads."""
    hq, d = q.shape[1], q.shape[2]
    group = hq // k.shape[1]
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    qt = torch.tensor(q, requires_grad=True)
    kt = torch.tensor(k, requires_grad=True)
    vt = torch.tensor(v, requires_grad=True)
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        len_q, len_k = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        if len_q == 0:
            continue
        if len_k == 0:
            outs.append(torch.zeros(len_q, hq, d, dtype=torch.float64))
            lses.append(torch.full((len_q, hq), -math.inf, dtype=torch.float64))
            continue
        qb = qt[cu_q[b] : cu_q[b + 1]].transpose(0, 1)  # [Hq, Lq, D]
        kb = kt[cu_k[b] : cu_k[b + 1]].repeat_interleave(group, dim=1).transpose(0, 1)
        vb = vt[cu_k[b] : cu_k[b + 1]].repeat_interleave(group, dim=1).transpose(0, 1)
        s = sc * (qb @ kb.transpose(1, 2))  # [Hq, Lq, Lk]
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        vis = torch_visible(torch, len_q, len_k, causal, window, align)
        row_any = vis.any(dim=1, keepdim=True)  # [Lq, 1]
        neg = torch.tensor(-math.inf, dtype=torch.float64)
        lse = torch.logsumexp(torch.where(vis, s, neg), dim=-1)  # [Hq, Lq], -inf if empty
        fill = torch.where(row_any, neg, torch.tensor(0.0, dtype=torch.float64))
        p = torch.softmax(torch.where(vis, s, fill), dim=-1) * row_any
        outs.append((p @ vb).transpose(0, 1))
        lses.append(lse.transpose(0, 1))
    if outs:
        out = torch.cat(outs, dim=0)
        lse = torch.cat(lses, dim=0)
    else:
        out = torch.zeros(q.shape, dtype=torch.float64)
        lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float64)
    grads = (np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape))
    if out.requires_grad:
        (out * torch.tensor(dout)).sum().backward()
        grads = tuple(np.zeros(x.shape) if t.grad is None else t.grad.numpy() for x, t in ((q, qt), (k, kt), (v, vt)))
    return out.detach().numpy(), lse.detach().numpy(), grads


# id -> (lens_q, lens_k, Hq, Hkv, D, causal, window, softcap, align, scale)
TORCH_CASES = {
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
}


@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_varlen_against_torch_autograd(name):
    torch = pytest.importorskip("torch")
    lens_q, lens_k, hq, hkv, d, causal, window, softcap, align, scale = TORCH_CASES[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    cu_q, cu_k = cu_from_lens(lens_q), cu_from_lens(lens_k)
    q = rs.standard_normal((cu_q[-1], hq, d))
    k = rs.standard_normal((cu_k[-1], hkv, d))
    v = rs.standard_normal((cu_k[-1], hkv, d))
    dout = rs.standard_normal(q.shape)
    kw = dict(causal=causal, window=window, softcap=softcap, causal_align=align, scale=scale)
    with np.errstate(all="raise"):
        out, lse = ref.varlen_attention_fwd(q, k, v, np.array(cu_q, dtype=np.int32), np.array(cu_k, dtype=np.int32), **kw)
        dq, dk, dv = ref.varlen_attention_bwd(dout, q, k, v, out, lse, cu_q, cu_k, **kw)
    t_out, t_lse, (t_dq, t_dk, t_dv) = torch_varlen(torch, q, k, v, dout, cu_q, cu_k, causal, window, softcap, align, scale)
    # rows with no visible key: torch's logsumexp gives -inf, same as the contract
    assert np.array_equal(np.isneginf(lse), np.isneginf(t_lse))
    assert np.all(out[np.isneginf(lse)] == 0.0)
    for qty, got, want in (("out", out, t_out), ("lse", lse, t_lse), ("dq", dq, t_dq), ("dk", dk, t_dk), ("dv", dv, t_dv)):
        assert not np.isnan(got).any()
        scale_ = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))
        err = record(name, qty, got, want)
        assert err <= 1e-11 * scale_, (qty, err)
    if name.endswith("empty_row") or "excludes" in name or "lq_gt_lk" in name:
        assert np.isneginf(lse).any()


# SDPA cases: id -> (B, Hq, Hkv, Sq, Sk, D, mask kind, causal, window)
SDPA_TORCH_CASES = {
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
@pytest.mark.parametrize("name", list(SDPA_TORCH_CASES))
def test_sdpa_against_torch(name, layout):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    bsz, hq, hkv, sq, sk, d, kind, causal, window = SDPA_TORCH_CASES[name]
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
    # torch: every mask folded into one explicit boolean mask
    full = torch.ones(bsz, hq, sq, sk, dtype=torch.bool)
    if mask is not None:
        full = full & torch.tensor(mask)
    band = torch_visible(torch, sq, sk, causal, window or (-1, -1), "top_left")
    full = full & band
    t_out = F.scaled_dot_product_attention(
        torch.tensor(q),
        torch.tensor(k).repeat_interleave(hq // hkv, dim=1),
        torch.tensor(v).repeat_interleave(hq // hkv, dim=1),
        attn_mask=full,
    ).numpy()
    empty = ~full.any(dim=-1).numpy()
    # fully masked rows: the contract says 0; torch gives 0 (2.13 CPU) or NaN
    assert np.all(out[empty] == 0.0)
    t_empty = t_out[empty]
    assert np.all((t_empty == 0.0) | np.isnan(t_empty))
    assert not np.isnan(out).any()
    err = record(name + "_" + layout, "sdpa_out", out[~empty], t_out[~empty])
    assert err < 1e-12
    if "fully_masked" in name:
        assert empty.any()


# probs cases: id -> (history_len, Hq, Hkv, D, pos, window, scale)
PROBS_TORCH_CASES = {
    "d111_hist300_window64_gqa4": (300, 8, 2, 111, 250, 64, 1.0),
    "d256_hist1_all_to_one": (1, 4, 1, 256, 0, 0, 1.0),
    "d59_hist147_unbounded_scaled": (147, 3, 3, 59, 100, 0, 1.0 / math.sqrt(59)),
    "d64_window_larger_than_pos": (77, 2, 1, 64, 10, 40, 1.0),
}


@pytest.mark.parametrize("name", list(PROBS_TORCH_CASES))
def test_attention_probs_against_torch(name):
    torch = pytest.importorskip("torch")
    n, hq, hkv, d, pos, window, scale = PROBS_TORCH_CASES[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    q = rs.standard_normal((hq, d)) * 0.3
    k_hist = rs.standard_normal((n, hkv, d)) * 0.3
    with np.errstate(all="raise"):
        probs = ref.attention_probs(q, k_hist, pos=pos, window=window, scale=scale)
    kt = torch.tensor(k_hist).repeat_interleave(hq // hkv, dim=1)  # [n, Hq, D]
    s = scale * torch.einsum("hd,thd->ht", torch.tensor(q), kt)
    t = torch.arange(n)
    earliest = pos + 1 - window if (window != 0 and pos + 1 >= window) else 0
    vis = (t >= earliest) & (t <= pos)
    t_probs = torch.softmax(s.masked_fill(~vis, -math.inf), dim=-1).numpy()
    assert np.all(probs[:, ~vis.numpy()] == 0.0)
    err = record(name, "probs", probs, t_probs)
    assert err < 1e-13


def test_float32_mode_against_torch_float32():
    """The naive float32 reference and torch float32 land near each other."""
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(77)
    cu = [0, 60, 100]
    q = rs.standard_normal((100, 4, 64))
    k = rs.standard_normal((100, 2, 64))
    v = rs.standard_normal((100, 2, 64))
    out32, _ = ref.varlen_attention_fwd(q, k, v, cu, cu, causal=True, dtype=np.float32)
    out64, _ = ref.varlen_attention_fwd(q, k, v, cu, cu, causal=True)
    t32, _, _ = torch_varlen(
        torch,
        q.astype(np.float32).astype(np.float64),
        k.astype(np.float32).astype(np.float64),
        v.astype(np.float32).astype(np.float64),
        np.zeros(q.shape),
        cu,
        cu,
        True,
        (-1, -1),
        0.0,
        "bottom_right",
        None,
    )
    assert out32.dtype == np.float32
    assert float(np.abs(out32 - out64).max()) < 1e-5
    assert float(np.abs(out32 - t32).max()) < 1e-5
