"""The JSON API through FastAPI's TestClient: status AND body, error paths included."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import main
from helpers import LOCAL
from wgattn import tolerance, wire
from wgattn.cases import MAX_ELEMENTS, digest
from wgattn.interfaces.sdpa_arena import SdpaCase

client = TestClient(main, base_url=LOCAL)
SMALL = {"batch": 1, "heads": 2, "seq_q": 9, "seq_k": 13, "head_dim": 5, "mask": "causal", "seed": 4}


def test_index_and_static_files():
    r = client.get("/")
    assert r.status_code == 200 and 'src="/static/main.js"' in r.text
    assert client.get("/static/webgpu.js").status_code == 200
    r = client.get("/shaders/sdpa_arena.seed.wgsl")
    assert r.status_code == 200
    assert r.text == (main and open("shaders/sdpa_arena.seed.wgsl").read())  # served as it is


def test_kernels_lists_the_registry():
    body = client.get("/api/kernels").json()
    ids = [k["id"] for k in body["kernels"]]
    assert "sdpa_arena.seed" in ids and len(ids) == len(set(ids))
    assert body["interfaces"]["sdpa_arena"]["reference"] == "sdpa"


def test_wheel_and_selftest_files_are_served():
    from app.server import wheel_path

    r = client.get("/py/wheel.json")
    if wheel_path() is None:  # set-up (scripts/build_wheel.sh) has not built it: a clear 503
        assert r.status_code == 503 and "build_wheel.sh" in r.json()["detail"]
        return
    assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"
    url = r.json()["url"]
    assert url.startswith("/py/") and url.split("/")[-1].startswith("wgattn-") and url.endswith("-py3-none-any.whl")
    w = client.get(url)
    assert w.status_code == 200 and w.content[:2] == b"PK"  # a zip
    assert client.get(url.replace(url.split("/")[2], "0" * 16)).status_code == 404  # another build's digest
    assert client.get("/py/0000000000000000/other-1.0-py3-none-any.whl").status_code == 404
    files = client.get("/py/selftest.json").json()["files"]
    assert "tests/test_reference.py" in files and "docs/contract.md" in files
    assert not any(p.startswith("py/") for p in files)  # the package comes from the wheel
    assert client.get("/py/bundle.json").status_code == 404  # the hand-written bundle is gone


def test_kernels_lists_live_configs():
    body = client.get("/api/kernels").json()
    ifaces = {k["interface"] for k in body["kernels"]}
    assert set(body["configs"]) == ifaces  # every interface has a live configuration
    assert {f["name"] for f in body["configs"]["flash_fwd"]} >= {"heads_kv", "causal_align", "window_left", "softcap", "padding"}


def test_run_seeded_matches_reference(native_runtime):
    r = client.post("/api/run", json={"config": SMALL})
    assert r.status_code == 200, r.text
    body = r.json()
    case = SdpaCase(**SMALL)
    inputs = case.inputs()
    assert body["digest"] == digest(inputs)
    assert body["adapter"]["runtime"] == "native"
    assert body["timings"]["wall_ms"] > 0
    out = wire.decode(body["outputs"]["out"])
    ref = case.reference(inputs)["out"]
    naive = tolerance.max_abs_err(case.reference(inputs, dtype=np.float32)["out"], ref)
    assert out.shape == (1, 2, 9, 5)
    assert tolerance.max_abs_err(out, ref) <= tolerance.allowance(naive, ref)


def test_run_on_client_inputs(native_runtime):
    case = SdpaCase(**dict(SMALL, mask="padding"))
    inputs = case.inputs()
    inputs["v"] = np.ones_like(inputs["v"])  # attention over ones is ones (or 0 on empty rows)
    sent = {k: wire.encode(v) for k, v in inputs.items() if v is not None}
    r = client.post("/api/run", json={"config": case.to_dict(), "inputs": sent})
    assert r.status_code == 200, r.text
    out = wire.decode(r.json()["outputs"]["out"])
    assert np.allclose(out, 1.0, atol=1e-6)
    assert r.json()["digest"] == digest(inputs)


def test_an_output_larger_than_any_input_is_answered(native_runtime):
    """attn_probs_batched's probabilities (positions x heads x history) may pass the element limit
    of an input (they are scores, bounded by MAX_SCORES): the answer holds them (it was a 500:
    the response model bounded outputs as inputs)."""
    config = {"positions": 64, "heads": 8, "heads_kv": 1, "history": 8193, "head_dim": 4}
    r = client.post("/api/run", json={"kernel": "attn_probs_batched.fast", "config": config})
    assert r.status_code == 200, r.text[:300]
    probs = wire.decode(r.json()["outputs"]["probs"])
    assert probs.size == 64 * 8 * 8193 > MAX_ELEMENTS
    assert np.allclose(probs.sum(axis=-1), 1.0, atol=1e-4)


def test_inputs_not_given_stay_seeded(native_runtime):
    """Only v sent: q and k are the seed's (the digest covers all three), v is the client's."""
    case = SdpaCase(**SMALL)
    inputs = case.inputs()
    inputs["v"] = np.ones_like(inputs["v"])
    r = client.post("/api/run", json={"config": SMALL, "inputs": {"v": wire.encode(inputs["v"])}})
    assert r.status_code == 200, r.text
    assert r.json()["digest"] == digest(inputs)
    assert np.allclose(wire.decode(r.json()["outputs"]["out"]), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    "config, expected",
    [
        ({"seq_q": 0}, "seq_q must be an integer in 1..65536"),
        ({"mask": "diagonal"}, "mask must be one of"),
        ({"layout": "sbhd"}, "layout must be one of"),
        ({"seq_q": 4096, "seq_k": 4096, "heads": 64, "head_dim": 64}, "case too large"),
        ({"window": -1}, "window must be an integer in 0..2147483647"),
    ],
)
def test_bad_config_is_422_with_a_reason(config, expected):
    r = client.post("/api/run", json={"config": config})
    assert r.status_code == 422
    assert expected in r.text


def test_a_config_of_another_interface_says_which_interface_the_kernel_takes():
    """sdpa_arena's whole configuration sent with a flash_fwd kernel: one 422 that names both
    interfaces and the kernel's fields (it was a bare list of the fields it did not know)."""
    r = client.post("/api/run", json={"kernel": "flash_fwd.tiled", "config": SMALL})
    assert r.status_code == 422
    assert "for flash_fwd; they are fields of the configuration of sdpa_arena, not of flash_fwd; its fields: [" in r.text


def test_bad_inputs_are_422_with_a_reason():
    case = SdpaCase(**SMALL)
    good = {k: wire.encode(v) for k, v in case.inputs().items() if v is not None}
    wrong_shape = dict(good, q=wire.encode(np.zeros((1, 2, 9, 4), np.float32)))
    r = client.post("/api/run", json={"config": SMALL, "inputs": wrong_shape})
    assert r.status_code == 422 and "input 'q' must be float32 of shape [1, 2, 9, 5]" in r.json()["detail"]
    short = dict(good, k={"dtype": "float32", "shape": [1, 2, 13, 5], "data": "AAAA"})
    r = client.post("/api/run", json={"config": SMALL, "inputs": short})
    assert r.status_code == 422 and "needs 520 bytes, got 3" in r.json()["detail"]
    nan = case.inputs()["q"].copy()
    nan[0, 0, 0, 0] = np.nan
    r = client.post("/api/run", json={"config": SMALL, "inputs": dict(good, q=wire.encode(nan))})
    assert r.status_code == 422 and "non-finite" in r.json()["detail"]
    r = client.post("/api/run", json={"config": SMALL, "inputs": dict(good, extra=good["q"])})
    assert r.status_code == 422 and "unknown inputs" in r.text


def test_unknown_kernel_is_a_422_naming_the_kernels():
    r = client.post("/api/run", json={"kernel": "nope", "config": SMALL})
    assert r.status_code == 422 and "kernel must be a registered kernel id, one of ['sdpa_arena.seed'" in r.text


def test_wrong_method_on_api_is_json_405():
    r = client.get("/api/run")
    assert r.status_code == 405 and r.json()["detail"] == "Method Not Allowed"


def test_malformed_json_is_422():
    r = client.post("/api/run", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "detail" in r.json()


def test_a_kernel_the_native_adapter_cannot_run_is_unavailable_not_failed(native_runtime):
    """flash_fwd.smx needs Chromium's subgroup matrices, which no wgpu-py adapter offers: the
    server says so in a 422 marked `unavailable`, which the page reports as not run natively."""
    r = client.post("/api/run", json={"kernel": "flash_fwd.smx", "config": {}})
    assert r.status_code == 422 and r.json()["unavailable"] is True
    detail = r.json()["detail"]
    assert "flash_fwd.smx needs adapter features" in detail and "chromium-experimental-subgroup-matrix" in detail
    # the adapter's description lists it, so that the page need not ask
    assert client.get("/api/adapter").json()["unavailable"]["flash_fwd.smx"] == detail
    bad = client.post("/api/run", json={"kernel": "flash_fwd.blocked", "config": {"head_dim": 0}})
    assert bad.status_code == 422 and "unavailable" not in bad.json()
