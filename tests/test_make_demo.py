"""`make demo` as a newcomer runs it: in a terminal, serving until Ctrl-C, which must stop the
server and end make quietly (exit 0, no "make: *** ... Interrupt", no traceback)."""

import os
import pty
import select
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="needs make")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Terminal:
    """A command on a pseudo-terminal of its own, as in a newcomer's shell: a session of its own
    whose controlling terminal is the pty (util-linux's `setsid --ctty`), so that Ctrl-C written
    to it interrupts the command's foreground process group. Started by subprocess, not pty.fork:
    this process may hold JAX's threads, and Python code run in a forked child of a threaded
    process can deadlock."""

    def __init__(self, argv, cwd):
        self.fd, child_end = pty.openpty()
        self.proc = subprocess.Popen(
            ["setsid", "--ctty", *argv], cwd=cwd, stdin=child_end, stdout=child_end, stderr=child_end, close_fds=True
        )
        os.close(child_end)
        self.out = b""

    def read(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the other side closed: the command has ended
                    return
                if not data:
                    return
                self.out += data

    def wait(self, seconds: float):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.read(0.2)
            code = self.proc.poll()
            if code is not None:
                return code
        self.proc.kill()
        self.proc.wait()
        return None

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def test_ctrl_c_stops_the_demo_and_make_exits_cleanly():
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api/kernels"
    term = Terminal(["make", "demo", f"PORT={port}", "HOST=127.0.0.1"], ROOT)
    deadline = time.monotonic() + 120  # set-up may have work to do first
    while not _answers(url):
        assert time.monotonic() < deadline, term.text[-3000:]
        term.read(0.5)
    os.write(term.fd, b"\x03")  # Ctrl-C, as the terminal sends it
    code = term.wait(30)
    assert code == 0, f"exit {code}\n{term.text[-3000:]}"
    assert "make: ***" not in term.text and "Traceback" not in term.text, term.text[-3000:]
    assert "Shutting down" in term.text  # uvicorn's own graceful stop, not a kill
    assert not _answers(url)
