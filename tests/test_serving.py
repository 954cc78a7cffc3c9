"""How the server sends the page's files: gzip'd for clients that accept it (Pyodide's big files as
the copies set-up made), cached for good where the URL names a version (Pyodide, the wheel, Swagger
UI) and revalidated elsewhere; the committed benchmark records (GET /api/records); and /docs made
of files this server serves, under a policy that allows nothing off the machine."""

import gzip
import json
import re

import pytest
from fastapi.testclient import TestClient

from app import main, security, server
from app.paths import HISTORY, PYODIDE, ROOT
from helpers import LOCAL
from wgattn import bandwidth, bench, protocol
from wgattn.page import bench_import

client = TestClient(main, base_url=LOCAL)
GZIP = {"Accept-Encoding": "gzip"}
IDENTITY = {"Accept-Encoding": "identity"}

needs_pyodide = pytest.mark.skipif(not PYODIDE.is_dir(), reason="Pyodide is not installed (.cache/pyodide): run make setup")
needs_wheel = pytest.mark.skipif(server.wheel_path() is None, reason="no wgattn wheel: run make setup (scripts/build_wheel.sh)")


def test_the_page_s_files_are_gzipped_for_clients_that_accept_it():
    plain = client.get("/static/bench.js", headers=IDENTITY)
    packed = client.get("/static/bench.js", headers=GZIP)
    assert plain.headers.get("content-encoding") is None and packed.headers["content-encoding"] == "gzip"
    assert int(packed.headers["content-length"]) < len(plain.content) / 2
    assert packed.content == plain.content  # the client decodes it to the same file
    api = client.get("/api/kernels", headers=GZIP)
    assert api.headers["content-encoding"] == "gzip" and api.json()["kernels"]


@needs_pyodide
def test_pyodide_is_sent_as_its_gzip_copy_with_its_own_type():
    url = "/pyodide/0.17.1/pyodide.asm.wasm"
    r = client.get(url, headers=GZIP)
    assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
    assert r.headers["content-type"] == "application/wasm"  # streaming compilation needs it
    assert int(r.headers["content-length"]) == (PYODIDE / "pyodide.asm.wasm.gz").stat().st_size
    assert r.headers["vary"] == "Accept-Encoding" and r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert r.content == (PYODIDE / "pyodide.asm.wasm").read_bytes()
    raw = client.get(url, headers=IDENTITY)
    assert raw.headers.get("content-encoding") is None and raw.content == r.content
    # the copy is the same file compressed (set-up's gzip -6)
    assert gzip.decompress((PYODIDE / "pyodide.asm.wasm.gz").read_bytes()) == raw.content


@needs_pyodide
def test_versioned_urls_are_cached_for_good_and_others_revalidated():
    assert client.get("/pyodide/0.17.1/pyodide.js").headers["cache-control"] == "public, max-age=31536000, immutable"
    for path in ("/", "/selftest", "/static/main.js", "/shaders/manifest.json", "/py/wheel.json"):
        assert client.get(path).headers["cache-control"] == "no-cache", path
    first = client.get("/static/main.js")
    again = client.get("/static/main.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert client.get("/pyodide/pyodide.js").status_code == 404  # only under its version


@needs_pyodide
@needs_wheel
def test_wheel_json_lists_what_loading_python_fetches_with_its_size():
    info = client.get("/py/wheel.json").json()
    assert info["pyodide"] == "/pyodide/0.17.1/"
    urls = [f["url"] for f in info["files"]]
    assert urls[:4] == [f"/pyodide/0.17.1/{n}" for n in ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data")]
    assert "/pyodide/0.17.1/numpy.data" in urls and "/pyodide/0.17.1/micropip.js" in urls
    assert "/pyodide/0.17.1/pytest.js" not in urls  # the page does not load it
    assert urls[-1] == info["url"]  # the wheel, last
    for f in info["files"]:  # each size is what a client that accepts gzip receives
        r = client.get(f["url"], headers=GZIP)
        sent = int(r.headers["content-length"]) if "content-length" in r.headers else len(r.content)
        assert r.status_code == 200 and sent == f["bytes"], f
    r = client.get(info["url"])
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    selftest = client.get("/py/wheel.json?packages=numpy,pytest,micropip").json()
    assert "/pyodide/0.17.1/pytest.js" in [f["url"] for f in selftest["files"]]
    bad = client.get("/py/wheel.json?packages=numpy,nope")
    assert bad.status_code == 422 and "nope" in bad.json()["detail"] and "numpy" in bad.json()["detail"]


def test_docs_are_served_from_this_server_under_its_policy():
    if server.swagger_version() is None:
        pytest.skip("Swagger UI is not installed (node_modules/swagger-ui-dist): run make setup")
    r = client.get("/docs")
    assert r.status_code == 200
    html = r.text
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and all(a.startswith("/vendor/swagger-ui/") or a.startswith("data:") for a in assets), assets
    for a in assets:
        if a.startswith("/"):
            got = client.get(a)
            assert got.status_code == 200 and got.headers["cache-control"] == "public, max-age=31536000, immutable", a
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    for directive, sources in csp.items():  # nothing off the machine, no inline code but the hashed script
        for source in sources.split():
            assert source.startswith("'") or source == "data:", (directive, source)
    assert "'unsafe-inline'" not in csp["script-src"] and "'unsafe-eval'" not in csp["script-src"]
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert security.docs_csp(html) == r.headers["content-security-policy"] and "'sha256-" in csp["script-src"]
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/redoc").status_code == 404  # ReDoc would come from a CDN: not served


def test_records_are_the_committed_history_read_by_the_page_s_checker():
    body = client.get("/api/records").json()
    paths = [s["path"] for s in body["sources"]]
    charted = [*HISTORY.glob("*.jsonl"), *(HISTORY / "decode").glob("*.jsonl")]  # not gemm/, prefill/
    assert paths == sorted(p.relative_to(ROOT).as_posix() for p in charted)
    for s in body["sources"]:
        assert s["records"] == json.loads(json.dumps(bench_import.read((ROOT / s["path"]).read_text())))
        assert s["name"] == s["path"].rsplit("/", 1)[1][: -len(".jsonl")] and s["date"] == s["name"][:10]
    h100 = next(s for s in body["sources"] if s["path"] == "bench/history/2026-11-24-h100.jsonl")
    assert {r["runtime"] for r in h100["records"]["bench"]} == {"native", "chromium", "torch"}
    decode = [s for s in body["sources"] if s["records"]["bandwidth"]]
    assert decode and all(r["kind"] in bandwidth.BANDWIDTH_KINDS for s in decode for r in s["records"]["bandwidth"])


def test_a_history_file_that_does_not_read_is_a_500_naming_it(monkeypatch, tmp_path):
    from app import records

    (tmp_path / "2026-01-01-x.jsonl").write_text('{"op": "fwd"}\n')
    monkeypatch.setattr(records, "HISTORY", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    r = TestClient(main, base_url=LOCAL).get("/api/records")
    assert r.status_code == 500 and r.json()["detail"].startswith("2026-01-01-x.jsonl: record 0: expected the fields")


def test_decode_records_are_checked_as_a_bandwidth_record_is():
    m = protocol.Measured(samples=[1.0] * 5, reps=1, warmup_s=0.1, warmed=True, resolution_ns=1.0)
    shape = {"batch": 1, "cache": "f16"}
    proto = protocol.Protocol.of(5, 0.1)
    made = bandwidth.record("c", shape, "paged_decode.split_f16", "f16", 100, m, proto, "gpu", "a", bench.RunInfo.now())
    assert set(made) == set(bandwidth.BandwidthRecord.__annotations__)  # the declared shape is what is written
    text = json.dumps(made)
    assert bench_import.read(text) == {"bench": [], "bandwidth": [json.loads(text)]}
    older = {k: v for k, v in made.items() if k not in ("dtype", "browser", "flags", "repeat", "verified")}
    (read,) = bench_import.read(json.dumps(older))["bandwidth"]
    assert read["dtype"] == "f16" and read["flags"] == [] and read["verified"] is None  # what older records lack
    for bad, expected in [
        (dict(made, kind="nope"), "kind must be one of"),
        (dict(made, gbps=-1), "gbps must be a finite number >= 0"),
        (dict(made, shape=[1]), "shape must be the case's configuration"),
        (dict(made, extra=1), "expected the fields of a bandwidth record"),
    ]:
        with pytest.raises(ValueError, match=expected):
            bench_import.read(json.dumps(bad))
