"""Root pytest configuration: NumPy raises on floating-point errors (underflow excepted: softmax
tails underflow to 0 by design), so a silent NaN or overflow fails the test that caused it."""
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _numpy_raises():
    old = np.seterr(divide="raise", over="raise", invalid="raise", under="ignore")
    yield
    np.seterr(**old)
