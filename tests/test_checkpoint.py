"""fg.save / fg.load (safetensors files) and DLPack exchange."""

from __future__ import annotations

import gc
import io
from collections import OrderedDict

import ferrograd as fg
import numpy as np
import pytest


def test_state_dicts_and_nested_structures_round_trip(tmp_path):
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.ReLU(), fg.nn.BatchNorm1d(4))
    opt = fg.optim.AdamW(model.parameters(), lr=0.01)
    for p in model.parameters():
        p.grad = fg.ones_like(p)
    opt.step()
    ck = {
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "epoch": 7,
        "history": [0.5, 0.25, float("inf")],
        "note": "run 1",
        "pair": (1, None, True),
    }
    path = tmp_path / "ck.safetensors"
    fg.save(ck, path)
    back = fg.load(path)
    assert back["epoch"] == 7 and back["note"] == "run 1" and back["pair"] == (1, None, True)
    assert back["history"] == [0.5, 0.25, float("inf")]
    assert isinstance(back["model"], OrderedDict)
    assert list(back["model"]) == list(ck["model"])
    for k, v in ck["model"].items():
        assert back["model"][k].dtype == v.dtype
        np.testing.assert_array_equal(back["model"][k].numpy(), v.numpy())
    assert back["model"]["2.num_batches_tracked"].dtype == fg.int64
    assert sorted(back["opt"]["state"]) == [0, 1, 2, 3]  # int keys stay ints
    assert back["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    # resuming: a new model and optimizer continue exactly
    model2 = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.ReLU(), fg.nn.BatchNorm1d(4))
    model2.load_state_dict(back["model"])
    opt2 = fg.optim.AdamW(model2.parameters(), lr=0.5)
    opt2.load_state_dict(back["opt"])
    for a, b in ((model, opt), (model2, opt2)):
        for p in a.parameters():
            p.grad = fg.full_like(p, 0.3)
        b.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.parametrize(
    "dtype",
    ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"],
)
def test_every_dtype_bit_exact(dtype):
    x = fg.tensor(np.array([[0.0, -1.5, 2.25], [1e-3, 3.0, -0.0]])).astype(dtype)
    buf = io.BytesIO()
    fg.save({"x": x, "view": x.T}, buf)
    back = fg.load(io.BytesIO(buf.getvalue()))
    assert back["x"].dtype == x.dtype and back["view"].shape == (3, 2)
    np.testing.assert_array_equal(back["x"].astype("float64").numpy(), x.astype("float64").numpy())
    np.testing.assert_array_equal(
        back["view"].astype("float64").numpy(), x.T.astype("float64").numpy()
    )


def test_parameters_stay_parameters_and_map_location(tmp_path):
    p = fg.nn.Parameter(fg.ones(2))
    fg.save([p, fg.zeros(1)], tmp_path / "a")
    back = fg.load(tmp_path / "a", map_location="cpu")
    assert isinstance(back[0], fg.nn.Parameter) and not isinstance(back[1], fg.nn.Parameter)
    assert back[0].device == "cpu"


def test_truncated_or_corrupt_files_raise(tmp_path):
    path = tmp_path / "ck"
    fg.save({"w": fg.ones(100)}, path)
    data = path.read_bytes()
    for cut in (0, 7, 50, len(data) - 3):
        (tmp_path / "cut").write_bytes(data[:cut])
        with pytest.raises(ValueError, match="load"):
            fg.load(tmp_path / "cut")
    with pytest.raises(FileNotFoundError):
        fg.load(tmp_path / "missing")
    with pytest.raises(TypeError, match="save: cannot store a function at 'bad'"):
        fg.save({"bad": lambda: 0}, tmp_path / "x")  # not picklable either
    assert not (tmp_path / "x").exists()


def test_files_open_in_other_safetensors_readers(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    m = fg.nn.Linear(3, 2)
    fg.save(m.state_dict(), tmp_path / "m.safetensors")
    arrays = st.load_file(str(tmp_path / "m.safetensors"))
    assert set(arrays) == {"weight", "bias"}
    np.testing.assert_array_equal(arrays["weight"], m.weight.numpy())
    st.save_file({"a": np.arange(4, dtype=np.int32)}, str(tmp_path / "o.safetensors"))
    other = fg.load(tmp_path / "o.safetensors")
    assert other["a"].dtype == fg.int32 and other["a"].tolist() == [0, 1, 2, 3]


def test_dlpack_with_numpy_and_torch():
    x = fg.tensor([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    assert x.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(x), x.numpy())
    y = fg.from_dlpack(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert y.dtype == fg.int32 and y.shape == (2, 3)
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    z = fg.from_dlpack(t)
    assert z.dtype == fg.float64 and z.tolist() == t.tolist()
    back = torch.from_dlpack(x)
    assert back.dtype == torch.float32 and back.tolist() == x.tolist()
    assert fg.tensor(torch.zeros(2, dtype=torch.float64)).dtype == fg.float64


def test_dlpack_export_shares_cpu_memory():
    # numpy 2 and torch read a CPU tensor's memory in place (numpy keeps it read-only), views
    # keep their strides; the exported value stays correct after the tensor's name is gone
    x = fg.tensor(np.arange(12.0).reshape(3, 4), device="cpu")
    addr = fg._core._host_memory(x)[0]
    a = np.from_dlpack(x)
    assert a.ctypes.data == addr and not a.flags.writeable
    v = np.from_dlpack(x[:, 1::2].T)
    np.testing.assert_array_equal(v, np.arange(12.0).reshape(3, 4)[:, 1::2].T)
    assert v.ctypes.data == addr + 8
    del x
    np.testing.assert_array_equal(a, np.arange(12.0).reshape(3, 4))
    torch = pytest.importorskip("torch")
    y = fg.tensor(np.arange(6, dtype=np.float32), device="cpu")
    t = torch.from_dlpack(y)
    assert t.data_ptr() == fg._core._host_memory(y)[0] and t.tolist() == y.tolist()


def test_dlpack_and_from_numpy_import_share_cpu_memory():
    torch = pytest.importorskip("torch")
    # PyTorch: a strided view, shared both ways, kept alive by the tensor
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    view = base[:, 1::2]
    z = fg.from_dlpack(view)
    assert fg._core._host_memory(z)[0] == view.data_ptr() and z.shape == (3, 2)
    np.testing.assert_array_equal(z.numpy(), view.numpy())
    base[0, 1] = -1.0
    assert z[0, 0].item() == -1.0
    z.mul_(2.0)
    np.testing.assert_array_equal(view.numpy(), z.numpy())
    del base, view
    gc.collect()
    assert z.sum().item() == 2 * (-1 + 3 + 5 + 7 + 9 + 11)
    # numpy: from_numpy and as_tensor share (negative strides too); tensor() copies
    a = np.arange(6, dtype=np.float32)[::-1]
    for make in (fg.from_numpy, fg.as_tensor, fg.from_dlpack):
        t = make(a)
        a[0] += 10.0
        assert t[0].item() == a[0]
    c = fg.tensor(a)
    a[0] = 0.0
    assert c[0].item() != 0.0
    # gradients flow through a shared tensor like any other
    w = fg.from_numpy(np.array([1.0, 2.0])).requires_grad_()
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_read_only_memory_is_imported_without_copy_and_refuses_writes():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = fg.from_numpy(a)
    assert fg._core._host_memory(t)[0] == a.ctypes.data
    with pytest.raises(ValueError, match="read-only memory"):
        t.add_(1.0)
    with pytest.raises(ValueError, match="read-only memory"):
        t[0] = 5.0
    np.testing.assert_array_equal(t.numpy(), [0.0, 1.0, 2.0, 3.0])
    u = t.clone()
    u.add_(1.0)  # a copy is writable
    np.testing.assert_array_equal((t * 2).numpy(), [0.0, 2.0, 4.0, 6.0])
    jax = pytest.importorskip("jax")
    j = jax.device_put(np.arange(3.0, dtype=np.float32), jax.devices("cpu")[0])
    f = fg.from_dlpack(j)
    assert f.tolist() == [0.0, 1.0, 2.0]
    assert fg._core._host_memory(f)[0] == np.from_dlpack(j).ctypes.data
    with pytest.raises(ValueError, match="read-only"):
        f.mul_(2.0)


def test_memory_that_cannot_be_shared_is_copied():
    for a in (
        np.array([True, False]),
        np.zeros((0, 3), dtype=np.float32),
    ):  # (byte-swapped arrays and dtypes a tensor cannot hold are refused, as PyTorch does)
        t = fg.from_numpy(a)
        np.testing.assert_array_equal(t.numpy(), a)
