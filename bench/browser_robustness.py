"""Times the page's Benchmark section in headless Chromium twice: as shipped, and with Dawn's
robustness (bounds-check) transform turned off (`--enable-dawn-features=disable_robustness`).
A measurement only: the page never asks for it, and no user browser runs that way.

    .venv/bin/python bench/browser_robustness.py [--seq-lens 256,512] [--impls a,b]

Starts the server on 127.0.0.1, drives Debian's /usr/bin/chromium (SwiftShader WebGPU here) with
Playwright, and prints one line per record: impl, shape, median ms with and without robustness.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))
from pagetools import CHROMIUM, CHROMIUM_ARGS  # noqa: E402  (the e2e tests' browser settings)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _records(url: str, extra_args) -> list:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS + extra_args)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_function("['done', 'error'].includes(document.getElementById('bench').dataset.status)", timeout=590_000)
        out = page.evaluate("window.wgattn.bench && window.wgattn.bench.records")
        browser.close()
    return out or []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq-lens", default="256,512")
    ap.add_argument("--impls", default="sdpa_arena.seed,flash_fwd.tiled,flash_fwd.blocked")
    ap.add_argument("--shape", default="1,4,64", help="B,H,D")
    args = ap.parse_args()
    b, h, d = args.shape.split(",")
    port = _port()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/api/kernels", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        url = (
            f"{base}/?heads=1&seq_q=8&seq_k=8&head_dim=4&bench=fwd&bench_B={b}&bench_H={h}&bench_D={d}"
            f"&bench_seq_lens={args.seq_lens}&bench_causal=1&bench_runs=10&bench_impls={args.impls}"
        )
        checked = _records(url, [])
        unchecked = _records(url, ["--enable-dawn-features=disable_robustness"])
    finally:
        server.terminate()
        server.wait(10)
    key = lambda r: (r["impl"], tuple(r["shape"]))  # noqa: E731
    other = {key(r): r for r in unchecked}
    print(f"{'impl':24s} {'shape':16s} {'robust ms':>10s} {'no robustness ms':>17s} {'ratio':>6s}")
    for r in checked:
        u = other.get(key(r))
        if u:
            print(
                f"{r['impl']:24s} {','.join(map(str, r['shape'])):16s} {r['median_ms']:10.2f} "
                f"{u['median_ms']:17.2f} {r['median_ms'] / u['median_ms']:6.2f}"
            )
    print(json.dumps({"adapter": checked[0]["adapter"] if checked else None}))


if __name__ == "__main__":
    main()
