"""A result too large to allocate is a MemoryError, not an aborted process."""

import ferrograd as fg
import numpy as np
import pytest


def test_huge_broadcast_raises_memory_error_and_the_engine_keeps_working():
    a = fg.tensor(np.ones((2_000_000, 1), "f4"))
    b = fg.tensor(np.ones((1, 2_000_000), "f4"))
    with pytest.raises(MemoryError):
        a + b
    with pytest.raises(MemoryError):
        fg.zeros(10**7, 10**7)
    assert (a * 2.0).sum().item() == 4_000_000.0
