"""Drive the bench page in a Chromium started with DevTools on PORT (aiohttp only: the GPU machine
has it, not Playwright): open URL, echo its console, wait for window.__done, write window.__report.

    python3 cdp.py PORT URL OUT_JSON [TIMEOUT_S]
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
import urllib.request

import aiohttp


async def main() -> None:
    port, url, out = sys.argv[1], sys.argv[2], sys.argv[3]
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 300.0
    req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    target = json.loads(urllib.request.urlopen(req).read())
    ids = itertools.count(1)
    async with aiohttp.ClientSession() as s:
        async with s.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:

            async def call(method: str, params: dict | None = None) -> dict:
                mid = next(ids)
                await ws.send_json({"id": mid, "method": method, "params": params or {}})
                while True:
                    msg = await asyncio.wait_for(ws.receive_json(), timeout=120)
                    if msg.get("method") == "Runtime.consoleAPICalled":
                        line = " ".join(str(a.get("value", a.get("description", ""))) for a in msg["params"]["args"])
                        if not line.startswith("adapter "):
                            print("page:", line[:300], flush=True)
                    elif msg.get("method") == "Runtime.exceptionThrown":
                        print("page exception:", json.dumps(msg["params"].get("exceptionDetails", {}))[:600], flush=True)
                    if msg.get("id") == mid:
                        return msg.get("result", msg.get("error", {}))

            await call("Runtime.enable")
            await call("Page.navigate", {"url": url})
            t0 = time.time()
            done = False
            while time.time() - t0 < timeout:
                r = await call("Runtime.evaluate", {"expression": "!!window.__done", "returnByValue": True})
                if r.get("result", {}).get("value"):
                    done = True
                    break
                await asyncio.sleep(1)
            r = await call("Runtime.evaluate", {"expression": "JSON.stringify(window.__report || null)", "returnByValue": True})
            report = json.loads(r.get("result", {}).get("value") or "null") or {}
            report["wall_s"] = round(time.time() - t0, 1)
            if not done:
                report.setdefault("errors", []).append(f"the page did not finish within {timeout:.0f} s")
    with open(out, "w") as f:
        json.dump(report, f)
    print(f"cdp: {url} -> {out} in {report['wall_s']} s{'' if done else ' (TIMED OUT)'}", flush=True)


asyncio.run(main())
