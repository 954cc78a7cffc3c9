"""wgattn.native offers the reference's functions with the same keywords, plus impl=."""

import numpy as np
import pytest

from wgattn import native, reference, tolerance


def test_implementations_lists_seed(native_runtime):
    assert "seed" in native.implementations("sdpa")
    with pytest.raises(ValueError, match="unknown op 'nope'"):
        native.implementations("nope")


def test_sdpa_matches_reference(native_runtime):
    rs = np.random.RandomState(0)
    q, k, v = (rs.standard_normal((2, 3, 37, 24)).astype(np.float32) for _ in range(3))
    for kwargs in ({}, {"causal": True}, {"window": (4, 0)}, {"mask": rs.rand(2, 1, 1, 37) > 0.3}):
        got = native.sdpa(q, k, v, **kwargs)
        ref = reference.sdpa(q, k, v, **kwargs)
        naive = reference.sdpa(q, k, v, dtype=np.float32, **kwargs)
        assert tolerance.max_abs_err(got, ref) <= tolerance.allowance(tolerance.max_abs_err(naive, ref), ref)


def test_bad_impl_and_uncarried_keywords_are_value_errors(native_runtime):
    q = np.zeros((1, 1, 4, 2), np.float32)
    with pytest.raises(ValueError, match="impl must be one of"):
        native.sdpa(q, q, q, impl="nope")
    with pytest.raises(ValueError, match="carries windows"):
        native.sdpa(q, q, q, window=(2, 2))
