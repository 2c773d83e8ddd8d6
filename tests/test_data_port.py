"""utils.data and utils.checkpoint as PyTorch's test_dataloader / checkpoint tests use them:
collation dtypes and container types, per-worker random streams, structured checkpoint
outputs, Subset / random_split / sampler argument handling."""

from __future__ import annotations

import collections
import importlib
import random
import time
import warnings

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils import data
from ferrograd.utils.checkpoint import checkpoint


def _libs() -> list:
    torch = pytest.importorskip("torch")
    return [(fg, data), (torch, importlib.import_module("torch.utils.data"))]


def _dtype(t) -> str:
    return str(t.dtype).replace("torch.", "")


# -- default_collate / default_convert ---------------------------------------------------


@pytest.mark.parametrize(
    "batch",
    [
        [1, 2.5],
        [2.5, 1],
        [True, 2],
        [True, False],
        [1, 2],
        [np.float32(1), np.float32(2)],
        [np.float16(1), np.float16(2)],
        [np.int32(1), np.int32(2)],
        [np.uint8(1), np.uint8(2)],
        [np.float32(1), np.float64(2)],
        [np.int32(1), 2.5],
        [1, np.float32(2.5)],
        [np.float16(1), 2.5],
        [np.array(1.5, np.float32)] * 2,
        [np.ones(2, np.int32)] * 2,
    ],
)
def test_collate_dtype_comes_from_the_whole_batch_as_torch(batch):
    got = [
        (_dtype(d.default_collate(batch)), d.default_collate(batch).tolist()) for _, d in _libs()
    ]
    assert got[0] == got[1]


def test_collate_through_a_loader_keeps_float_targets_and_numpy_dtypes():
    ds = [(fg.zeros(2), 0), (fg.zeros(2), 0.5)]
    y = next(iter(data.DataLoader(ds, batch_size=2)))[1]
    assert y.dtype == fg.float32 and y.tolist() == [0.0, 0.5]
    ds = [{"x": np.ones(3, np.float32), "y": np.float32(0.5)}] * 4
    assert next(iter(data.DataLoader(ds, batch_size=2)))["y"].dtype == fg.float32


def test_collate_keeps_mapping_and_sequence_types():
    class L(list):
        pass

    for _, d in _libs():
        out = d.default_collate([collections.OrderedDict(a=1, b=2.0)] * 2)
        assert type(out) is collections.OrderedDict and list(out) == ["a", "b"]
        assert type(d.default_collate([L([1, 2]), L([3, 4])])) is L
        assert type(d.default_collate([(1, 2), (3, 4)])) is list
        assert d.default_collate(["a", "b"]) == ["a", "b"]
        with pytest.raises(TypeError):
            d.default_collate([np.array(["a"])])
        with pytest.raises(RuntimeError, match="equal size"):
            d.default_collate([[1, 2], [1]])


def test_default_convert_and_unbatched_loader_convert_numpy():
    for lib, d in _libs():
        out = d.default_convert((1, np.ones(2)))
        assert type(out) is list and out[0] == 1 and isinstance(out[1], lib.Tensor)
        assert _dtype(d.default_convert(np.float32(2))) == "float32"
        assert isinstance(d.default_convert({"a": np.ones(1)})["a"], lib.Tensor)
        assert d.default_convert("ab") == "ab"
        loader = d.DataLoader([np.ones(2, np.float32)] * 3, batch_size=None)
        first = next(iter(loader))
        assert isinstance(first, lib.Tensor) and _dtype(first) == "float32"


# -- worker random streams ---------------------------------------------------------------


class _Aug(data.Dataset):
    """A random augmentation inside __getitem__, with a random delay so that the worker
    threads finish in a different order on every run."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        time.sleep(random.random() / 200)
        return fg.rand(1).item()


def test_worker_draws_are_reproducible_after_manual_seed():
    runs = []
    for _ in range(3):
        fg.manual_seed(0)
        runs.append([float(v) for v in data.DataLoader(_Aug(), batch_size=None, num_workers=2)])
    assert runs[0] == runs[1] == runs[2]
    assert len(set(runs[0])) == 10
    fg.manual_seed(1)
    other = [float(v) for v in data.DataLoader(_Aug(), batch_size=None, num_workers=2)]
    assert other != runs[0]


def test_workers_are_seeded_base_seed_plus_id_and_leave_the_global_stream_alone():
    seen = {}

    def init(wid):
        seen[wid] = (fg.initial_seed(), data.get_worker_info().seed)

    class Quiet(_Aug):
        def __getitem__(self, i):
            return 0.0

    after = []
    for ds in (_Aug(), Quiet()):
        fg.manual_seed(3)
        list(data.DataLoader(ds, batch_size=None, num_workers=2, worker_init_fn=init))
        after.append(fg.rand(2).tolist())
    assert after[0] == after[1]  # the workers' draws did not move the main thread's stream
    assert seen[1][0] == seen[0][0] + 1 and all(a == b for a, b in seen.values())
    assert fg.initial_seed() == 3  # the main thread's seed is untouched


def test_manual_seed_inside_a_worker_reseeds_only_that_worker():
    class Seeded(data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            fg.manual_seed(100)
            return fg.rand(1).item()

    fg.manual_seed(0)
    vals = [float(v) for v in data.DataLoader(Seeded(), batch_size=None, num_workers=2)]
    assert len(set(vals)) == 1
    assert fg.initial_seed() == 0  # the workers' reseeding stayed in the workers
    fg.manual_seed(100)
    assert fg.initial_seed() == 100 and fg.rand(1).item() == vals[0]
    fg.manual_seed(0)
    assert fg.initial_seed() == 0


# -- utils.checkpoint ----------------------------------------------------------------------


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_under_no_grad_builds_no_graph(reentrant):
    a = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        out = checkpoint(lambda a: a * 2, a, use_reentrant=reentrant)
    assert not out.requires_grad and out.grad_fn is None


def test_checkpoint_returns_any_structure_with_right_gradients():
    x0 = np.array([0.3, -1.2, 2.0])
    w0 = np.array([0.5, -1.0, 2.0])

    def f(x, w):
        return {"p": (x * w, None, [x.sin(), 3])}, fg.arange(2)

    def loss(x, w):
        out, idx = checkpoint(f, x, w, use_reentrant=False)
        assert out["p"][1] is None and out["p"][2][1] == 3 and idx.tolist() == [0, 1]
        return (out["p"][0] * out["p"][0]).sum() + (out["p"][2][0] * 2).sum()

    x = fg.tensor(x0, requires_grad=True)
    w = fg.tensor(w0, requires_grad=True)
    loss(x, w).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x0 * w0**2 + 2 * np.cos(x0), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), 2 * w0 * x0**2, rtol=1e-12)
    # against finite differences
    eps = 1e-6
    for i in range(3):
        d = np.zeros(3)
        d[i] = eps
        num = (
            loss(fg.tensor(x0 + d), fg.tensor(w0)).item()
            - loss(fg.tensor(x0 - d), fg.tensor(w0)).item()
        ) / (2 * eps)
        assert abs(num - x.grad.numpy()[i]) < 1e-6
    a = fg.ones(3, requires_grad=True)
    out, attn = checkpoint(lambda a: (a * 2, None), a, use_reentrant=False)
    out.sum().backward()
    assert attn is None and a.grad.tolist() == [2.0, 2.0, 2.0]


def test_checkpoint_reentrant_argument_checks_as_torch():
    for lib in (fg, pytest.importorskip("torch")):
        ck = importlib.import_module(lib.__name__ + ".utils.checkpoint").checkpoint
        with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
            ck(lambda a, k=1: a * k, lib.ones(1, requires_grad=True), k=2, use_reentrant=True)
        lin = lib.nn.Linear(2, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = ck(lin, lib.ones(1, 2), use_reentrant=True)
        assert not out.requires_grad
    assert checkpoint(lambda a, k=1: a * k, fg.ones(1), k=3, use_reentrant=False).item() == 3


# -- Subset, random_split, samplers, ConcatDataset, DataLoader attributes ------------------


def test_subset_passes_lists_and_slices_to_the_dataset():
    for lib, d in _libs():
        ds = d.TensorDataset(lib.arange(10))
        s = d.Subset(ds, [9, 8, 7, 6])
        assert [t.tolist() for t in s[[0, 2]]] == [[9, 7]]
        assert [t.tolist() for t in d.Subset(s, [0, 1, 2])[0:2]] == [[9, 8]]
        assert next(iter(d.DataLoader(s, batch_size=3)))[0].tolist() == [9, 8, 7]


def test_random_split_fractions_as_torch():
    for _, d in _libs():
        with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
            d.random_split(range(10), [-0.5, 1.5])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert [len(x) for x in d.random_split(range(5), [1, 0])] == [5, 0]


def test_sampler_and_dataset_argument_checks_as_torch():
    for lib, d in _libs():
        with pytest.raises(ValueError, match="num_samples"):
            d.RandomSampler(range(3), num_samples=0)
        with pytest.raises(ValueError, match="drop_last"):
            d.BatchSampler(range(3), 2, 1)
        with pytest.raises(ValueError, match="1d"):
            d.WeightedRandomSampler(lib.ones(2, 2), 2)
        with pytest.raises(AssertionError):
            d.ConcatDataset([])

        class It(d.IterableDataset):
            def __iter__(self):
                return iter([1])

        with pytest.raises(AssertionError):
            d.ConcatDataset([[1], It()])
        cat = d.ConcatDataset([[0, 1], [2]])
        with pytest.raises(ValueError, match="absolute value of index"):
            cat[-6]
        assert cat[-1] == 2 and cat.cumulative_sizes == [2, 3]
        assert all(type(n) is int for n in cat.cumulative_sizes)
        loader = d.DataLoader(range(4))
        for name in ("batch_size", "sampler", "dataset", "drop_last", "batch_sampler"):
            with pytest.raises(ValueError, match="should not be set after DataLoader"):
                setattr(loader, name, None)
        loader.num_workers = 0  # not one of the fixed attributes
    with pytest.raises(ValueError):  # the old exception types still catch these
        data.ConcatDataset([])
    with pytest.raises(IndexError):
        data.ConcatDataset([[0, 1], [2]])[-6]
