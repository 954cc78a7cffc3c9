"""A minimal Chrome DevTools Protocol client, for the one place Playwright cannot go: the lent GPU
machine (bench/devcarry.py). It launches Chromium, opens a tab, navigates, evaluates JavaScript
(awaiting its promise) and keeps the page's console errors: what bench/suite.py needs, in the same
shape as its Playwright driver.

Why not Playwright there: that machine reaches no package registry and has no Playwright; a
Playwright wheel (about 40 MB with its Node driver, plus greenlet and pyee) would take most of a
64 MiB call, and its driver needs libatomic, which that image may lack. aiohttp is installed there,
and four protocol methods (Target via /json/new, Runtime.enable, Runtime.evaluate, Page.navigate)
are all the suite uses. Everywhere else the suite drives Chromium with Playwright.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import aiohttp

__all__ = ["Chromium", "Tab"]


class Tab:
    """One page of the browser, over its DevTools websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: Dict[int, asyncio.Future] = {}
        self.console: List[str] = []  # console errors and uncaught exceptions, as text
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            fut = self.pending.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(data)
            elif data.get("method") == "Runtime.consoleAPICalled" and data["params"].get("type") == "error":
                args = data["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args)[:1000])
            elif data.get("method") == "Runtime.exceptionThrown":
                details = data["params"].get("exceptionDetails", {})
                self.console.append(
                    "uncaught: " + str(details.get("exception", {}).get("description", details.get("text")))[:1000]
                )
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("the browser closed the DevTools connection"))

    async def call(self, method: str, params: Optional[Dict[str, Any]] = None, timeout: float = 60) -> Dict[str, Any]:
        mid = next(self.ids)
        fut: asyncio.Future = asyncio.get_event_loop().create_future()
        self.pending[mid] = fut
        await self.ws.send_json({"id": mid, "method": method, "params": params or {}})
        reply = await asyncio.wait_for(fut, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def eval(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JavaScript expression (a promise is awaited); RuntimeError with the
        page's message when it throws."""
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True, "timeout": int(timeout * 1000)}
        r = await self.call("Runtime.evaluate", params, timeout + 10)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(str(d.get("exception", {}).get("description") or d.get("text"))[:2000])
        return r["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", {"url": url})


class Chromium:
    """A Chromium process with DevTools on a free port (Chromium picks it: port 0)."""

    def __init__(self, executable: str, args: Sequence[str], env: Optional[Dict[str, str]], log: Path):
        self.executable, self.args, self.env, self.log = executable, list(args), env, log
        self.proc: Optional[subprocess.Popen] = None
        self.version = ""
        self.session: Optional[aiohttp.ClientSession] = None
        self.profile = tempfile.mkdtemp(prefix="wgattn-chromium-")

    async def start(self, timeout: float = 60) -> None:
        port_file = Path(self.profile) / "DevToolsActivePort"
        cmd = [self.executable, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={self.profile}"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([*cmd, *self.args, "about:blank"], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if self.proc.poll() is not None or time.time() > deadline:
                tail = self.log.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"Chromium did not start (exit {self.proc.poll()}); the end of {self.log.name}:\n{tail}")
            await asyncio.sleep(0.2)
        self.port = int(port_file.read_text().split()[0])
        version = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/version", timeout=10).read())
        self.version = version.get("Browser", "")
        self.session = aiohttp.ClientSession()

    async def new_tab(self) -> Tab:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        target = json.loads(urllib.request.urlopen(req, timeout=10).read())
        assert self.session is not None
        ws = await self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        tab = Tab(ws)
        await tab.call("Runtime.enable")
        await tab.call("Page.enable")
        return tab

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        # Chromium's helper processes may still be writing the profile as the browser exits.
        shutil.rmtree(self.profile, ignore_errors=True)
