"""sdpa_arena.seed run natively (wgpu-py; lavapipe here) against the float64 reference, judged by
the tolerance rule, over the interface's conformance grid: awkward sizes, every mask kind, both
layouts, empty rows, and seq_k >= 512 at head_dim 64, where a loop-truncating lavapipe once
returned wrong values (docs/runtimes.md, "Debian 12's lavapipe truncates loops")."""

import numpy as np
import pytest

from wgattn import conformance, registry
from wgattn.interfaces.sdpa_arena import INTERFACE as sdpa_arena
from wgattn.interfaces.sdpa_arena import SdpaCase

KERNEL = registry.load().kernel("sdpa_arena.seed")
CASES = sdpa_arena.conformance_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_seed_kernel_passes_the_grid(native_runtime, case):
    rows = conformance.run_case(native_runtime, KERNEL, case)
    assert all(r["pass"] for r in rows), rows


def test_fully_padded_rows_are_zero(native_runtime):
    case = SdpaCase(batch=2, heads=2, seq_q=5, seq_k=9, head_dim=4, mask="padding")
    inputs = case.inputs()
    inputs["mask"][1] = False  # batch 1 sees no key at all
    out = native_runtime.run(case.plan(KERNEL, inputs, native_runtime.target)).outputs["out"]
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
    plan = case.plan(KERNEL, inputs, native_runtime.target, source="@compute @workgroup_size(1) fn attention() { let x = ; }")
    with pytest.raises(ValueError, match="does not compile"):
        native_runtime.run(plan)


@pytest.mark.parametrize(
    "kwargs, kind",
    [
        ({}, "none"),
        ({"causal": True}, "causal"),
        ({"window": (5, 0)}, "window"),
        ({"window": (5, 0), "causal": True}, "window"),
        ({"window": (-1, 0)}, "causal"),
    ],
)
def test_reference_keywords_map_onto_mask_kinds(kwargs, kind):
    q = np.zeros((1, 1, 4, 2), np.float32)
    assert sdpa_arena.case_from_reference(q, q, q, **kwargs).options["mask_kind"] == kind


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"window": (3, 2)}, "carries windows \\(w, 0\\) only"),
        ({"mask": np.ones((1, 1, 1, 4), bool), "causal": True}, "one mask kind per call"),
    ],
)
def test_what_the_interface_cannot_carry_is_refused(kwargs, message):
    q = np.zeros((1, 1, 4, 2), np.float32)
    with pytest.raises(ValueError, match=message):
        sdpa_arena.case_from_reference(q, q, q, **kwargs)
