"""MegEngine 1.x's data pipeline (``ferrograd.data`` as ``megengine.data``), its amp API
(``autocast`` without a device, ``amp.enabled``, ``GradScaler.backward/unscale``), gradients
from a GradManager that are writable in place, numpy parameters of distributions and the
message of a Function called with a non-Tensor. Expected values come from numpy or from
MegEngine's own tests."""

from __future__ import annotations

import time

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import amp, data
from ferrograd.autodiff import Function, GradManager
from ferrograd.data import transform as T
from ferrograd.data.dataset import ArrayDataset, ConcatDataset, Dataset, StreamDataset
from ferrograd.data.sampler import (
    Infinite,
    RandomSampler,
    ReplacementSampler,
    SequentialSampler,
    StreamSampler,
)

# ------------------------------------------------------------------------------ datasets


def test_abstract_datasets_cannot_be_instantiated():
    with pytest.raises(TypeError):
        Dataset()
    with pytest.raises(TypeError):
        StreamDataset()


def test_array_dataset_rows_and_length_check():
    x = np.arange(30).reshape(10, 3)
    y = np.arange(10)
    ds = ArrayDataset(x, y)
    assert len(ds) == 10
    row, label = ds[4]
    np.testing.assert_array_equal(row, x[4])
    assert label == 4
    with pytest.raises(ValueError, match="inconsistent"):
        ArrayDataset(x, np.arange(3))


def test_concat_dataset_indexes_across_parts():
    a = ArrayDataset(np.arange(3))
    b = ArrayDataset(np.arange(10, 15))
    ds = ConcatDataset([a, b])
    assert len(ds) == 8
    assert [int(ds[i][0]) for i in range(8)] == [0, 1, 2, 10, 11, 12, 13, 14]
    assert int(ds[-1][0]) == 14


# ------------------------------------------------------------------------------ samplers


def test_sequential_sampler_yields_batches_of_indices():
    ds = ArrayDataset(np.arange(24))
    s = SequentialSampler(ds, batch_size=5)
    batches = list(s)
    assert batches[0] == [0, 1, 2, 3, 4]
    assert batches[-1] == [20, 21, 22, 23]
    assert len(s) == len(batches) == 5
    s = SequentialSampler(ds, batch_size=5, drop_last=True)
    assert len(s) == len(list(s)) == 4
    with pytest.raises(ValueError, match="batch_size"):
        SequentialSampler(ds, batch_size=0)


def test_random_sampler_is_the_seeded_numpy_permutation():
    ds = ArrayDataset(np.arange(20))
    flat = [i for b in RandomSampler(ds, batch_size=3, seed=7) for i in b]
    assert flat == np.random.RandomState(7).permutation(20).tolist()
    again = [i for b in RandomSampler(ds, batch_size=3, seed=7) for i in b]
    assert again == flat
    assert sorted(flat) == list(range(20))


def test_samplers_split_indices_over_ranks():
    ds = ArrayDataset(np.arange(10))
    parts = [
        [i for b in SequentialSampler(ds, batch_size=2, world_size=3, rank=r) for i in b]
        for r in range(3)
    ]
    # 10 indices padded to 12 by wrapping around, then every third from the rank
    assert parts == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]


def test_replacement_sampler_draws_num_samples_with_weights():
    ds = ArrayDataset(np.arange(4))
    s = ReplacementSampler(ds, batch_size=10, num_samples=30, weights=[0, 1, 0, 3], seed=0)
    flat = [i for b in s for i in b]
    assert len(flat) == 30
    assert set(flat) <= {1, 3}
    expected = np.random.RandomState(0).choice(4, size=30, p=np.array([0, 1, 0, 3]) / 4)
    assert flat == expected.tolist()


def test_infinite_restarts_and_forwards_attributes():
    s = SequentialSampler(ArrayDataset(np.arange(4)), batch_size=2)
    inf = Infinite(s)
    assert inf.batch_size == 2
    it = iter(inf)
    assert [next(it) for _ in range(5)] == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]


# ------------------------------------------------------------------------------ loader


def test_collator_stacks_fields_into_numpy_arrays():
    out = data.Collator().apply([(np.ones(2), 1, 0.5), (np.zeros(2), 2, 1.5)])
    np.testing.assert_array_equal(out[0], [[1, 1], [0, 0]])
    np.testing.assert_array_equal(out[1], [1, 2])
    assert out[2].dtype == np.float64


def test_dataloader_defaults_and_argument_checks():
    x = np.random.randint(0, 255, size=(100, 1, 4, 4), dtype=np.uint8)
    ds = ArrayDataset(x, np.arange(100))
    with pytest.raises(ValueError, match="num_workers"):
        data.DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="timeout"):
        data.DataLoader(ds, timeout=-1)
    dl = data.DataLoader(ds)
    assert isinstance(dl.sampler, SequentialSampler)
    assert isinstance(dl.transform, T.PseudoTransform)
    assert isinstance(dl.collator, data.Collator)
    assert len(data.DataLoader(ds, RandomSampler(ds, batch_size=6))) == 17
    assert len(data.DataLoader(ds, RandomSampler(ds, batch_size=6, drop_last=True))) == 16


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_yields_numpy_batches_in_sampler_order(num_workers):
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    ds = ArrayDataset(x, np.arange(10))
    dl = data.DataLoader(
        ds, SequentialSampler(ds, batch_size=4), num_workers=num_workers, timeout=5
    )
    batches = list(dl)
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert isinstance(batches[0][0], np.ndarray)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), np.arange(10))


def test_dataloader_preload_hands_out_tensors():
    ds = ArrayDataset(np.ones((4, 2), dtype=np.float32))
    (batch,) = next(iter(data.DataLoader(ds, SequentialSampler(ds, batch_size=4), preload=True)))
    assert isinstance(batch, fg.Tensor)
    np.testing.assert_array_equal(batch.numpy(), np.ones((4, 2)))


class _Stream(StreamDataset):
    def __init__(self, n, block=False):
        self.n, self.block = n, block

    def __iter__(self):
        for i in range(self.n):
            if self.block:
                time.sleep(5)
            yield np.full((2, 2, 3), i, dtype=np.uint8), i


def test_stream_dataloader_with_transforms():
    dl = data.DataLoader(
        _Stream(9),
        StreamSampler(batch_size=4),
        T.Compose([T.Normalize(mean=(1, 2, 3), std=(2, 2, 2)), T.ToMode("CHW")]),
    )
    batches = list(dl)
    assert len(batches) == 2  # the last 1 sample does not fill a batch
    img, label = batches[1]
    assert img.shape == (4, 3, 2, 2)
    np.testing.assert_array_equal(label, [4, 5, 6, 7])
    np.testing.assert_allclose(img[0, :, 0, 0], (4 - np.array([1, 2, 3])) / 2)


def test_stream_dataloader_timeout_raises_runtime_error():
    dl = data.DataLoader(_Stream(3, block=True), StreamSampler(batch_size=1), timeout=0.3)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timeout"):
        next(iter(dl))
    assert time.monotonic() - start < 3


# ------------------------------------------------------------------------------ transforms


def test_vision_transforms_on_hwc_images():
    img = np.arange(4 * 6 * 1, dtype=np.uint8).reshape(4, 6, 1)
    np.testing.assert_array_equal(T.CenterCrop(2).apply(img), img[1:3, 2:4])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0).apply(img), img[:, ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(1.0).apply(img), img[::-1])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(0.0).apply(img), img)
    assert T.ToMode("CHW").apply(img).shape == (1, 4, 6)
    padded = T.Pad(1, value=9).apply(img)
    assert padded.shape == (6, 8, 1)
    assert padded[0, 0, 0] == 9
    np.testing.assert_array_equal(padded[1:5, 1:7], img)
    # the label (second field) passes through a vision transform untouched
    out_img, label = T.RandomHorizontalFlip(1.0).apply((img, 3))
    assert label == 3
    np.testing.assert_array_equal(out_img, img[:, ::-1])


def test_resize_nearest_and_linear_match_pixel_centre_sampling():
    img = np.array([[0, 4]], dtype=np.float32).reshape(1, 2, 1)
    # source x = (x_out + 0.5) / 2 - 0.5, clamped: 0, 0.25, 0.75, 1
    lin = T.Resize((1, 4)).apply(img)
    np.testing.assert_allclose(lin[0, :, 0], [0, 1, 3, 4])
    near = T.Resize((1, 4), interpolation=0).apply(img)
    np.testing.assert_array_equal(near[0, :, 0], [0, 0, 4, 4])
    # an int is the shorter side
    assert T.Resize(4).apply(np.zeros((8, 16, 3), np.uint8)).shape == (4, 8, 3)


def test_random_crop_pads_then_crops_output_size():
    img = np.ones((4, 4, 3), dtype=np.uint8)
    out = T.RandomCrop(6, padding_size=1).apply(img)
    assert out.shape == (6, 6, 3)
    assert out.sum() == img.sum()


# ------------------------------------------------------------------------------ amp


def test_megengine_autocast_sets_the_module_switches_and_restores_them():
    assert amp.enabled is False
    assert (amp.low_prec_dtype, amp.high_prec_dtype) == ("float16", "float32")
    a = fg.ones((2, 2))
    with amp.autocast(low_prec_dtype="bfloat16"):
        assert amp.enabled is True
        assert amp.low_prec_dtype == "bfloat16"
        assert (a @ a).dtype == fg.bfloat16
    assert amp.enabled is False
    assert amp.low_prec_dtype == "float16"
    assert (a @ a).dtype == fg.float32

    @amp.autocast()
    def f(x):
        return x @ x

    assert f(a).dtype == fg.float16
    amp.enabled = True
    try:
        assert (a @ a).dtype == fg.float16
    finally:
        amp.enabled = False
    assert (a @ a).dtype == fg.float32
    with pytest.raises(ValueError, match="high_prec_dtype"):
        amp.autocast(high_prec_dtype="float16")
    # PyTorch's spelling keeps working (for the CPU's tensors)
    c = fg.ones((2, 2), device="cpu")
    with amp.autocast("cpu"):
        assert (c @ c).dtype == fg.bfloat16


@pytest.mark.parametrize(
    "calc",
    [
        lambda x, y: 2 * (x + 2 * y) + 1,
        lambda x, y: 2 * (x + 1) + 1,
        lambda x, y: 2 * (x + y) + 1,  # x and y get the same gradient
    ],
)
def test_grad_scaler_backward_then_unscale(calc):
    scaler = amp.GradScaler()
    gm = GradManager()
    for value in (np.random.random((1, 2, 3)), 1.0):
        x, y = fg.tensor(value), fg.tensor(value)
        gm.attach([x, y])
        with gm:
            scaler.backward(gm, calc(x, y), unscale_grad=False)
        np.testing.assert_equal(x.grad.numpy(), 2 * scaler.scale_factor)
        scaler.unscale(filter(lambda t: t.grad is not None, gm.attached_tensors()))
        np.testing.assert_equal(x.grad.numpy(), 2)


def test_grad_scaler_non_finite_gradients_are_dropped_and_scale_backs_off():
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=1)
    x = fg.tensor([1.0, 0.0])
    gm = GradManager().attach([x])
    with gm:
        scaler.backward(gm, (x.sqrt() * 1).sum())  # d sqrt(0) = inf
    assert x.grad is None
    assert scaler.scale_factor == 4.0
    with gm:
        scaler.backward(gm, (x * 3).sum())
    np.testing.assert_equal(x.grad.numpy(), [3, 3])
    assert scaler.scale_factor == 8.0


def test_gradient_of_a_sum_is_writable_in_place():
    torch = pytest.importorskip("torch")
    x = fg.nn.Parameter(fg.tensor([3.0, 4.0]))
    gm = GradManager().attach([x])
    with gm:
        gm.backward(x.sum())
    x.grad *= 3
    t = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    t.sum().backward()
    t.grad *= 3
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    # PyTorch's GradScaler.unscale_ on such a gradient
    scaler, opt = amp.GradScaler(device="cpu", init_scale=4.0), fg.optim.SGD([x], lr=0.1)
    x.grad = None
    with gm:
        gm.backward(scaler.scale(x.sum()))
    scaler.unscale_(opt)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


# ------------------------------------------------------------------------------ misc


def test_exponential_takes_a_numpy_rate():
    from ferrograd.distributions import Exponential

    rate = np.abs(np.random.default_rng(0).standard_normal((5, 5))) + 0.1
    d = Exponential(rate)
    assert tuple(d.sample().shape) == (5, 5)
    np.testing.assert_allclose(d.mean.numpy(), 1 / rate, rtol=1e-12)


def test_function_with_a_non_tensor_input_names_the_expected_type():
    class AddC(Function):
        def forward(self, a, c):
            return a + c

        def backward(self, g):
            return g

    with pytest.raises(TypeError, match=r"op .* expect type Tensor as inputs"):
        AddC()(fg.tensor([1.0]), 1)
