"""One validation path: wgattn.reference's checkers are the only ones, so every entry
point that takes the varlen options (the reference functions, each interface's case_from_reference
and plan, the API) accepts and refuses the same values, with the reference's message word for word.

Drifts this pins: reference.varlen_attention_fwd(causal=1) was accepted while the flash_fwd and
varlen_fwd interfaces refused it; scale=1e-40 (a float32 subnormal, 0 on many GPUs) was refused by
varlen_fwd and accepted by flash_fwd, sdpa_arena, the reference and the API."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import main
from helpers import LOCAL, TARGET
from wgattn import reference, registry
from wgattn.interfaces import Case
from wgattn.interfaces.attn_probs import INTERFACE as attn_probs
from wgattn.interfaces.attn_probs_batched import INTERFACE as attn_probs_batched
from wgattn.interfaces.flash_fwd import INTERFACE as flash_fwd
from wgattn.interfaces.sdpa_arena import INTERFACE as sdpa_arena
from wgattn.interfaces.varlen_bwd import INTERFACE as varlen_bwd
from wgattn.interfaces.varlen_fwd import INTERFACE as varlen_fwd

_RS = np.random.RandomState(14)
_CU = np.array([0, 3, 8], dtype=np.int32)  # equal lengths: varlen_fwd's top-left causal fits
_Q = _RS.standard_normal((8, 2, 4)).astype(np.float32)
_K = _RS.standard_normal((8, 2, 4)).astype(np.float32)
_V = _RS.standard_normal((8, 2, 4)).astype(np.float32)
_DOUT = _RS.standard_normal((8, 2, 4)).astype(np.float32)
_OUT, _LSE = (a.astype(np.float32) for a in reference.varlen_attention_fwd(_Q, _K, _V, _CU, _CU))


def _kernel(interface):
    return registry.load().kernels_of(interface)[0]


def _varlen_case(**options):
    return Case("c", {"q": _Q, "k": _K, "v": _V, "cu_seqlens_q": _CU, "cu_seqlens_k": _CU}, options)


def _bwd_case(**options):
    inputs = dict(_varlen_case().inputs, out=_OUT, dout=_DOUT, lse=_LSE)
    return Case("c", inputs, options)


# Every entry point that takes all five varlen options.
FULL = {
    "reference.varlen_attention_fwd": lambda **o: reference.varlen_attention_fwd(_Q, _K, _V, _CU, _CU, **o),
    "reference.varlen_attention_bwd": lambda **o: reference.varlen_attention_bwd(_DOUT, _Q, _K, _V, _OUT, _LSE, _CU, _CU, **o),
    "flash_fwd.case_from_reference": lambda **o: flash_fwd.case_from_reference(_Q, _K, _V, _CU, _CU, **o),
    "flash_fwd.plan": lambda **o: flash_fwd.plan(_kernel("flash_fwd"), _varlen_case(**o), TARGET),
    "flash_fwd.reference": lambda **o: flash_fwd.reference(_varlen_case(**o)),
    "varlen_bwd.case_from_reference": lambda **o: varlen_bwd.case_from_reference(_DOUT, _Q, _K, _V, _OUT, _LSE, _CU, _CU, **o),
    "varlen_bwd.plan": lambda **o: varlen_bwd.plan(_kernel("varlen_bwd"), _bwd_case(**o), TARGET),
    "varlen_fwd.case_from_reference": lambda **o: varlen_fwd.case_from_reference(_Q, _K, _V, _CU, _CU, **o),
}
# varlen_fwd's own case carries causal and scale only.
CAUSAL_SCALE = dict(
    FULL,
    **{
        "varlen_fwd.plan": lambda **o: varlen_fwd.plan(_kernel("varlen_fwd"), _varlen_case(**o), TARGET),
        "varlen_fwd.reference": lambda **o: varlen_fwd.reference(_varlen_case(**o)),
    },
)

BAD_CAUSAL_SCALE = {
    "causal=1": {"causal": 1},
    "causal=0": {"causal": 0},
    "causal=np.int64(1)": {"causal": np.int64(1)},
    "causal='yes'": {"causal": "yes"},
    "causal=None": {"causal": None},
    "scale=1e-40": {"scale": 1e-40},
    "scale=-1e-40": {"scale": -1e-40},
    "scale=f32-subnormal": {"scale": np.float32(1e-45)},
    "scale=1e39": {"scale": 1e39},
    "scale=0": {"scale": 0.0},
    "scale=nan": {"scale": float("nan")},
    "scale=-inf": {"scale": -float("inf")},
    "scale=True": {"scale": True},
    "scale='0.5'": {"scale": "0.5"},
}
BAD_OTHER = {
    "window=(-2,0)": {"window": (-2, 0)},
    "window=(1,)": {"window": (1,)},
    "window=(1.5,2)": {"window": (1.5, 2)},
    "window=7": {"window": 7},
    "softcap=-1": {"softcap": -1.0},
    "softcap=nan": {"softcap": float("nan")},
    "softcap=True": {"softcap": True},
    # The one numeric check: a softcap float32 would flush to 0 ("off") or overflow to infinity.
    "softcap=1e-320": {"softcap": 1e-320},
    "softcap=1e-39": {"softcap": 1e-39},
    "softcap=3.5e38": {"softcap": 3.5e38},
    "softcap=1e308": {"softcap": 1e308},
    "causal_align='bottom-right'": {"causal_align": "bottom-right"},
    "causal_align=None": {"causal_align": None},
}


def _message(fn, options):
    with pytest.raises(ValueError) as info:
        fn(**options)
    return str(info.value)


@pytest.mark.parametrize("bad", list(BAD_CAUSAL_SCALE), ids=list(BAD_CAUSAL_SCALE))
def test_causal_and_scale_one_rule_one_message(bad):
    options = BAD_CAUSAL_SCALE[bad]
    expected = _message(FULL["reference.varlen_attention_fwd"], options)
    assert expected.split(" ")[0] in options  # the message names the argument
    got = {name: _message(fn, options) for name, fn in CAUSAL_SCALE.items()}
    assert got == {name: expected for name in CAUSAL_SCALE}


@pytest.mark.parametrize("bad", list(BAD_OTHER), ids=list(BAD_OTHER))
def test_window_softcap_align_one_rule_one_message(bad):
    options = BAD_OTHER[bad]
    expected = _message(FULL["reference.varlen_attention_fwd"], options)
    assert expected.split(" ")[0] in options
    got = {name: _message(fn, options) for name, fn in FULL.items()}
    assert got == {name: expected for name in FULL}


# Faults of the tensors: one message each, the reference's, whichever entry point meets them.
_I = dict(q=_Q, k=_K, v=_V, cu_seqlens_q=_CU, cu_seqlens_k=_CU)
BAD_SHAPES = {
    "q of ints": dict(_I, q=_Q.astype(np.int32)),
    "q 2-D": dict(_I, q=_Q[:, 0]),
    "k head dim": dict(_I, k=_K[:, :, :3], v=_V[:, :, :3]),
    "v shape": dict(_I, v=_V[:5]),
    "GQA 2 on 3": dict(_I, k=np.zeros((8, 3, 4), np.float32), v=np.zeros((8, 3, 4), np.float32)),
    "cu_seqlens_q decreasing": dict(_I, cu_seqlens_q=np.array([0, 5, 3, 8], np.int32)),
    "cu_seqlens_k too short": dict(_I, cu_seqlens_k=np.array([0, 8], np.int32)),
}
SHAPE_ENTRIES = {
    "reference.varlen_attention_fwd": lambda i: reference.varlen_attention_fwd(**i),
    "reference.varlen_attention_bwd": lambda i: reference.varlen_attention_bwd(_DOUT, out=_OUT, lse=_LSE, **i),
    "flash_fwd.case_from_reference": lambda i: flash_fwd.case_from_reference(**i),
    "flash_fwd.plan": lambda i: flash_fwd.plan(_kernel("flash_fwd"), Case("c", i, {}), TARGET),
    "varlen_bwd.case_from_reference": lambda i: varlen_bwd.case_from_reference(_DOUT, out=_OUT, lse=_LSE, **i),
    "varlen_bwd.plan": lambda i: varlen_bwd.plan(
        _kernel("varlen_bwd"), Case("c", dict(i, out=_OUT, dout=_DOUT, lse=_LSE), {}), TARGET
    ),
    "varlen_fwd.case_from_reference": lambda i: varlen_fwd.case_from_reference(**i),
    "varlen_fwd.plan": lambda i: varlen_fwd.plan(_kernel("varlen_fwd"), Case("c", i, {}), TARGET),
}


@pytest.mark.parametrize("bad", list(BAD_SHAPES), ids=list(BAD_SHAPES))
def test_tensor_faults_one_rule_one_message(bad):
    inputs = BAD_SHAPES[bad]
    got = {}
    for name, fn in SHAPE_ENTRIES.items():
        with pytest.raises(ValueError) as info:
            fn(inputs)
        got[name] = str(info.value)
    expected = got["reference.varlen_attention_fwd"]
    assert got == {name: expected for name in SHAPE_ENTRIES}


# Faults of the per-head parameters: the reference's message at every entry point that carries them
# (varlen_fwd, which has neither, refuses them by name).
BAD_HEADS = {
    "alibi_slopes of the wrong length": {"alibi_slopes": np.ones(3, np.float32)},
    "alibi_slopes with a NaN": {"alibi_slopes": np.array([0.5, np.nan], np.float32)},
    "sinks past float32": {"sinks": np.array([1e39, 0.0])},
    "sinks 2-D": {"sinks": np.zeros((2, 1), np.float32)},
}
HEAD_ENTRIES = {
    "reference.varlen_attention_fwd": lambda **i: reference.varlen_attention_fwd(_Q, _K, _V, _CU, _CU, **i),
    "reference.varlen_attention_bwd": lambda **i: reference.varlen_attention_bwd(_DOUT, _Q, _K, _V, _OUT, _LSE, _CU, _CU, **i),
    "flash_fwd.case_from_reference": lambda **i: flash_fwd.case_from_reference(_Q, _K, _V, _CU, _CU, **i),
    "flash_fwd.plan": lambda **i: flash_fwd.plan(_kernel("flash_fwd"), Case("c", dict(_varlen_case().inputs, **i), {}), TARGET),
    "varlen_bwd.case_from_reference": lambda **i: varlen_bwd.case_from_reference(_DOUT, _Q, _K, _V, _OUT, _LSE, _CU, _CU, **i),
    "varlen_bwd.plan": lambda **i: varlen_bwd.plan(_kernel("varlen_bwd"), Case("c", dict(_bwd_case().inputs, **i), {}), TARGET),
}


@pytest.mark.parametrize("bad", list(BAD_HEADS), ids=list(BAD_HEADS))
def test_head_parameter_faults_one_rule_one_message(bad):
    got = {name: _message(fn, BAD_HEADS[bad]) for name, fn in HEAD_ENTRIES.items()}
    expected = got["reference.varlen_attention_fwd"]
    assert expected.split(" ")[0].split("[")[0] in BAD_HEADS[bad]  # the message names the argument
    assert got == {name: expected for name in HEAD_ENTRIES}
    with pytest.raises(ValueError, match="varlen_fwd has no ALiBi and no sinks"):
        varlen_fwd.case_from_reference(_Q, _K, _V, _CU, _CU, **BAD_HEADS[bad])


GOOD = [
    {"causal": np.bool_(True), "scale": np.float32(-0.5)},
    {"causal": False, "scale": float(np.finfo(np.float32).tiny)},  # the smallest normal float32
    {"causal": True, "scale": -7.0},
    {"causal": True, "scale": 3},  # an integer scale is a real number
]


@pytest.mark.parametrize("options", GOOD, ids=[str(i) for i in range(len(GOOD))])
def test_good_options_accepted_everywhere(options):
    for name, fn in CAUSAL_SCALE.items():
        fn(**options)  # no ValueError anywhere


def test_scale_rule_is_the_same_for_sdpa_and_probs():
    q4 = _RS.standard_normal((1, 2, 3, 4)).astype(np.float32)
    qp = _RS.standard_normal((2, 2, 4)).astype(np.float32)
    kh = _RS.standard_normal((5, 1, 4)).astype(np.float32)
    pos = np.array([3, 4])
    for bad in (1e-40, 1e39, 0.0, True):
        expected = _message(lambda **o: reference.check_scale(o["scale"], 4), {"scale": bad})
        calls = {
            "reference.sdpa": lambda **o: reference.sdpa(q4, q4, q4, **o),
            "sdpa_arena.plan": lambda **o: sdpa_arena.plan(
                _kernel("sdpa_arena"), sdpa_arena.case_from_reference(q4, q4, q4, **o), TARGET
            ),
            "reference.attention_probs_batched": lambda **o: reference.attention_probs_batched(qp, kh, pos, **o),
            "attn_probs_batched.case_from_reference": lambda **o: attn_probs_batched.case_from_reference(qp, kh, pos, **o),
            "reference.attention_probs": lambda **o: reference.attention_probs(qp[0], kh, pos=3, **o),
            "attn_probs.case_from_reference": lambda **o: attn_probs.case_from_reference(qp[0], kh, pos=3, **o),
        }
        got = {name: _message(fn, {"scale": bad}) for name, fn in calls.items()}
        assert got == {name: expected for name in calls}, bad


def test_api_refuses_subnormal_scale_and_integer_causal():
    client = TestClient(main, base_url=LOCAL)
    r = client.post(
        "/api/run",
        json={
            "kernel": "attn_probs_batched.fast",
            "config": {"scale": 1e-40, "history": 8, "positions": 2, "heads": 2, "heads_kv": 1, "head_dim": 4},
        },
    )
    assert r.status_code == 422, r.text
    assert "scale must be a finite real number: a magnitude in" in r.text
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled", "config": {"causal": 1}})
    assert r.status_code == 422, r.text
    assert "causal must be" in r.text


def test_scale_bounds_are_the_normal_float32_range():
    tiny, big = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
    for ok in (tiny, -tiny, big, -big):
        assert reference.check_scale(ok, 4) == ok
    for bad in (np.nextafter(tiny, 0.0), np.nextafter(big, np.inf)):
        with pytest.raises(ValueError, match="scale must be None or a finite nonzero real number"):
            reference.check_scale(float(bad), 4)


def test_the_options_and_their_defaults_are_the_reference_s():
    """The packed interfaces take the reference's keywords with the reference's defaults (read from
    its one check), and refuse one it does not take as a Python call would."""
    import inspect

    from wgattn.interfaces._varlen import DEFAULT_OPTIONS

    params = inspect.signature(reference.varlen_attention_fwd).parameters
    assert DEFAULT_OPTIONS == {name: params[name].default for name in DEFAULT_OPTIONS} and len(DEFAULT_OPTIONS) == 5
    for name in ("flash_fwd.case_from_reference", "varlen_bwd.case_from_reference", "varlen_fwd.case_from_reference"):
        with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['causl'\]"):
            FULL[name](causl=True)
