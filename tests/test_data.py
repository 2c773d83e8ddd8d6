"""``fg.utils.data`` with PyTorch's semantics (datasets, samplers, DataLoader, collation,
random_split) and ``fg.device``; batches compared with torch.utils.data where order is
deterministic."""

from __future__ import annotations

import collections

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10)


def test_tensor_dataset_and_loader_batches_match_torch():
    torch = pytest.importorskip("torch")
    ours = DataLoader(TensorDataset(fg.tensor(X), fg.tensor(Y)), batch_size=4)
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(X), torch.tensor(Y)), batch_size=4
    )
    assert len(ours) == len(theirs) == 3
    for (fx, fy), (tx, ty) in zip(ours, theirs):
        np.testing.assert_array_equal(fx.numpy(), tx.numpy())
        np.testing.assert_array_equal(fy.numpy(), ty.numpy())
        assert fy.dtype == fg.int64
    dl = DataLoader(TensorDataset(fg.tensor(X)), batch_size=4, drop_last=True)
    assert len(dl) == 2 and [b[0].shape for b in dl] == [(4, 2), (4, 2)]


def test_shuffle_is_a_permutation_reproducible_with_manual_seed():
    ds = TensorDataset(fg.tensor(Y))
    fg.manual_seed(3)
    a = np.concatenate([b[0].numpy() for b in DataLoader(ds, batch_size=3, shuffle=True)])
    fg.manual_seed(3)
    b = np.concatenate([b[0].numpy() for b in DataLoader(ds, batch_size=3, shuffle=True)])
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == list(range(10)) and a.tolist() != list(range(10))
    c = np.concatenate([b[0].numpy() for b in DataLoader(ds, batch_size=3, shuffle=True)])
    assert c.tolist() != a.tolist()  # a new order each pass


def test_default_collate_of_structures():
    Point = collections.namedtuple("Point", ["x", "y"])
    batch = default_collate(
        [{"a": np.ones(2), "b": 1, "c": 0.5, "d": "s", "e": Point(1, True)} for _ in range(3)]
    )
    assert batch["a"].shape == (3, 2) and batch["b"].dtype == fg.int64
    assert batch["c"].dtype == fg.float64 and batch["d"] == ["s", "s", "s"]
    assert isinstance(batch["e"], Point) and batch["e"].y.dtype == fg.bool_
    with pytest.raises(TypeError, match="cannot batch"):
        default_collate([object(), object()])


class Squares(Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        if not 0 <= i < 7:
            raise IndexError(i)
        return fg.tensor([float(i * i)]), i


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(5))


def test_custom_datasets_subsets_concat_and_split():
    ds = Squares()
    xs, idx = next(iter(DataLoader(ds, batch_size=7)))
    np.testing.assert_array_equal(xs.numpy()[:, 0], np.arange(7) ** 2)
    np.testing.assert_array_equal(idx.numpy(), np.arange(7))
    sub = Subset(ds, [6, 0])
    assert len(sub) == 2 and sub[0][1] == 6
    cat = ConcatDataset([ds, sub])
    assert len(cat) == 9 and cat[7][1] == 6 and cat[-1][1] == 0
    parts = random_split(ds, [0.5, 0.5], generator=0)
    assert [len(p) for p in parts] == [4, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(7))
    with pytest.raises(ValueError, match="sum to 5"):
        random_split(ds, [2, 3])
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert list(DataLoader(ds, batch_size=None))[2][1] == 2
    bs = BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)
    assert list(bs) == [[0, 1], [2, 3], [4]] and len(bs) == 3
    assert [b[1].tolist() for b in DataLoader(ds, batch_sampler=[[3, 1], [0]])] == [[3, 1], [0]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="same first dimension"):
        TensorDataset(fg.ones(3), fg.ones(4))


def test_training_loop_over_a_loader():
    fg.manual_seed(0)
    model = fg.nn.Linear(2, 1)
    opt = fg.optim.SGD(model.parameters(), lr=0.1)
    xs = X / 20.0
    loader = DataLoader(TensorDataset(fg.tensor(xs), fg.tensor(xs.sum(1, keepdims=True))), 5, True)
    losses = []
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = fg.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0]


def test_device_objects():
    d = fg.device("cpu")
    assert d == "cpu" and d.type == "cpu" and d.index is None
    assert fg.ones(2, device=d).device == "cpu"
    c = fg.device("cuda", 1)
    assert c == "cuda:1" and c.type == "cuda" and c.index == 1 and "index=1" in repr(c)
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda"):
        fg.device("tpu")


# -- worker threads (num_workers > 0) ----------------------------------------------------


class SlowSquares(Dataset):
    """Each item sleeps a little (releasing the GIL, as file reads do) and records which
    worker loaded it."""

    def __init__(self, n=24, delay=0.01):
        self.n, self.delay = n, delay
        self.loaded_by = {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import time

        time.sleep(self.delay)
        info = fg.utils.data.get_worker_info()
        self.loaded_by[i] = None if info is None else info.id
        return np.array([float(i * i)]), i


@pytest.mark.parametrize("workers", [1, 3])
def test_workers_give_the_same_batches_in_order_as_the_main_process(workers):
    ds = SlowSquares(n=23, delay=0.0)
    fg.manual_seed(5)
    ref = [(b[0].numpy().copy(), b[1].numpy().copy()) for b in DataLoader(ds, 4, shuffle=True)]
    fg.manual_seed(5)
    got = [
        (b[0].numpy().copy(), b[1].numpy().copy())
        for b in DataLoader(ds, 4, shuffle=True, num_workers=workers, prefetch_factor=3)
    ]
    assert len(got) == len(ref) == 6
    for (xa, ya), (xb, yb) in zip(ref, got):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert set(ds.loaded_by.values()) <= set(range(workers))
    assert fg.utils.data.get_worker_info() is None


def test_workers_load_ahead_concurrently():
    import time

    ds = SlowSquares(n=16, delay=0.02)
    t0 = time.perf_counter()
    assert len(list(DataLoader(ds, 2))) == 8
    serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert len(list(DataLoader(ds, 2, num_workers=4))) == 8
    threaded = time.perf_counter() - t0
    assert threaded < 0.6 * serial, (serial, threaded)
    assert len(set(ds.loaded_by.values())) > 1


def test_worker_init_fn_errors_timeout_and_persistent_workers():
    seen = []
    loader = DataLoader(
        SlowSquares(6, 0.0), 2, num_workers=2, worker_init_fn=seen.append, persistent_workers=True
    )
    assert [int(b[1][0].item()) for b in loader] == [0, 2, 4]
    assert [int(b[1][0].item()) for b in loader] == [0, 2, 4]  # the same threads again
    assert sorted(seen) == [0, 1]

    class Bad(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("broken sample 2")
            return np.zeros(1)

    with pytest.raises(KeyError, match="broken sample 2"):
        list(DataLoader(Bad(), 1, num_workers=2))
    with pytest.raises(RuntimeError, match="timed out"):
        list(DataLoader(SlowSquares(4, 0.5), 1, num_workers=1, timeout=0.05))
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(SlowSquares(), num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(SlowSquares(), prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(SlowSquares(), persistent_workers=True)
    # stopping early leaves nothing running that breaks the next pass
    loader = DataLoader(SlowSquares(20, 0.0), 2, num_workers=2)
    for _ in zip(range(2), loader):
        pass
    assert len(list(loader)) == 10


class ShardedStream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = fg.utils.data.get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_iterable_dataset_runs_once_per_worker_and_can_shard():
    got = sorted(int(v) for b in DataLoader(ShardedStream(11), 2, num_workers=3) for v in b)
    assert got == list(range(11))
    # an unsharded stream is replicated in every worker, as in PyTorch
    got = sorted(int(v) for b in DataLoader(Stream(), 5, num_workers=2) for v in b)
    assert got == sorted(list(range(5)) * 2)


def test_worker_batches_match_torch_workers():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader
    from torch.utils.data import TensorDataset as TorchTensorDataset

    ours = DataLoader(TensorDataset(fg.tensor(X), fg.tensor(Y)), 3, num_workers=2)
    # (torch's own workers are forked processes: not started inside this threaded test run;
    # their batches equal its single-process ones)
    theirs = TorchLoader(TorchTensorDataset(torch.tensor(X), torch.tensor(Y)), 3)
    for (a, b), (c, d) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        np.testing.assert_array_equal(b.numpy(), d.numpy())
