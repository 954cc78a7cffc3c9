"""Root pytest configuration.

- NumPy raises on floating-point errors (underflow excepted: softmax tails underflow to 0 by design),
  so a silent NaN or overflow fails the test that caused it.
- Tiers (markers registered in pyproject.toml): `adapter` marks a test that runs kernels on a WebGPU
  adapter (every test using the native runtime, every browser test), `slow` one that takes long,
  `e2e` one that drives the browser. `make test` (and CI) runs all of them; `make test-fast` leaves
  out slow and e2e tests.
- No test reaches the network: a socket this process opens to anything but the loopback fails the
  test at once, naming the address (set-up fetches what tests need). A test that must reach the
  network would say so with `@pytest.mark.network`; none does.
- The server's settings under test (app/limits.py reads them at import, and every server a test
  starts inherits them): no start-up compiles (WGATTN_WARMUP=0: they would take the CPU from the
  tests), and no per-request time limit (WGATTN_RUN_TIMEOUT_S a day), so that no verdict depends
  on how loaded the machine is: a kernel's first compile on lavapipe takes seconds alone and
  minutes beside other work. The tests of the limit and of the start-up compiles set their own.
"""

import ipaddress
import os
import socket

import numpy as np
import pytest

os.environ.setdefault("WGATTN_WARMUP", "0")
os.environ.setdefault("WGATTN_RUN_TIMEOUT_S", str(24 * 3600))

_connect = socket.socket.connect


def _loopback(address) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths and the like stay on the machine
        return True
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:  # a host name: resolving it is already the network
        return False


def pytest_collection_modifyitems(items):
    for item in items:
        if "native_runtime" in getattr(item, "fixturenames", ()) or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.adapter)


@pytest.fixture(autouse=True)
def _no_network(request, monkeypatch):
    if request.node.get_closest_marker("network"):
        return

    def connect(sock, address):
        if not _loopback(address):
            raise AssertionError(f"a test tried to reach {address!r}: tests never use the network (set-up fetches what they need)")
        return _connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(autouse=True)
def _numpy_raises():
    old = np.seterr(divide="raise", over="raise", invalid="raise", under="ignore")
    yield
    np.seterr(**old)
