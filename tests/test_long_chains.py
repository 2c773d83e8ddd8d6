"""Very long chains of recorded ops are freed, differentiated and recomputed without deep
recursion (a recursive drop or recomputation overflows the stack and kills the process)."""

import ferrograd as fg
import numpy as np

N = 200_000


def chain(x, n, step):
    h = x
    for _ in range(n):
        h = step(h)
    return h


def test_dropping_a_long_recorded_chain():
    x = fg.tensor(np.ones(4, "f4"))
    key = fg.GradKey()
    key.attach(x)
    h = chain(x, N, lambda t: t * 1.0)
    del h
    key.finish()
    assert (x * 2.0).sum().item() == 8.0


def test_backward_through_a_long_chain():
    x = fg.tensor(np.full(4, 0.5))
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(chain(x, N, lambda t: t * 1.0).sum())
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(4))


def test_mirrored_long_chain_recomputes_iteratively():
    x = fg.tensor(np.full(3, 0.1))
    gm = fg.GradManager(recompute="auto").attach(x)
    with gm:
        gm.backward(chain(x, N // 2, lambda t: t + 0.0).sum())
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))
