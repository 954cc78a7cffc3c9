"""Every registered interface is one object on one base (wgattn.interfaces.base.Interface) that
owns what Python knows of it: its checks and layout, its plan, reference, grid, live
configuration, benchmark cases, pictures and localisation geometry. What the base promises is
held here for every interface at once, so a new one is held to it by being registered."""

import dataclasses
import sys
import types

import numpy as np
import pytest

from helpers import TARGET
from wgattn import bench, interfaces, live, registry
from wgattn.errors import InterfaceMismatch
from wgattn.interfaces import Interface, LiveConfig
from wgattn.interfaces.base import Layout

REG = registry.load()
IFACES = interfaces.every()


def test_every_registered_interface_has_its_object():
    assert [i.name for i in IFACES] == list(REG.abis)
    assert all(isinstance(i, Interface) for i in IFACES)
    assert all(interfaces.of(k) is interfaces.get(k.interface) for k in REG.kernels.values())


def test_an_incomplete_interface_cannot_be_made():
    class Half(Interface):
        name = "half"

    with pytest.raises(TypeError, match="abstract"):
        Half()


def test_get_refuses_a_module_without_its_object(monkeypatch):
    with pytest.raises(ValueError, match="unknown interface 'nope'"):
        interfaces.get("nope")
    fake = types.ModuleType("wgattn.interfaces.attn_probs")
    fake.INTERFACE = interfaces.get("sdpa_arena")
    monkeypatch.setitem(sys.modules, "wgattn.interfaces.attn_probs", fake)
    monkeypatch.delitem(interfaces._LOADED, "attn_probs")
    with pytest.raises(InterfaceMismatch, match="INTERFACE must be the attn_probs Interface object"):
        interfaces.get("attn_probs")


@pytest.mark.parametrize("iface", IFACES, ids=lambda i: i.name)
def test_outputs_grid_and_layout(iface):
    cases = iface.conformance_cases()
    assert iface.OUTPUTS and all(isinstance(o, str) for o in iface.OUTPUTS)
    assert len({c.name for c in cases}) == len(cases) == len(iface.GRID)
    lay = iface.layout(cases[0])
    assert isinstance(lay, Layout) and [o.name for o in lay.outputs] == list(iface.OUTPUTS)
    assert set(lay.buffers) | {iface.abi.uniform.name} == {b.name for b in iface.abi.bindings}
    assert set(lay.values) | set(iface.abi.padding) == {p.name for p in iface.abi.params}


@pytest.mark.parametrize("iface", IFACES, ids=lambda i: i.name)
def test_the_live_configuration_carries_its_bounds(iface):
    cls = iface.Config
    assert issubclass(cls, LiveConfig) and dataclasses.is_dataclass(cls)
    rows = cls.schema()
    assert [r["name"] for r in rows] == [f.name for f in dataclasses.fields(cls)]
    for row in rows:
        if row["type"] in ("int", "float"):
            assert row["min"] <= row["default"] <= row["max"], row
        if row["type"] == "str":
            assert row["default"] in row["choices"], row
    run = live.build(iface.kernels()[0].id, {})
    assert set(run.config.to_dict()) == {r["name"] for r in rows}
    plan = run.plan(TARGET)
    assert not plan.unavailable and [o.name for o in plan.outputs] == list(iface.OUTPUTS)


@pytest.mark.parametrize("iface", IFACES, ids=lambda i: i.name)
def test_a_bound_is_refused_by_name(iface):
    for row in iface.Config.schema():
        if row["type"] == "int":
            with pytest.raises(ValueError, match=rf"{row['name']} must be an integer in {row['min']}\.\.{row['max']}"):
                iface.Config(**{row["name"]: row["max"] + 1})


@pytest.mark.parametrize("iface", IFACES, ids=lambda i: i.name)
def test_pictures_are_the_reference_s(iface):
    """Each row of a heatmap is the probability row the reference computes: its probabilities
    times v is the reference's output (packed and padded interfaces), or they are the reference's
    probabilities (the probability interfaces)."""
    case = iface.conformance_cases()[0]
    heads = case.inputs["q"].shape[-2] if iface.name != "sdpa_arena" else case.inputs["q"].shape[1]
    p, visible, layout = iface.probabilities(case, heads - 1, 1 << 22)
    assert p.shape == visible.shape and (p[~visible] == 0).all() and layout
    ref = iface.reference(case)
    if "probs" in ref:
        want = iface.head_view(case, ref["probs"], heads - 1, heads)
        np.testing.assert_allclose(p, want[: p.shape[0]], rtol=1e-12, atol=1e-15)
    elif iface.name in ("paged_decode", "paged_prefill"):  # rows (sequence, new token); columns the cache's positions
        i = case.inputs
        bs, sq = i["k_cache"].shape[1], i["q"].shape[1]
        kv = (heads - 1) // (i["q"].shape[2] // i["k_cache"].shape[2])
        want = iface.head_view(case, ref["out"], heads - 1, heads)
        for r in range(p.shape[0]):
            b = r // sq
            v = i["v_cache"][i["block_table"][b].clip(0)][:, :, kv].reshape(-1, i["q"].shape[3])[: p.shape[1]]
            v = np.pad(v, ((0, p.shape[1] - v.shape[0]), (0, 0))).astype(np.float64)
            np.testing.assert_allclose(p[r] @ v, want[r], rtol=1e-9, atol=1e-9)
        assert bs and p.shape[0] >= 2 * sq
    else:
        i = case.inputs
        v = i["v"].astype(np.float64)
        if iface.name == "sdpa_arena":
            v = v[:, heads - 1].reshape(-1, v.shape[-1]) if case.options.get("layout", "bhsd") == "bhsd" else None
            if v is None:
                pytest.skip("the first sdpa_arena case is bhsd")
            out = (p @ v)[: p.shape[0]]
        else:
            kv = (heads - 1) // (i["q"].shape[1] // i["k"].shape[1])
            out = p @ v[:, kv]
        # The backward's case carries the forward's out, rounded to float32.
        got_out, tol = (ref["out"], 1e-9) if "out" in ref else (i["out"], 1e-5)
        want = iface.head_view(case, got_out, heads - 1, heads)[: p.shape[0]]
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("iface", [i for i in IFACES if i.bench_op in bench.OPS], ids=lambda i: i.name)
def test_benchmark_cases_plan(iface):
    dense = bench.dense_inputs(iface.bench_op, (2, 2, 32, 8))
    cases = iface.bench_cases(dense, causal=True)
    assert len(cases) == iface.bench_plans((2, 2, 32, 8))
    for kernel in iface.kernels():  # each plans, or says why the adapter cannot run it at all
        assert all(iface.plan(kernel, c, TARGET).unavailable == TARGET.lacks(kernel) for c in cases)


@pytest.mark.parametrize("iface", [i for i in IFACES if i.bench_op in bench.BANDWIDTH_OPS], ids=lambda i: i.name)
def test_bandwidth_cases_plan(iface):
    """An op timed as bandwidth times one configuration (the interface's Config, its defaults
    here): its case leaves its large inputs for the GPU to fill, each kernel plans it (their
    buffers get no bytes) and counts the bytes it must read."""
    from wgattn import bandwidth

    case = iface.bench_case(iface.Config(), "defaults")
    filled = [n for n, a in case.inputs.items() if bandwidth.is_device_filled(a)]
    assert filled
    for kernel in iface.kernels():
        plan = iface.plan(kernel, case, TARGET)
        assert plan.unavailable == TARGET.lacks(kernel)
        if not plan.unavailable:
            assert all(b.data is None for b in plan.buffers if b.name in filled)
            assert [p.buffers[0].name for p in bandwidth.fill_plans(plan, case.inputs)] == filled
        assert iface.bench_bytes(kernel, case) > 0
