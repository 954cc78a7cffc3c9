"""Idle sockets from one client against `uvicorn app:main` (as `make demo` starts it): they are
opened as fast as the client can (by `--procs` processes, each under its own file-descriptor
limit), held without a byte sent, and meanwhile a small valid run is timed again and again.

    .venv/bin/python -m lab.server_load.idle_sockets --sockets 20000 [--procs 2] [--hold 15] [--root ../main]

Prints a JSON summary: sockets opened, how many the server closed (and when), the server's open
descriptors at most, the small run's latencies while the sockets were held, and how many lines
the server logged (with how many said "Too many open files"). A measurement, not a test:
tests/test_reliability_server.py checks the same with a few hundred sockets.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.demo import ROOT, start
from lab.server_load.options import QUIET, log_folder, server_arguments
from tests.real_server import open_fds, timed_small_run


def child(port: int, count: int, hold: float) -> None:
    """Open `count` sockets to `port`, hold them `hold` seconds once open; print what the server
    did (how many it closed, and when, counted from the moment all were open)."""
    socks = []
    t0 = time.monotonic()
    for _ in range(count):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        except OSError as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "opened": len(socks)}), flush=True)
            break
    print(json.dumps({"opened": len(socks), "open_s": round(time.monotonic() - t0, 2)}), flush=True)
    t0 = time.monotonic()  # held from here
    closed_at = []
    live = {s.fileno(): s for s in socks}
    poller = select.poll()
    for fd in live:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while live and time.monotonic() - t0 < hold:
        for fd, _ in poller.poll(200):
            s = live.pop(fd)
            poller.unregister(fd)
            closed_at.append(time.monotonic() - t0)
            s.close()
    print(json.dumps({"closed_by_server": len(closed_at), "last_closed_s": round(max(closed_at, default=0), 2)}), flush=True)


def measure(sockets: int, procs: int, hold: float, log_dir: Path, root=None) -> dict:
    with start(log_dir, QUIET, name="idle", root=root) as server:
        base = [timed_small_run(server.url)[1] for _ in range(5)]
        kids = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "lab.server_load.idle_sockets",
                    "--child",
                    str(server.port),
                    str(sockets // procs),
                    str(hold),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(procs)
        ]
        phase = {"opening": [], "held": []}
        fds = []
        held = threading.Event()
        done = threading.Event()

        def sample():
            while not done.is_set():
                fds.append(open_fds(server.proc.pid))
                phase["held" if held.is_set() else "opening"].append(timed_small_run(server.url, timeout=30))
                time.sleep(0.25)

        sampler = threading.Thread(target=sample)
        sampler.start()
        opened = [json.loads(k.stdout.readline()) for k in kids]  # every client has opened its sockets
        held.set()
        reports = [[json.loads(line) for line in k.communicate()[0].splitlines()] for k in kids]
        done.set()
        sampler.join()
        after = [timed_small_run(server.url)[1] for _ in range(5)]
        log = server.log_text()

    def runs(rows):
        return {
            "n": len(rows),
            "ok": sum(1 for status, _ in rows if status == 200),
            "statuses": sorted({str(status) for status, _ in rows}),
            "median_ms": round(1e3 * statistics.median([t for _, t in rows]), 1) if rows else None,
            "max_ms": round(1e3 * max((t for _, t in rows), default=0), 1),
        }

    return {
        "sockets_asked": sockets,
        "sockets_opened": sum(o.get("opened", 0) for o in opened),
        "open_s": max(o.get("open_s", 0) for o in opened),
        "closed_by_server": sum(r[-1].get("closed_by_server", 0) for r in reports),
        "last_closed_s": max(r[-1].get("last_closed_s", 0) for r in reports),
        "server_fds_max": max(fds, default=None),
        "small_run_unloaded_ms": round(1e3 * min(base), 1),
        "small_run_while_opening": runs(phase["opening"]),
        "small_run_while_held": runs(phase["held"]),
        "small_run_after_ms": round(1e3 * max(after), 1),
        "server_log_lines": len(log.splitlines()),
        "too_many_open_files_lines": log.count("Too many open files"),
    }


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sockets", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=2, help="client processes (each under the descriptor limit)")
    ap.add_argument("--hold", type=float, default=15, help="seconds each client holds its sockets")
    server_arguments(ap)
    args = ap.parse_args(argv)
    with log_folder(args.log_dir) as tmp:
        print(json.dumps(measure(args.sockets, args.procs, args.hold, tmp, args.root), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
