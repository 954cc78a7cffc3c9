"""wgattn.ranges: what a kernel's float32 and float16 arithmetic holds, checked where every caller
plans (Interface.check_range): the Python API refuses what the server refuses, with the same
words; every grid case is inside; a float16 kernel must say what it holds in float16."""

import json

import numpy as np
import pytest

from wgattn import bandwidth, conformance, interfaces, native, ranges, reference, registry


def test_the_bounds():
    q = np.array([[3.0, 4.0], [0.0, 1.0]])  # largest row norm 5
    k = np.array([[6.0, 8.0]])  # 10
    b = ranges.scores(2.0, q, k)
    assert (b.value, b.limit) == (100.0, 2.0**124)
    assert ranges.scores(0.5, q, k).value == 50.0  # max(1, |scale|): the unscaled dot product too
    assert ranges.scores(1.0, q, k, slope=-3.0, distance=7).value == 50.0 + 21.0
    assert ranges.sums(np.array([-4.0, 2.0]), 10).value == 40.0
    filled = bandwidth.device_filled((4, 16))
    assert ranges.amax(filled) == bandwidth.FILL_MAX and ranges.row_norm(filled) == bandwidth.FILL_MAX * 4
    h = ranges.half("4 * v", {"v": 20000.0})
    assert (h.value, h.limit, h.accepts) == (80000.0, 65504.0, "max|v| <= 16376")
    assert ranges.half("q * k", {"q": 2.0, "k": 3.0}).accepts == "max|q| * max|k| <= 65504"


def test_check_names_the_bound_held_least():
    bounds = [ranges.half("v", {"v": 70000.0}), ranges.half("4 * v", {"v": 70000.0})]
    with pytest.raises(ValueError, match=r"4 \* v \(held in float16\).*accepts max\|v\| <= 16376"):
        ranges.check("k", bounds)
    ranges.check("k", [ranges.half("4 * v", {"v": 16376.0})])  # the largest accepted


def test_the_python_api_refuses_as_the_server_does(native_runtime):
    rs = np.random.RandomState(0)
    q = rs.standard_normal((1, 1, 2, 16)).astype(np.float32)
    cache = rs.standard_normal((3, 16, 1, 16)).astype(np.float32)
    table, lens = np.array([[0, 1]], np.int32), np.array([20], np.int32)
    with pytest.raises(ValueError, match=r"accepts max\|v_cache\| <= 65504"):
        native.decode_attention(q, cache, cache * np.float32(70000), table, lens, impl="split_f16")
    native.decode_attention(q, cache, cache * np.float32(1000), table, lens, impl="split_f16")  # inside
    with pytest.raises(ValueError, match=r"accepts \|alibi_slopes\| <="):
        native.decode_attention(q, cache, cache, table, lens, alibi_slopes=np.full(2, -3.4e38, np.float32))
    big = (rs.standard_normal((1, 1, 4, 8)) * 1e19).astype(np.float32)
    with pytest.raises(ValueError, match="the scores"):
        native.sdpa(big, big, big)
    # The float64 reference computes all of it: it is the kernels' arithmetic that cannot.
    assert np.isfinite(reference.sdpa(big, big, big)).all()


def test_every_grid_case_is_inside_its_kernels_bounds():
    for kernel in registry.load().kernels.values():
        iface = interfaces.of(kernel)
        for case in iface.conformance_cases(0):
            iface.check_range(kernel, conformance.judged_case(kernel, case))


def test_a_float16_kernel_says_what_it_holds_in_float16(tmp_path):
    manifest = json.loads((registry.shader_dir() / "manifest.json").read_text())
    for kid, spec in manifest["kernels"].items():
        if spec.get("precision") == "f16":
            assert spec["half"], kid
    spec = manifest["kernels"]["paged_decode.split_f16"]
    for half, why in ((None, "names what it holds in float16"), (["v_cache + 1"], "a product of names and numbers")):
        changed = dict(spec)
        if half is None:
            del changed["half"]
        else:
            changed["half"] = half
        broken = dict(manifest, kernels=dict(manifest["kernels"], **{"paged_decode.split_f16": changed}))
        with pytest.raises(ValueError, match=why):
            registry._parse(broken, "manifest.json", registry.shader_dir())
