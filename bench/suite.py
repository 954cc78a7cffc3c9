"""The benchmark suite: every runtime of this machine timed in one run, from one command.

    make bench-gpu                                   (= .venv/bin/python -m bench.suite)
    .venv/bin/python -m bench.suite --kernels flash_fwd.blocked --shapes 1,4,256,64 --rounds 5

In one run, every series by the measurement protocol (wgattn.protocol: warmed by time, rounds
interleaved, the median with its spread), each repeated back to back (--repeat):

1. native: `wgattn bench`'s series (wgpu-py, trusted and checked) with PyTorch's SDPA in f32 and
   f16 on CUDA as the anchor, in the same series (skipped with the reason where there is none);
2. the browser: the demo server and Chromium with WebGPU on this machine's GPU (NVIDIA's flags
   where nvidia-smi is found, else SwiftShader's); the page's live check (every kernel, three
   runtimes) and then its benchmark on the same kernels and shapes, once as shipped (Dawn's
   robustness on: mode "checked") and once with `--enable-dawn-features=disable_robustness`
   (mode "trusted": a measurement only, the page never asks for it). On NVIDIA both passes add
   `vulkan_enable_f16_on_nvidia,allow_unsafe_apis` (else Dawn offers no shader-f16 there). The
   two browsers are open together and take each request in turn, so robustness on and off are
   timed minutes apart at most; a request that would end past --budget-s is skipped in both;
3. OUT/records.json (every record, `wgattn bench --json`'s shape, written after each step;
   --decode's cases in OUT/decode.jsonl, --prefill's in OUT/prefill.jsonl),
   OUT/report.json (adapters, Chromium's version and flags, the live check, the timers'
   resolution, the GPU's clocks before and after), OUT/table.txt; then a table per (op, shape),
   whether the repeats agree within 5%, and what moved against the last committed history
   (bench/history.py).

The kernels and shapes are parameters (--kernels, --shapes): a new kernel is timed by naming it.
Chromium is driven by Playwright where it is installed (`make setup`), else by bench/cdp.py
(aiohttp only: the lent GPU machine, see bench/devcarry.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from bench import decode_bandwidth, history, prefill
from bench.demo import CHROMIUM_ARGS, ROOT, serve  # the demo and Chromium's flags, as the e2e tests have them
from wgattn import bandwidth, bench, gemm, protocol

KERNELS = [
    "flash_fwd.tiled",
    "flash_fwd.blocked",
    "flash_fwd.tiled_f16",
    "flash_fwd.blocked_f16",
    "flash_fwd.smx",
    "varlen_bwd.tiled",
    "varlen_bwd.smx",
]
SHAPES = ["4,16,2048,64", "2,16,4096,128"]
# Chromium on an NVIDIA GPU without a display (each found the hard way; docs/runtimes.md):
# ANGLE on Vulkan, no Vulkan surface, GPU compositing and rasterization off, the blocklist ignored.
NVIDIA_ARGS = [
    "--disable-gpu-sandbox",
    "--ignore-gpu-blocklist",
    "--use-angle=vulkan",
    "--enable-features=Vulkan",
    "--disable-vulkan-surface",
    "--disable-gpu-compositing",
    "--disable-gpu-rasterization",
    "--disable-accelerated-2d-canvas",
]
NVIDIA_DAWN = ["vulkan_enable_f16_on_nvidia", "allow_unsafe_apis"]  # shader-f16 (and f16 subgroup matrices) on NVIDIA
# A sample's shortest time on a GPU: an H100 timing 0.4 ms kernels in 2 ms samples, with the page's round
# trips between them, lowered its clock to 1020 MHz mid-series (its rounds bimodal, 0.45 / 0.70 ms).
GPU_SAMPLE_MS = 20.0
SMALL_FIRST_RUN = "/?heads=1&seq_q=8&seq_k=8&head_dim=4"  # the page's first live run, kept small


def log(*parts: object) -> None:
    print(*parts, flush=True)


# ---------------------------------------------------------------------------------------------
# Driving Chromium: Playwright, or the DevTools protocol where Playwright is missing
# ---------------------------------------------------------------------------------------------


class PlaywrightBrowser:
    """Chromium through Playwright's async API (what the e2e tests use)."""

    def __init__(self, executable: str, args: Sequence[str], env: Dict[str, str], log_path: Path):
        self.executable, self.args, self.env, self.log_path = executable, list(args), env, log_path
        self.version = ""

    async def start(self) -> None:
        from playwright.async_api import async_playwright

        self.pw = await async_playwright().start()
        self.browser = await self.pw.chromium.launch(executable_path=self.executable, args=self.args, env=self.env)
        self.version = self.browser.version
        self.page = await self.browser.new_page()
        self.console: List[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.console.append(m.text[:1000]))
        self.page.on("pageerror", lambda e: self.console.append(f"uncaught: {e}"[:1000]))

    async def goto(self, url: str) -> None:
        await self.page.goto(url)

    async def eval(self, expression: str, timeout: float = 60) -> Any:
        return await asyncio.wait_for(self.page.evaluate(expression), timeout)

    async def close(self) -> None:
        await self.browser.close()
        await self.pw.stop()


class CdpBrowser:
    """Chromium through bench/cdp.py (the DevTools protocol over aiohttp)."""

    def __init__(self, executable: str, args: Sequence[str], env: Dict[str, str], log_path: Path):
        from bench import cdp  # aiohttp: imported only where the DevTools protocol drives Chromium

        self.chromium = cdp.Chromium(executable, args, env, log_path)

    async def start(self) -> None:
        await self.chromium.start()
        self.version = self.chromium.version
        self.tab = await self.chromium.new_tab()
        self.console = self.tab.console

    async def goto(self, url: str) -> None:
        await self.tab.goto(url)

    async def eval(self, expression: str, timeout: float = 60) -> Any:
        return await self.tab.eval(expression, timeout)

    async def close(self) -> None:
        await self.chromium.close()


def driver_class(name: str):
    """Playwright where it is installed ("auto"), else the DevTools-protocol client."""
    if name == "auto":
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            name = "cdp"
        else:
            name = "playwright"
    return {"playwright": PlaywrightBrowser, "cdp": CdpBrowser}[name], name


async def wait_for(page, expression: str, timeout: float) -> Any:
    """Poll a JavaScript expression until it is truthy; its value, or TimeoutError. An error
    while the page is being replaced (a navigation in progress) is polled past."""
    deadline = time.time() + timeout
    error = None
    while time.time() < deadline:
        try:
            value = await page.eval(expression, 30)
        except RuntimeError as exc:
            error, value = exc, None
        if value:
            return value
        await asyncio.sleep(0.5)
    raise TimeoutError(f"waited {timeout:.0f} s for {expression}" + (f" (last error: {error})" if error else ""))


LIVE_JS = """(async () => {
  const r = await window.wgattn.runAll();
  return { cancelled: r.cancelled, results: r.results.map((x) => ({ kernel: x.kernel, pass: x.pass,
    failed: x.pairs.filter((p) => !p.pass).map((p) => `${p.a}/${p.b} ${p.output}: ${p.max_abs_err} > ${p.allowance}`),
    runtimes: Object.fromEntries(Object.entries(x.runtimes)
      .map(([k, v]) => [k, v.ok ? "ok" : (v.skipped || v.error || "not ok")])) })) };
})()"""


class NoAdapter(RuntimeError):
    """The browser offered the page no WebGPU adapter."""


def use_fallback_vulkan(chromium: str) -> Optional[str]:
    """Put the fallback Vulkan loader (WGATTN_VULKAN_FALLBACK: Debian's, which the first H100 run
    of Chromium used) beside the Chromium binary, where ANGLE and Dawn load it, keeping Chromium's
    own as libvulkan.so.1.chromium; its path, or None when there is none to try (or it is in place
    already: a browser that finds no adapter with it has none)."""
    fallback = os.environ.get("WGATTN_VULKAN_FALLBACK")
    beside = Path(chromium).parent / "libvulkan.so.1"
    kept = beside.with_name("libvulkan.so.1.chromium")
    if not fallback or not Path(fallback).exists() or kept.exists() or not beside.exists():
        return None
    shutil.copy2(beside, kept)
    shutil.copy2(fallback, beside)
    return fallback


class BrowserPass:
    """One Chromium of the run, with its Dawn toggles: the page opened on the GPU (its adapter
    checked), then benchmark requests one at a time. Its records are relabelled with what the
    page cannot see (the flags, the mode they imply, the commit)."""

    def __init__(self, args, name: str, dawn: List[str], out: Path):
        self.args, self.name, self.out = args, name, out
        self.flags = [*CHROMIUM_ARGS, *(NVIDIA_ARGS if args.gpu == "nvidia" else [])]
        if dawn:
            self.flags.append("--enable-dawn-features=" + ",".join(dawn))
        self.flags += args.chromium_arg
        self.mode = "trusted" if "disable_robustness" in dawn else "checked"
        self.report: Dict[str, Any] = {"flags": self.flags}
        self.browser: Any = None

    async def open(self, base: str) -> None:
        """Start Chromium and load the page (a small first run); NoAdapter when the browser
        offers no WebGPU adapter, RuntimeError when the page stops."""
        env = dict(os.environ)
        if os.environ.get("WGATTN_CHROMIUM_LIBS"):  # the carried Chromium's own libraries, for it alone
            env["LD_LIBRARY_PATH"] = os.environ["WGATTN_CHROMIUM_LIBS"] + ":" + env.get("LD_LIBRARY_PATH", "")
        cls, _ = driver_class(self.args.driver)
        self.browser = browser = cls(self.args.chromium, self.flags, env, self.out / f"chromium-{self.name}.log")
        await browser.start()
        self.report["version"] = browser.version
        log(f"[chromium {self.name}] {browser.version}; flags: {' '.join(self.flags)}")
        t0 = time.time()
        await browser.goto(base + SMALL_FIRST_RUN)
        done = "document.body && ['done', 'error'].includes(document.body.dataset.status) && document.body.dataset.status"
        status = await wait_for(browser, done, 300)
        self.report["page"] = {"status": status, "load_s": round(time.time() - t0, 1)}
        self.report["adapter"] = await browser.eval("window.wgattn.results.adapter")
        adapter = json.dumps(self.report["adapter"])[:300]
        log(f"[chromium {self.name}] page {status} in {self.report['page']['load_s']} s; adapter {adapter}")
        if self.report["adapter"] is None:
            raise NoAdapter(await browser.eval("document.getElementById('message').textContent"))
        if status != "done":
            message = await browser.eval("document.getElementById('message').textContent")
            raise RuntimeError(f"the page stopped: {message}")

    async def live_check(self) -> None:
        """The page's live check: every kernel in the three runtimes."""
        t0 = time.time()
        check = await self.browser.eval(LIVE_JS, 600)
        bad = [r for r in check["results"] if not r["pass"]]
        self.report["live_check"] = dict(check, wall_s=round(time.time() - t0, 1))
        log(f"[chromium {self.name}] live check: {len(check['results']) - len(bad)} of {len(check['results'])} kernels pass")
        for r in bad:
            log(f"  FAIL {r['kernel']}: {r['failed'][:3]} {r['runtimes']}")

    async def grid(self, iface: str) -> None:
        """The page's conformance view on interface `iface`: every project kernel the adapter
        runs, on the interface's whole grid, judged by the page's Python."""
        t0 = time.time()
        got = await self.browser.eval(f"({GRID_JS})({json.dumps(iface)})", 900)
        self.report.setdefault("grid", {})[iface] = dict(got, wall_s=round(time.time() - t0, 1))
        per: Dict[str, List[int]] = {}
        for c in got.get("cases", []):
            per.setdefault(c["kernel"], [0, 0])[0 if c["pass"] else 1] += 1
        log(f"[chromium {self.name}] grid {iface}: {got.get('status')}, {got.get('passed')} passed, {got.get('failed')} failed "
            f"in {time.time() - t0:.0f} s; " + ", ".join(f"{k} {n[0]}/{sum(n)}" for k, n in per.items()))  # fmt: skip
        for s in got.get("skipped", []):
            log(f"  skipped {s['kernel']}: {s['reason']}")
        for c in got.get("cases", []):
            if not c["pass"]:  # a non-finite ratio (NaN, inf) arrives as JSON's null
                worst = "not finite" if c["worst"] is None else f"{c['worst']:.3g}"
                log(f"  FAIL {c['kernel']} {c['case']}: worst |err| / allowance {worst}")

    async def bench(self, req: Dict[str, Any], timeout: float) -> List[Dict]:
        """One benchmark request in the page (a case, decode, prefill or the GEMM:
        window.wgattn.caseBench): its records, relabelled."""
        what = request_name(req)
        t0 = time.time()
        call, state_of = ("caseBench", "cases") if req["op"] in CASE_OPS else ("benchRun", "bench")
        recs = await self.browser.eval(f"window.wgattn.{call}({json.dumps(req)})", timeout)
        fields = "{status, skipped, failed, checks, error}"
        state = await self.browser.eval(f"(({fields}) => ({fields}))(window.wgattn.{state_of})")
        commit = bench.git_commit()
        for r in recs:
            r.update(mode=self.mode, flags=self.flags, commit=commit)
            if self.browser.version:  # the full version ("HeadlessChrome/156.0.8078.79" or "156.0.8078.79")
                r["browser"] = "Chromium " + self.browser.version.split("/")[-1]
        log(f"[chromium {self.name}] {what}: {len(recs)} records in {time.time() - t0:.0f} s ({state['status']})")
        if state.get("error"):
            log(f"  error: {state['error']}")
        for s in state["skipped"]:
            log(f"  skipped {s['impl']}: {s['reason']}")
        for f in state["failed"]:
            log(f"  FAILED {f}")
        self.report.setdefault("bench", []).append({"request": what, "wall_s": round(time.time() - t0, 1), **state})
        return recs

    async def close(self) -> None:
        if self.browser is None:
            return
        self.report["console_errors"] = list(getattr(self.browser, "console", []))
        try:
            await self.browser.close()
        except Exception as exc:  # what it measured stands; say what the closing did
            log(f"[chromium {self.name}] closing the browser: {type(exc).__name__}: {exc}")
        self.browser = None


# The conformance view driven as a person would (interface chosen, no WGSL pasted, Run grid),
# its summary cut to what the report keeps: per case the worst |error| / allowance.
GRID_JS = """async (iface) => {
  const box = document.getElementById('conformance');
  const pick = document.getElementById('grid-interface');
  pick.value = iface;
  pick.dispatchEvent(new Event('change'));
  document.getElementById('grid-source').value = '';
  document.getElementById('grid-run').click();
  while (!['done', 'error', 'cancelled'].includes(box.dataset.status)) await new Promise((r) => setTimeout(r, 200));
  const s = window.wgattn.conformance || {};
  return { status: box.dataset.status, passed: s.passed, failed: s.failed, skipped: s.skipped || [],
    message: box.dataset.status === 'error' ? box.textContent.slice(0, 2000) : '',
    cases: (s.cases || []).map((c) => ({ kernel: c.kernel, case: c.case, pass: c.pass,
      worst: Math.max(0, ...c.rows.map((r) => (r.allowance > 0 ? r.max_abs_err / r.allowance : 0))) })) };
}"""


CASE_OPS = (*bench.CONFIG_OPS, gemm.OP)  # requests of one configuration of a case (wgattn.page.bench_jobs)


def request_name(req: Dict[str, Any]) -> str:
    if req["op"] in bench.CONFIG_OPS:
        return f"{req['op']} {req['name']}"
    if req["op"] == gemm.OP:
        c = req.get("config", {})
        which = f"{len(req['tiles'])} tiles" if req.get("tiles") else c.get("fragment") or "every fragment"
        return f"gemm {c.get('rows')}x{c.get('cols')}x{c.get('depth')} {which}"
    return f"{req['op']} {req['B']},{req['H']},{req['seq_lens']},{req['D']}"


async def open_pass(p: BrowserPass, base: str, report: Dict[str, Any]) -> bool:
    """Open a pass's browser; on no adapter, once more with the fallback Vulkan loader. Whether
    it opened (else its report says why)."""
    try:
        try:
            await p.open(base)
        except NoAdapter as exc:
            await p.close()
            loader = use_fallback_vulkan(p.args.chromium)
            if loader is None:
                raise
            log(f"[chromium {p.name}] no WebGPU adapter ({exc}); again with the Vulkan loader {loader}")
            report["vulkan_loader"] = loader
            await p.open(base)
        return True
    except Exception as exc:
        log(f"[chromium {p.name}] failed: {type(exc).__name__}: {exc}")
        p.report["error"] = f"{type(exc).__name__}: {exc}"
        await p.close()
        return False


async def run_browsers(
    passes: List[BrowserPass],
    base: str,
    requests: List[Dict[str, Any]],
    live: bool,
    end: float,
    report: Dict[str, Any],
    save: Callable[[List[Dict]], None],
    grids: Sequence[str] = (),
) -> None:
    """Every pass's browser open at once; the live check in the first; then request by request,
    every pass in turn (the order alternating), so that robustness on and off are timed minutes
    apart at most and a run cut short by its time budget lacks the same rows in both. A request
    starts only when the time it took in another pass (or the longest so far) still fits before
    `end`; records are handed to `save` as they come."""
    opened = [p for p in passes if await open_pass(p, base, report)]
    try:
        if live and opened:
            try:
                await opened[0].live_check()
            except Exception as exc:
                log(f"[chromium {opened[0].name}] live check failed: {type(exc).__name__}: {exc}")
                opened[0].report["live_check"] = {"error": f"{type(exc).__name__}: {exc}"}
        for p in opened:  # correctness with robustness on and off
            for iface in grids:
                try:
                    await p.grid(iface)
                except Exception as exc:
                    log(f"[chromium {p.name}] grid {iface} failed: {type(exc).__name__}: {exc}")
                    p.report.setdefault("grid", {})[iface] = {"error": f"{type(exc).__name__}: {exc}"}
        took: Dict[int, float] = {}
        for i, req in enumerate(requests):
            for p in opened if i % 2 == 0 else opened[::-1]:
                if p.browser is None:
                    continue  # failed earlier: its report says why
                expected = took.get(i, max(took.values(), default=0.0))
                if time.time() + expected > end:
                    log(f"[chromium {p.name}] skip {request_name(req)}: {expected:.0f} s would end past the budget (--budget-s)")
                    p.report.setdefault("skipped", []).append(request_name(req))
                    continue
                t0 = time.time()
                try:
                    save(await p.bench(req, max(60.0, end - time.time() + 30)))
                except Exception as exc:
                    why = f"{type(exc).__name__}: {exc}"
                    log(f"[chromium {p.name}] {request_name(req)} failed: {why}")
                    p.report.setdefault("failed_requests", []).append({"request": request_name(req), "error": why})
                    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
                        p.report["error"] = why  # the page is busy or gone: this pass ends here
                        await p.close()
                took[i] = max(took.get(i, 0.0), time.time() - t0)
    finally:
        for p in passes:
            await p.close()


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def gpu_state() -> Optional[str]:
    """The GPU's clocks, temperature and power as nvidia-smi reads them (never sets anything)."""
    if not shutil.which("nvidia-smi"):
        return None
    query = "name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu"
    r = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True)
    return (r.stdout or r.stderr).strip()


def protocol_fields(proto: protocol.Protocol) -> Dict[str, float]:
    """What a page request says of the protocol (wgattn.page.bench_jobs: the rest is its default)."""
    return {"rounds": proto.rounds, "warmup_s": proto.warmup_s, "min_sample_ms": proto.min_sample_ms}


def page_requests(
    kernels: Sequence[str], shapes, causal: bool, proto: protocol.Protocol, repeat: int, variants: Sequence[str] = ("",)
) -> List[Dict]:
    """The page's benchmark requests: one per (op, shape); a request carries B, H, D, the
    sequence length and the variants of the problem timed in its series."""
    reqs = []
    for op in bench.OPS:
        impls = [k for k in kernels if bench.op_of(k) == op]
        for b, h, s, d in shapes if impls else ():
            reqs.append(
                {
                    "op": op,
                    "impls": ",".join(impls),
                    "B": b,
                    "H": h,
                    "D": d,
                    "seq_lens": str(s),
                    "causal": causal,
                    "variants": ",".join(v or "plain" for v in variants),
                    **protocol_fields(proto),
                    "repeat": repeat,
                }
            )
    return reqs


def decode_requests(names: Sequence[str], smoke: bool, proto: protocol.Protocol, repeat: int) -> List[Dict]:
    """The page's decode requests: one per case of bench/decode_bandwidth.py's `cases()` named
    (shrunk by its `smoke` with `smoke`): its kernel on its configuration."""
    known = decode_bandwidth.cases()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"suite: --decode takes cases of bench/decode_bandwidth.py, {sorted(known)}; not {unknown}")
    reqs = []
    for n in names:
        kernel, config = known[n]
        config = decode_bandwidth.smoke(config) if smoke else config
        reqs.append(
            {"op": "decode", "name": n, "impls": kernel, "config": config.to_dict(), **protocol_fields(proto), "repeat": repeat}
        )
    return reqs


def gemm_requests(spec: str, shape: str, proto: protocol.Protocol, repeat: int) -> List[Dict]:
    """The page's GEMM request at `shape` (M,N,K): `spec` "sweep" (wgattn.gemm.tiles_for: the
    default tiles of every fragment shape the adapter offers) or a JSON file of tiles (a list of
    wgattn.gemm.Tile's knobs). One request: its tiles are timed in series, interleaved."""
    if not spec:
        return []
    rows, cols, depth = (int(x) for x in shape.split(","))
    common = {"op": gemm.OP, **protocol_fields(proto), "repeat": repeat}
    config = {"rows": rows, "cols": cols, "depth": depth}
    if spec == "sweep":
        return [{**common, "config": config}]
    return [{**common, "config": config, "tiles": json.loads(Path(spec).read_text())}]


def prefill_requests(names: Sequence[str], smoke: bool, proto: protocol.Protocol, repeat: int) -> List[Dict]:
    """The page's prefill requests: one per case of bench/prefill.py's `cases()` named (shrunk by
    its `smoke` with `smoke`): its kernel on its configuration, beside its yardstick."""
    known = prefill.cases()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"suite: --prefill takes cases of bench/prefill.py, {sorted(known)}; not {unknown}")
    reqs = []
    for n in names:
        kernel, config = known[n]
        config = prefill.smoke(config) if smoke else config
        reqs.append(
            {"op": "prefill", "name": n, "impls": kernel, "config": config.to_dict(), "rounds": proto.rounds,
             "warmup_s": proto.warmup_s, "repeat": repeat}
        )  # fmt: skip
    return reqs


def write_prefill(out: Path, records: List[Dict]) -> None:
    """OUT/prefill.jsonl: the prefill records (wgattn.bandwidth.rate_record), each with its share
    of its own series' yardstick (flash_fwd on the same work unpaged)."""
    bandwidth.yardstick_shares(records)
    (out / "prefill.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def write_decode(out: Path, records: List[Dict]) -> None:
    """OUT/decode.jsonl: the decode records (bench/decode_bandwidth.py's --json lines), each with
    its share of its own series' copy bandwidth."""
    bandwidth.copy_shares(records)
    (out / "decode.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def write_gemm(out: Path, records: List[Dict]) -> None:
    """OUT/gemm.jsonl: the GEMM records (wgattn.gemm.record), where there are any."""
    if records:
        (out / "gemm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def write(out: Path, records: List[Dict], report: Dict) -> None:
    (out / "records.json").write_text(json.dumps(records, indent=1) + "\n")
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")


def parse_args(argv: Optional[Sequence[str]] = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=",".join(KERNELS), help="registered kernel ids (default: %(default)s)")
    ap.add_argument("--shapes", default=";".join(SHAPES), help="B,H,S,D;B,H,S,D (default: %(default)s)")
    ap.add_argument("--no-causal", dest="causal", action="store_false", help="full attention (default: causal)")
    ap.add_argument(
        "--variants",
        default="plain",
        help="the problem plain and/or with alibi, sinks or alibi+sinks: each kernel once per variant in the same series "
        "(comma-separated; default %(default)s)",
    )
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument(
        "--min-sample-ms",
        type=float,
        default=None,
        help="a sample (and a warm-up sample) lasts at least this long, natively and in the page: a GPU kept busy keeps "
        f"its clock (default: {GPU_SAMPLE_MS:g} on a GPU, else the protocol's {protocol.Protocol.min_sample_ms:g})",
    )
    ap.add_argument("--repeat", type=int, default=2, help="each series this many times back to back (1..3)")
    ap.add_argument("--runtimes", default="native,chromium", help="native, chromium or both (default: %(default)s)")
    ap.add_argument("--chromium", default=os.environ.get("WGATTN_CHROMIUM", "/usr/bin/chromium"))
    ap.add_argument("--gpu", choices=("auto", "nvidia", "software"), default="auto", help="Chromium's GPU flags")
    ap.add_argument("--dawn", default="auto", help="Dawn toggles for both browser passes (auto: NVIDIA's f16 ones there)")
    ap.add_argument("--chromium-arg", action="append", default=[], help="one more Chromium flag (repeatable)")
    ap.add_argument(
        "--passes",
        default="checked,trusted",
        help="Chromium passes: checked (robustness on, as shipped), trusted (disable_robustness); default: %(default)s",
    )
    ap.add_argument("--no-live", dest="live", action="store_false", help="skip the page's live check")
    ap.add_argument("--grid", default="", help="interfaces whose conformance grid each browser pass runs (comma-separated)")
    ap.add_argument(
        "--decode",
        default="",
        help="decode cases of bench/decode_bandwidth.py timed as bandwidth, natively and in each browser pass "
        "(comma-separated, e.g. target,target-f32-cache; default none)",
    )
    ap.add_argument("--decode-smoke", action="store_true", help="the decode cases shrunk (decode_bandwidth.smoke)")
    ap.add_argument(
        "--prefill",
        default="",
        help="prefill cases of bench/prefill.py timed as FLOP/s beside flash_fwd on the same work, in each browser pass "
        "(comma-separated, e.g. target; default none)",
    )
    ap.add_argument("--prefill-smoke", action="store_true", help="the prefill cases shrunk (bench/prefill.py's smoke)")
    ap.add_argument(
        "--gemm",
        default="",
        help="the subgroup-matrix GEMM in each browser pass: 'sweep' (wgattn.gemm's default tiles of each fragment shape) "
        "or a JSON file of tiles (a list of wgattn.gemm.Tile's knobs); default none",
    )
    ap.add_argument("--gemm-shape", default="4096,4096,4096", help="M,N,K of the GEMM (default: %(default)s)")
    ap.add_argument("--driver", choices=("auto", "playwright", "cdp"), default="auto")
    ap.add_argument("--out", default=str(ROOT / ".cache" / "bench"), help="where records.json, report.json, table.txt go")
    ap.add_argument("--history", default=str(ROOT / "bench" / "history"), help="the committed history to compare with")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=540.0,
        help="the run's time: a browser request starts only if it should end within it (default: %(default)s)",
    )
    return ap.parse_args(argv)


def suite_protocol(args) -> protocol.Protocol:
    """The protocol of every series of the run, native and in the page: samples of GPU_SAMPLE_MS on
    a GPU (args.gpu resolved) unless --min-sample-ms says otherwise."""
    min_ms = args.min_sample_ms
    if min_ms is None:
        min_ms = GPU_SAMPLE_MS if args.gpu == "nvidia" else protocol.Protocol.min_sample_ms
    try:
        return protocol.Protocol.of(args.rounds, args.warmup_s, min_ms)
    except ValueError as exc:
        raise SystemExit(f"suite: {exc}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    t_start = time.time()
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    variants = bench.parse_variants(args.variants)  # ValueError: an unknown variant
    shapes = [bench.parse_shape(s) for s in args.shapes.split(";") if s.strip()]
    runtimes = {r.strip() for r in args.runtimes.split(",") if r.strip()}
    if not runtimes <= {"native", "chromium"}:
        raise SystemExit(f"suite: --runtimes takes native and/or chromium, got {sorted(runtimes)}")
    ops = [op for op in bench.OPS if any(bench.op_of(k) == op for k in kernels)]  # ValueError: unknown kernel
    if args.gpu == "auto":
        args.gpu = "nvidia" if shutil.which("nvidia-smi") else "software"
    dawn = [t for t in args.dawn.split(",") if t and t != "auto"] or (
        NVIDIA_DAWN if args.gpu == "nvidia" and args.dawn == "auto" else []
    )
    proto = suite_protocol(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = bench.RunInfo.now(commit=bench.git_commit())
    report: Dict[str, Any] = {
        "time": info.time,
        "commit": info.commit,
        "command": " ".join(["python -m bench.suite", *sys.argv[1:]]),
        "protocol": proto.to_json(),
        "kernels": kernels,
        "shapes": [list(s) for s in shapes],
        "causal": args.causal,
        "variants": args.variants,
        "repeat": args.repeat,
        "gpu": args.gpu,
        "gpu_state_before": gpu_state(),
    }
    records: List[Dict] = []
    decode_names = [n.strip() for n in args.decode.split(",") if n.strip()]
    decode_reqs = decode_requests(decode_names, args.decode_smoke, proto, args.repeat)
    decode_records: List[Dict] = []
    gemm_reqs = gemm_requests(args.gemm, args.gemm_shape, proto, args.repeat)
    gemm_records: List[Dict] = []
    prefill_names = [n.strip() for n in args.prefill.split(",") if n.strip()]
    prefill_reqs = prefill_requests(prefill_names, args.prefill_smoke, proto, args.repeat)
    prefill_records: List[Dict] = []
    log(f"suite: {', '.join(kernels)} at {'; '.join(map(str, shapes))}{' causal' if args.causal else ''}; {sorted(runtimes)}; "
        f"{proto.rounds} rounds, warm-up >= {proto.warmup_s} s, samples >= {proto.min_sample_ms:g} ms, "
        f"repeat {args.repeat}; out {out}")  # fmt: skip
    if "native" in runtimes:
        t0 = time.time()
        impls = kernels + ["torch"]
        try:
            got = bench.run(ops, impls, shapes, args.causal, proto, log=log, repeat=args.repeat, info=info, variants=variants)
        except Exception as exc:  # a machine without a native adapter still runs the browser
            log(f"native: failed: {type(exc).__name__}: {exc}")
            report["native_error"] = f"{type(exc).__name__}: {exc}"
            got = []
        records += [r.to_json() for r in got]
        report["native_s"] = round(time.time() - t0, 1)
        report["torch"] = bench.torch_cuda() or "skipped: no PyTorch with CUDA here"
        write(out, records, report)
    if "native" in runtimes and decode_names:  # the native side: decode_bandwidth's series, no sweep
        t0 = time.time()
        native_jsonl = out / "decode-native.jsonl"
        native_jsonl.unlink(missing_ok=True)
        argv = [f"--case={n}" for n in decode_names] + [
            "--sweep=",
            f"--rounds={proto.rounds}",
            f"--warm={proto.warmup_s}",
            f"--min-sample-ms={proto.min_sample_ms}",
        ]
        try:
            decode_bandwidth.main(argv + [f"--json={native_jsonl}"] + (["--smoke"] if args.decode_smoke else []))
        except (Exception, SystemExit) as exc:  # a wrong answer (SystemExit) or no adapter: the browser still runs
            log(f"native decode: failed: {type(exc).__name__}: {exc}")
            report["native_decode_error"] = f"{type(exc).__name__}: {exc}"
        if native_jsonl.exists():
            decode_records += [json.loads(line) for line in native_jsonl.read_text().splitlines() if line.strip()]
        report["native_decode_s"] = round(time.time() - t0, 1)
        write_decode(out, decode_records)
    if "chromium" in runtimes:
        dawn_of = {"checked": dawn, "trusted": dawn + ["disable_robustness"]}
        names = [n.strip() for n in args.passes.split(",") if n.strip()]
        if not names or not set(names) <= set(dawn_of) or len(set(names)) != len(names):
            raise SystemExit(f"suite: --passes takes checked and/or trusted, got {args.passes!r}")
        passes = [BrowserPass(args, n, dawn_of[n], out) for n in names]
        page_reqs = page_requests(kernels, shapes, args.causal, proto, args.repeat, variants)
        requests = page_reqs + decode_reqs + prefill_reqs + gemm_reqs
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "py"), os.environ.get("PYTHONPATH", "")) if p))
        if not (ROOT / ".cache" / "pyodide").is_dir():
            raise SystemExit("suite: the page needs Pyodide in .cache/pyodide: run `make setup` (bench/devcarry.py carries it)")

        def save(recs: List[Dict]) -> None:
            records.extend(r for r in recs if "kind" not in r and r.get("op") != gemm.OP)
            decode_records.extend(r for r in recs if r.get("kind") in bandwidth.BANDWIDTH_KINDS)  # decode and copy records
            prefill_records.extend(r for r in recs if r.get("kind") == "prefill")
            gemm_records.extend(r for r in recs if r.get("op") == gemm.OP)
            write(out, records, report)
            write_decode(out, decode_records)
            write_prefill(out, prefill_records)
            write_gemm(out, gemm_records)

        for p in passes:
            report[f"chromium_{p.name}"] = p.report
        if Path(args.chromium).with_name("libvulkan.so.1.chromium").exists():  # an earlier run put the fallback there
            report["vulkan_loader"] = os.environ.get("WGATTN_VULKAN_FALLBACK", "the fallback")
        with serve(out, env, name="suite") as base:
            grids = [g.strip() for g in args.grid.split(",") if g.strip()]
            asyncio.run(run_browsers(passes, base, requests, args.live, t_start + args.budget_s, report, save, grids))
        write(out, records, report)
    report["gpu_state_after"] = gpu_state()
    report["timer_resolution_ns"] = {
        f"{r['runtime']} {r['mode']}".strip(): r["timer_resolution_ns"] for r in records if r["impl"] not in bench.ANCHORS
    }
    report["wall_s"] = round(time.time() - t_start, 1)
    write(out, records, report)
    table = history.render(records) + "\n\n" + history.repeat_agreement(records, history.AGREE)
    if decode_records:
        write_decode(out, decode_records)
        table += "\n\n" + history.decode_table(decode_records)
    if prefill_records:
        write_prefill(out, prefill_records)
        table += "\n\n" + history.prefill_table(prefill_records)
    if gemm_records:
        table += "\n\n" + history.gemm_table(gemm_records)
    (out / "table.txt").write_text(table + "\n")
    log("\n" + table)
    log(f"timestamp resolution (ns): {report['timer_resolution_ns']}")
    with contextlib.suppress(FileNotFoundError):
        against = history.latest(Path(args.history), records)
        if against is not None:
            log(f"\nagainst {against.name}:\n" + history.compare(records, history.load(against)))
    log(
        f"suite: {len(records)} records in {report['wall_s']} s -> {out}/records.json"
        + (f", {len(decode_records)} decode records -> {out}/decode.jsonl" if decode_names else "")
        + (f", {len(prefill_records)} prefill records -> {out}/prefill.jsonl" if prefill_names else "")
        + (f", {len(gemm_records)} GEMM records -> {out}/gemm.jsonl" if gemm_records else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
