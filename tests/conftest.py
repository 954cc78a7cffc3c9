"""Shared fixtures for the Python tests."""

import pytest


@pytest.fixture(scope="session")
def native_runtime():
    """The process's native runtime; skips (with the reason) where wgpu-py has no usable adapter."""
    wgpu = pytest.importorskip("wgpu", reason="wgpu-py is not installed")
    del wgpu
    from wgattn import native

    try:
        return native.runtime()
    except native.AdapterError as exc:
        pytest.skip(f"no usable native adapter: {exc}")
