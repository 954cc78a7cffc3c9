"""sdpa_arena.seed run natively (wgpu-py; lavapipe here) against the float64 reference, judged by
the tolerance rule. Awkward sizes, every mask kind, both layouts, empty rows, and seq_k >= 512 at
head_dim 64, where a loop-truncating lavapipe once returned wrong values (SEEDS.md)."""
import numpy as np
import pytest

from wgattn import registry, tolerance
from wgattn.cases import SdpaCase

KERNEL = registry.load().kernel("sdpa_arena.seed")

CASES = [
    SdpaCase(batch=1, heads=2, seq_q=113, seq_k=203, head_dim=59, mask="none"),
    SdpaCase(batch=2, heads=3, seq_q=64, seq_k=600, head_dim=64, mask="causal", layout="bshd"),
    SdpaCase(batch=1, heads=2, seq_q=97, seq_k=1024, head_dim=64, mask="none"),
    SdpaCase(batch=1, heads=1, seq_q=33, seq_k=512, head_dim=64, mask="padding"),
    SdpaCase(batch=1, heads=2, seq_q=100, seq_k=80, head_dim=130, mask="window", window=7),
    SdpaCase(batch=3, heads=2, seq_q=33, seq_k=47, head_dim=16, mask="padding", layout="bshd", seed=3),
    SdpaCase(batch=1, heads=1, seq_q=1, seq_k=147, head_dim=111, mask="none"),
    SdpaCase(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=256, mask="causal"),
    SdpaCase(batch=2, heads=1, seq_q=40, seq_k=40, head_dim=8, mask="window", window=0),
    SdpaCase(batch=1, heads=2, seq_q=70, seq_k=30, head_dim=32, mask="causal", layout="bshd"),
]


def _id(c: SdpaCase) -> str:
    return f"{c.mask}-{c.layout}-b{c.batch}h{c.heads}-{c.seq_q}x{c.seq_k}-d{c.head_dim}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_seed_kernel_matches_reference(native_runtime, case):
    inputs = case.inputs()
    got = native_runtime.run(case.plan(KERNEL, inputs)).outputs["out"]
    ref = case.reference(inputs)["out"]
    naive = case.reference(inputs, dtype=np.float32)["out"]
    naive_err = tolerance.max_abs_err(naive, ref)
    err = tolerance.max_abs_err(got, ref)
    allowed = tolerance.allowance(naive_err, ref)
    assert np.isfinite(got).all()
    assert err <= allowed, f"max abs err {err:.3e} > allowance {allowed:.3e} (naive f32 {naive_err:.3e})"


def test_fully_padded_rows_are_zero(native_runtime):
    case = SdpaCase(batch=2, heads=2, seq_q=5, seq_k=9, head_dim=4, mask="padding")
    inputs = case.inputs()
    inputs["mask"][1] = False  # batch 1 sees no key at all
    out = native_runtime.run(case.plan(KERNEL, inputs)).outputs["out"]
    assert np.all(out[1] == 0.0)
    assert np.any(out[0] != 0.0)


def test_too_large_for_the_adapter_is_refused_before_dispatch(native_runtime):
    from wgattn.plan import Buffer, Plan

    limit = native_runtime.limits["max-storage-buffer-binding-size"]
    plan = Plan(buffers=[Buffer("arena", limit + 4, "storage")], dispatches=[], outputs=[])
    with pytest.raises(ValueError, match="binds at most"):
        native_runtime.run(plan)


def test_bad_wgsl_is_a_clear_error(native_runtime):
    case = SdpaCase(seq_q=4, seq_k=4, head_dim=4, heads=1)
    inputs = case.inputs()
    plan = case.plan(KERNEL, inputs, source="@compute @workgroup_size(1) fn attention() { let x = ; }")
    with pytest.raises(ValueError, match="does not compile"):
        native_runtime.run(plan)
