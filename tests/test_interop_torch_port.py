"""PyTorch's numpy-interop and DLPack tests (test_numpy_interop.py, test_dlpack.py, CPU
parts), run on ferrograd and on PyTorch where it is installed: memory shared both ways
where sharing is promised, the dtypes kept, and refusals with PyTorch's exception types."""

from __future__ import annotations

import warnings
from types import ModuleType

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """These tests are about sharing host memory: their tensors are CPU tensors, whatever
    device the rest of the suite makes tensors on."""
    previous = fg.get_default_device()
    fg.set_default_device("cpu")
    yield
    fg.set_default_device(previous)


def _libs() -> list[ModuleType]:
    libs: list[ModuleType] = [fg]
    try:
        import torch

        libs.append(torch)
    except ImportError:  # pragma: no cover - torch is optional
        pass
    return libs


LIBS = pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


# ------------------------------------------------------------------ Tensor.numpy() shares


@LIBS
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_of_a_view_shares_memory_with_its_strides_and_offset(lib, dtype):
    base = lib.arange(40).reshape(8, 5).to(getattr(lib, dtype))
    want = np.arange(40).reshape(8, 5).astype(dtype)
    x = base.narrow(0, 2, 3)
    assert x.storage_offset() > 0
    y = x.numpy()
    assert y.flags["C_CONTIGUOUS"] and y.flags.writeable
    np.testing.assert_array_equal(y, want[2:5])
    x = base.narrow(0, 2, 3).narrow(1, 1, 3).t()
    y = x.numpy()
    assert not y.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(y, want[2:5, 1:4].T)
    y[0, 1] = 3  # writes reach the tensor, and the base it views
    assert x[0, 1].item() == 3
    assert base[3, 1].item() == 3
    base.add_(1)  # and the tensor's in-place updates show in the array
    assert y[0, 1] == 4
    assert lib.tensor([]).to(getattr(lib, dtype)).numpy().size == 0


@LIBS
def test_numpy_of_a_bool_tensor_shares_memory(lib):
    x = lib.tensor([True, False])
    y = x.numpy()
    assert y.dtype == np.bool_
    y[0] = False
    assert not bool(x[0])


def test_numpy_does_not_disturb_a_pending_backward():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    w = fg.tensor([3.0, 4.0], dtype=fg.float64, requires_grad=True)
    y = x * w
    y.numpy(), w.numpy()  # reading is not a write: no version moves on
    view = x.detach().numpy()  # shared, as PyTorch's
    copy = x.numpy()  # a tensor that requires grad gives a copy (PyTorch refuses)
    copy[0] = 100.0  # so writing into it cannot change what autodiff saved
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])
    with fg.no_grad():
        x.sub_(x.grad)  # an optimizer's step shows in the array taken before
    np.testing.assert_array_equal(view, [-2.0, -2.0])
    assert copy.tolist() == [100.0, 2.0]


def test_numpy_of_memory_shared_read_only_is_read_only():
    arr = np.arange(4.0)
    arr.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = fg.from_numpy(arr)
    for view in (t, t[1:], t[::2]):
        y = view.numpy()
        assert not y.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            y[0] = 1.0
    assert fg.ones(2).numpy().flags.writeable


# --------------------------------------------------------------------------- from_numpy


@LIBS
def test_from_numpy_warns_for_a_non_writable_array(lib):
    arr = np.zeros(5)
    arr.flags["WRITEABLE"] = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.from_numpy(arr)
    assert any(issubclass(w.category, UserWarning) for w in caught)


@LIBS
def test_from_numpy_refuses_strides_that_are_not_whole_elements(lib):
    x = np.lib.stride_tricks.as_strided(np.array([3.0, 5.0, 8.0]), shape=(3,), strides=(3,))
    with pytest.raises(ValueError):
        lib.from_numpy(x)


@LIBS
def test_from_numpy_refuses_a_byte_swapped_array(lib):
    x = np.arange(5.0).astype(">f8")
    with pytest.raises(ValueError, match="byte order"):
        lib.from_numpy(x)


def test_from_numpy_refuses_dtypes_a_tensor_cannot_hold_instead_of_converting():
    for dtype in ("uint16", "uint32", "uint64", "complex64", "<U3", "S1"):
        with pytest.raises(TypeError, match="from_numpy"):
            fg.from_numpy(np.zeros(2, dtype=dtype))


# ------------------------------------------------------------------------------ DLPack


@LIBS
def test_to_dlpack_capsule_is_shared_and_consumed_once(lib):
    torch = pytest.importorskip("torch")
    x = lib.arange(6.0)
    cap = lib.utils.dlpack.to_dlpack(x)
    y = torch.utils.dlpack.from_dlpack(cap)
    y[0] = 7.0
    assert x[0].item() == 7.0
    with pytest.raises(RuntimeError):
        torch.utils.dlpack.from_dlpack(cap)


@LIBS
def test_from_dlpack_of_a_legacy_capsule_is_writable_and_shared(lib):
    torch = pytest.importorskip("torch")
    t = torch.arange(12.0).reshape(3, 4)
    y = lib.from_dlpack(torch.utils.dlpack.to_dlpack(t[1:, ::2]))
    y[0, 1] = 50.0
    assert t[1, 2].item() == 50.0
    t[2, 0] = 60.0
    assert y[1, 0].item() == 60.0


@LIBS
def test_from_dlpack_refuses_a_consumed_capsule(lib):
    torch = pytest.importorskip("torch")
    cap = torch.utils.dlpack.to_dlpack(torch.arange(4.0))
    lib.from_dlpack(cap)
    with pytest.raises(RuntimeError, match="consumed"):
        lib.from_dlpack(cap)


def test_fg_capsule_round_trip_and_read_only_memory():
    x = fg.arange(6.0).reshape(2, 3)
    y = fg.from_dlpack(fg.utils.dlpack.to_dlpack(x.t()))
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0).reshape(2, 3).T)
    y[0, 1] = 9.0
    assert x[1, 0].item() == 9.0
    # read-only memory cannot be marked so in the legacy format: the capsule is a copy
    arr = np.arange(3.0)
    arr.flags.writeable = False
    with pytest.warns(UserWarning):
        t = fg.from_numpy(arr)
    back = fg.from_dlpack(fg.utils.dlpack.to_dlpack(t))
    back[0] = 5.0
    assert arr[0] == 0.0


def test_dlpack_dl_device_other_than_cpu_is_refused():
    x = fg.arange(4.0)
    assert x.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="DLPack device"):
        x.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    np.testing.assert_array_equal(
        np.from_dlpack(x, device="cpu"), [0.0, 1.0, 2.0, 3.0]
    )  # numpy passes dl_device=(1, 0)


def test_dlpack_copy_true_is_a_copy_for_both_formats():
    x = fg.arange(4.0)
    for kw in ({"max_version": (1, 0)}, {}):
        cap = x.__dlpack__(copy=True, **kw)
        a = fg.from_dlpack(cap)
        a[0] = 5.0
        assert x[0].item() == 0.0
    torch = pytest.importorskip("torch")
    y = torch.from_dlpack(x, copy=True)
    y[0] = 5.0
    assert x[0].item() == 0.0
    y = torch.from_dlpack(x)
    y[0] = 5.0
    assert x[0].item() == 5.0


@pytest.mark.parametrize("to_array", [np.asarray, lambda t: t.numpy()], ids=["asarray", "numpy"])
def test_array_of_a_tensor_stays_valid_after_the_tensor_gets_new_memory(to_array):
    import gc

    a = fg.arange(100_000.0)
    view = to_array(a)
    a.set_(fg.ones(4))
    gc.collect()
    _ = [fg.full((100_000,), 7.0) for _ in range(5)]  # reuse any memory freed
    np.testing.assert_array_equal(view[:5], [0.0, 1.0, 2.0, 3.0, 4.0])
    lin = fg.nn.Linear(300, 300)
    weight = to_array(lin.weight)
    want = weight.copy()
    lin.to(fg.float64)  # the same Parameter over new float64 memory
    gc.collect()
    _ = [fg.full((300, 300), 3.0) for _ in range(5)]
    np.testing.assert_array_equal(weight, want)


class _DLPackOnly:
    """Offers only the DLPack methods (no __array__, no buffer protocol)."""

    def __init__(self, tensor: object) -> None:
        self.tensor = tensor

    def __dlpack__(self, *args: object, **kwargs: object) -> object:
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.tensor.__dlpack_device__()


@LIBS
def test_tensor_of_an_object_offering_only_dlpack_is_a_copy_of_its_values(lib):
    src = np.arange(10.0)
    t = lib.tensor(_DLPackOnly(src))
    assert str(t.dtype).split(".")[-1] == "float64"
    np.testing.assert_array_equal(t.numpy(), src)
    t[0] = 5.0
    assert src[0] == 0.0
    assert lib.tensor(_DLPackOnly(np.array([True, False]))).dtype == lib.bool


@LIBS
def test_dlpack_stream_on_the_cpu_is_refused_as_pytorch(lib):
    x = lib.arange(5.0)
    with pytest.raises(AssertionError, match="stream should be None"):
        x.__dlpack__(stream=0)
    with pytest.raises(TypeError):
        x.__dlpack__(stream=object())


@LIBS
def test_numpy_then_from_dlpack_is_the_same_memory(lib):
    t = lib.arange(5.0)
    res = lib.from_dlpack(t.numpy())
    assert t.data_ptr() == res.data_ptr()
    x = lib.arange(16.0)[::3][:1]
    assert lib.from_dlpack(np.from_dlpack(x)).stride() == (3,)


@LIBS
def test_from_dlpack_copy_and_device_keywords(lib):
    a = np.arange(4.0)
    r = lib.from_dlpack(a, copy=True)
    r[0] = 9.0
    assert a[0] == 0.0
    r = lib.from_dlpack(a, copy=False)
    r[0] = 9.0
    assert a[0] == 9.0
    r = lib.from_dlpack(a, device="cpu")
    assert r.data_ptr() == a.ctypes.data
    with pytest.raises(ValueError, match="without (a )?cop"):
        lib.from_dlpack(a, device="cuda", copy=False)
