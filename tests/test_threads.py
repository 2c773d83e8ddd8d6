"""Large CPU ops split over the worker pool, whose thread 0 is the interpreter's main thread:
ops from other threads, and from several threads at once, still run and give the right values
(and never hang waiting for a main thread that is blocked in Python)."""

import subprocess
import sys
import textwrap
import threading

import ferrograd as fg
import numpy as np

N = 1 << 20  # far above the size where elementwise ops and row sums split across threads


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return a, b


def _work(seed: int, out: dict) -> None:
    a, b = _inputs(seed)
    x, y = fg.tensor(a), fg.tensor(b)
    s = x + y
    x += y  # the in-place update splits across threads too
    rows = fg.tensor(a.reshape(256, -1)).sum(axis=-1)
    out[seed] = (s.numpy(), x.numpy(), rows.numpy())


def _check(seed: int, got) -> None:
    a, b = _inputs(seed)
    s, x, rows = got
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(x, a + b)
    np.testing.assert_allclose(
        rows, a.reshape(256, -1).sum(-1, dtype=np.float64), rtol=1e-5, atol=1e-3
    )


def test_large_ops_from_another_thread_while_the_main_thread_waits():
    out: dict = {}
    t = threading.Thread(target=_work, args=(1, out))
    t.start()
    t.join(timeout=120)  # the main thread, one of the pool's threads, is blocked here
    assert not t.is_alive(), "an op on a non-main thread hung"
    _check(1, out[1])


def test_large_ops_from_several_threads_at_once_and_the_main_thread():
    out: dict = {}
    threads = [threading.Thread(target=_work, args=(s, out)) for s in (2, 3, 4)]
    for t in threads:
        t.start()
    _work(5, out)
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "an op on a non-main thread hung"
    for s in (2, 3, 4, 5):
        _check(s, out[s])


def test_thread_count_set_after_import_holds_and_ops_run():
    # the pool is made on first use, so set_num_threads after `import ferrograd` still sizes it
    code = textwrap.dedent(
        """
        import threading
        import numpy as np
        import ferrograd as fg
        fg.set_num_threads(3)
        a = np.arange(1 << 20, dtype=np.float32)
        def run(box):
            box.append(float((fg.tensor(a) * 2).sum()))
        box = []
        t = threading.Thread(target=run, args=(box,))
        t.start(); t.join(60)
        run(box)
        print(fg.get_num_threads(), box[0] == box[1] == float((a * 2).sum(dtype=np.float64)))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "True"]
