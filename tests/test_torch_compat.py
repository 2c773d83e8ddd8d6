"""PyTorch's spellings of tensor queries next to numpy's: ``size()``/``size(d)`` with the
``size`` property, ``dim()``, ``numel()``, ``mT``."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest


def test_size_is_numpy_property_and_torch_method():
    x = fg.ones(2, 3, 4)
    assert x.size == 24 and int(x.size) == 24  # numpy
    assert x.size() == (2, 3, 4)  # PyTorch
    assert x.size(0) == 2 and x.size(-1) == 4
    with pytest.raises(IndexError, match="size"):
        x.size(3)
    with pytest.raises(TypeError, match="size"):
        x.size(1.5)
    assert fg.tensor(3.0).size() == ()


def test_dim_numel_mT():
    x = fg.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x.dim() == x.ndim == 3
    assert x.numel() == x.nelement() == 24
    np.testing.assert_array_equal(
        x.mT.numpy(), np.swapaxes(np.arange(24.0).reshape(2, 3, 4), -1, -2)
    )
    with pytest.raises(ValueError, match="mT"):
        _ = fg.ones(3).mT
    w = fg.tensor(np.arange(6.0).reshape(2, 3))
    gm = fg.GradManager().attach([w])
    with gm:
        gm.backward((w.mT * fg.tensor([[1.0, 2.0]])).sum())
    np.testing.assert_array_equal(w.grad.numpy(), [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])


def test_dim_and_keepdim_spellings():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = fg.tensor(a)
    np.testing.assert_array_equal(x.sum(dim=1).numpy(), a.sum(axis=1))
    np.testing.assert_array_equal(
        x.sum(dim=(0, 2), keepdim=True).numpy(), a.sum((0, 2), keepdims=True)
    )
    np.testing.assert_array_equal(fg.mean(x, dim=-1).numpy(), a.mean(-1))
    np.testing.assert_array_equal(fg.sum(x, dim=0, keepdim=True).numpy(), a.sum(0, keepdims=True))
    np.testing.assert_array_equal(x.mean(1, keepdim=True).numpy(), a.mean(1, keepdims=True))
    with pytest.raises(TypeError, match="axis and dim"):
        x.sum(axis=1, dim=1)
    with pytest.raises(TypeError, match="keepdims and keepdim"):
        fg.mean(x, keepdims=True, keepdim=True)
    w = fg.tensor(a)
    gm = fg.GradManager().attach([w])
    with gm:
        gm.backward(w.mean(dim=2).sum())
    np.testing.assert_allclose(w.grad.numpy(), np.full(a.shape, 0.25))


def test_softmax_takes_dim():
    x = fg.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(x.softmax(dim=0).numpy(), x.softmax(0).numpy())
    np.testing.assert_allclose(fg.log_softmax(x, dim=1).numpy(), x.log_softmax(1).numpy())
    np.testing.assert_allclose(fg.nn.functional.softmax(x, dim=1).numpy().sum(1), [1, 1])
    with pytest.raises(TypeError, match="both axis and dim"):
        x.softmax(1, dim=1)


def test_transpose_of_two_dims_swaps_them_as_pytorch():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(fg.tensor(a).transpose(0, 1).numpy(), a.T)
    np.testing.assert_array_equal(fg.tensor(b).transpose(1, 2).numpy(), b.swapaxes(1, 2))
    np.testing.assert_array_equal(fg.tensor(b).transpose(-1, 0).numpy(), b.swapaxes(-1, 0))
    np.testing.assert_array_equal(fg.tensor(b).transpose(2, 0, 1).numpy(), b.transpose(2, 0, 1))


def test_stack_concat_gather_take_dim():
    x = fg.tensor(np.arange(6.0).reshape(2, 3))
    assert fg.stack([x, x], dim=2).shape == (2, 3, 2)
    assert fg.concat([x, x], dim=1).shape == (2, 6)
    assert fg.cat([x, x], 1).shape == (2, 6)
    np.testing.assert_array_equal(
        x.gather(axis=1, index=fg.tensor([[2], [0]])).numpy(), [[2.0], [3.0]]
    )
    with pytest.raises(TypeError, match="both axis and dim"):
        fg.stack([x, x], 0, dim=1)


def test_bool_arithmetic_is_logic_as_pytorch():
    a = fg.tensor([True, False, True, False])
    b = fg.tensor([True, True, False, False])
    assert (a + b).dtype == fg.bool_ and (a + b).tolist() == [True, True, True, False]
    assert (a * b).tolist() == [True, False, False, False]
    assert fg.maximum(a, b).tolist() == [True, True, True, False]
    assert fg.minimum(a, b).tolist() == [True, False, False, False]
    assert (a + True).tolist() == [True, True, True, True]
    with pytest.raises(fg.DTypeError, match="sub"):
        a - b  # PyTorch refuses bool subtraction too
    assert (a + fg.tensor([1, 2, 3, 4])).tolist() == [2, 2, 4, 4]  # bool with int: int64


def test_np_asarray_is_a_zero_copy_read_only_view_of_a_cpu_tensor():
    t = fg.tensor(np.arange(12.0).reshape(3, 4), device="cpu")
    a = np.asarray(t)
    assert np.shares_memory(a, np.asarray(t))
    assert not a.flags.writeable  # numpy cannot change what autodiff may have saved
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1.0
    t += 1.0  # the tensor's own in-place update shows through the view
    assert a[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    # views keep their strides; the array keeps the memory alive
    assert np.asarray(t.T).tolist() == (np.arange(12.0).reshape(3, 4) + 1).T.tolist()
    assert np.asarray(t[:, ::2]).tolist() == [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]]
    view = np.asarray(fg.tensor([1.5, 2.5], device="cpu"))
    import gc

    gc.collect()
    assert view.tolist() == [1.5, 2.5]
    # t.numpy() is a writable view, as PyTorch's: writes through it reach the tensor
    c = t.numpy()
    c[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    t[0, 0] = 1.0
    # dtypes numpy cannot read as they are, and values inside a trace, take the copying path
    assert np.asarray(fg.tensor([1.0], device="cpu").astype("bfloat16").float()).tolist() == [1.0]
    traced = fg.trace(lambda x: np.asarray(x * 2))
    with pytest.raises(fg.TraceError, match="numpy"):
        traced(t)
