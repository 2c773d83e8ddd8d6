"""Interop with PyTorch and numpy when porting: fg.tensor of torch tensors (requires grad,
bfloat16), dtype inference of lists of numpy scalars and 0-d tensors, the requires_grad
flag through fg.save / fg.load, and memory shared with bool and bfloat16 arrays."""

from __future__ import annotations

import os
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

# memory shared with numpy and CPU PyTorch tensors: the CPU run of the suite
pytestmark = pytest.mark.skipif(
    os.environ.get("FERROGRAD_TEST_DEVICE", "cpu") != "cpu", reason="host memory interop"
)


# ----------------------------------------------------------- fg.tensor of a torch tensor


@pytest.mark.parametrize("make", ["requires_grad", "parameter"])
def test_tensor_of_torch_tensor_requiring_grad(make):
    if make == "parameter":
        src = torch.nn.Linear(3, 2).double().weight
    else:
        src = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).requires_grad_()
    for build in (fg.tensor, fg.as_tensor):
        t = build(src)
        ref = src.detach().clone()
        assert str(t.dtype) == "float64"
        assert not t.requires_grad and t.is_leaf
        np.testing.assert_array_equal(t.numpy(), ref.numpy())
    # torch.tensor semantics: a copy, detached
    t = fg.tensor(src)
    with torch.no_grad():
        src.mul_(0)
    assert t.abs().sum().item() > 0
    g = fg.tensor(src, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    (g * g).sum().backward()
    assert g.grad.shape == g.shape


def test_tensor_of_torch_tensor_dtypes():
    for name in [
        "bool",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "float16",
        "bfloat16",
        "float32",
    ]:
        src = torch.tensor([0, 1, 3], dtype=getattr(torch, name))
        t = fg.tensor(src)
        assert str(t.dtype) == name, name
        np.testing.assert_array_equal(t.float().numpy(), src.float().numpy())
    assert str(fg.tensor(torch.ones(2, dtype=torch.float64), dtype=fg.float32).dtype) == "float32"
    bf = torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16, requires_grad=True)
    t = fg.tensor(bf)
    assert str(t.dtype) == "bfloat16"
    assert t.float().tolist() == bf.detach().float().tolist()
    assert str(fg.tensor(torch.tensor([1, 2], dtype=torch.int16)).dtype) == "int16"


# ------------------------------------------------------------- dtype of lists of scalars


def _lists():
    t = torch.tensor
    return {
        "np64": [np.float64(1), np.float64(2)],
        "np32": [np.float32(1)],
        "np16": [np.float16(1), np.float16(2)],
        "py_np64": [1.0, np.float64(2)],
        "np16_np32": [np.float16(1), np.float32(2)],
        "np64_int": [np.float64(1), 3],
        "npint32": [np.int32(1), np.int32(2)],
        "npint32_pyfloat": [np.int32(1), 2.5],
        "npbool": [np.bool_(True)],
        "nested": [[np.float64(1)], [2.0]],
        "t64": [t(1.0, dtype=torch.float64), t(2.0, dtype=torch.float64)],
        "t16": [t(1.0, dtype=torch.float16), t(2.0, dtype=torch.float16)],
        "t16_py": [t(1.0, dtype=torch.float16), 2.0],
        "t16_t32": [t(1.0, dtype=torch.float16), t(1.0)],
        "tbf": [t(1.0, dtype=torch.bfloat16)],
        "tbf_t16": [t(1.0, dtype=torch.bfloat16), t(1.0, dtype=torch.float16)],
        "t64_pyint": [t(1.0, dtype=torch.float64), 1],
        "ti32": [t(1, dtype=torch.int32)],
        "tbool_int": [t(True), 1],
        "t64_rg": [t(1.0, dtype=torch.float64, requires_grad=True)],
        "pyfloats": [1.0, 2.0],
        "pyints": [1, 2],
        "pybools": [True, False],
    }


@pytest.mark.parametrize("key", list(_lists()))
def test_list_dtype_inference_matches_torch(key):
    data = _lists()[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (torch: a scalar requiring grad)
        ref = torch.tensor(data)
    got = fg.tensor(data)
    assert str(got.dtype) == str(ref.dtype).rsplit(".", 1)[-1]
    assert tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(got.float().numpy(), ref.detach().float().numpy())


def test_list_of_fg_tensors_keeps_dtype():
    one = fg.tensor(1.0, dtype=fg.float64)
    assert str(fg.tensor([one, one]).dtype) == "float64"
    assert str(fg.tensor([fg.tensor(1.0, dtype=fg.float16), 2.0]).dtype) == "float32"
    assert tuple(fg.tensor([fg.ones(1), fg.ones(1)]).shape) == (2,)
    assert str(fg.tensor([np.float64(1)], dtype=fg.float32).dtype) == "float32"


def test_list_python_floats_follow_default_dtype():
    fg.set_default_dtype(fg.float64)
    try:
        assert str(fg.tensor([1.0, np.float32(2)]).dtype) == "float64"
    finally:
        fg.set_default_dtype(fg.float32)
    assert str(fg.tensor([1.0, np.float16(2)]).dtype) == "float32"


# ---------------------------------------------------------------- save / load of the flag


def test_save_load_keeps_requires_grad(tmp_path):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    frozen = fg.nn.Parameter(fg.ones(2), requires_grad=False)
    sd = {"x": x, "y": y, "p": fg.nn.Parameter(fg.ones(1)), "frozen": frozen, "z": fg.zeros(1)}
    fg.save(sd, tmp_path / "a.pt")
    d = fg.load(tmp_path / "a.pt")
    # torch.save / torch.load give the same flags
    buf = tmp_path / "t.pt"
    torch.save(
        {
            "x": torch.tensor([1.0, 2.0], requires_grad=True),
            "y": torch.tensor([1.0, 2.0], requires_grad=True) * 2,
            "p": torch.nn.Parameter(torch.ones(1)),
            "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False),
            "z": torch.zeros(1),
        },
        buf,
    )
    ref = torch.load(buf)
    for k in sd:
        assert d[k].requires_grad == ref[k].requires_grad, k
        assert d[k].is_leaf, k
        assert type(d[k]).__name__ == type(ref[k]).__name__, k
    np.testing.assert_array_equal(d["y"].detach().numpy(), [2.0, 4.0])
    (d["x"] * d["x"]).sum().backward()
    np.testing.assert_array_equal(d["x"].grad.numpy(), [2.0, 4.0])


def test_load_file_without_flag(tmp_path):
    # files written before the flag was stored: Parameters require grad, tensors do not
    import json

    fg.save({"t": fg.ones(2), "p": fg.nn.Parameter(fg.ones(2))}, tmp_path / "a.pt")
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(tmp_path / "a.pt"), "np") as f:
        meta = f.metadata()
        arrays = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    text = json.dumps(meta)
    assert "requires_grad" in text
    for key, value in meta.items():
        meta[key] = value.replace(', "requires_grad": true', "").replace(
            ', "requires_grad": false', ""
        )
    assert "requires_grad" not in json.dumps(meta)
    save_file(arrays, str(tmp_path / "old.pt"), metadata=meta)
    d = fg.load(tmp_path / "old.pt")
    assert not d["t"].requires_grad
    assert d["p"].requires_grad and type(d["p"]).__name__ == "Parameter"


# --------------------------------------------------------- shared memory: bool, bfloat16


def test_from_numpy_bool_shares_memory():
    a = np.array([True, False, True])
    for build in (fg.from_numpy, fg.as_tensor, fg.from_dlpack):
        f = build(a)
        assert str(f.dtype) == "bool"
        a[1] = True
        assert f[1].item() is True
        f[0] = False
        assert a[0].item() is False
        a[:] = [True, False, True]


def test_from_dlpack_torch_bool_shares_memory():
    t = torch.tensor([False, True, False])
    f = fg.from_dlpack(t)
    t[0] = True
    assert f[0].item() is True
    f[2] = True
    assert t[2].item() is True


def test_from_numpy_bfloat16_shares_memory():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1, 2, 3], dtype=ml_dtypes.bfloat16)
    f = fg.from_numpy(a)
    assert str(f.dtype) == "bfloat16"
    a[0] = 7
    assert f[0].item() == 7.0
    f[1] = 9
    assert float(a[1]) == 9.0
    assert (f * 2).float().tolist() == [14.0, 18.0, 6.0]


def test_from_dlpack_torch_bfloat16():
    t = torch.tensor([0.5, 1.5, -2.0], dtype=torch.bfloat16)
    f = fg.from_dlpack(t)
    assert str(f.dtype) == "bfloat16"
    assert f.float().tolist() == t.float().tolist()


def test_bfloat16_dlpack_export_helper_shares_with_torch():
    # (the helper Tensor.__dlpack__ uses for bfloat16: DLPack's kDLBfloat)
    from ferrograd import _tensor

    f = fg.tensor([0.0, 1.0, 0.0], dtype=fg.bfloat16)
    t = torch.from_dlpack(_tensor._Capsule(_tensor._dlpack_bfloat16(f, None, (1, 0), None)))
    assert t.dtype == torch.bfloat16
    assert t.data_ptr() == f.data_ptr()
    f[0] = 3
    assert t[0].item() == 3.0
    view = f.reshape(3, 1).t()
    old = torch.from_dlpack(_tensor._Capsule(_tensor._dlpack_bfloat16(view, None, None, None)))
    assert old.tolist() == [[3.0, 1.0, 0.0]]
    assert old.data_ptr() != f.data_ptr()  # an older consumer gets a copy


def test_bfloat16_dlpack_import_helper_shares_with_torch():
    from ferrograd import _tensor

    pytest.importorskip("ml_dtypes")
    t = torch.tensor([1.5, 2.0, 3.0], dtype=torch.bfloat16)
    f = fg.from_numpy(_tensor._shared_bfloat16(t))
    t[0] = 9
    assert f[0].item() == 9.0
    assert _tensor._shared_bfloat16(torch.ones(2)) is None


# append to tests/test_interop_porting.py once ops.diff and tc.diff are applied


def test_as_tensor_of_torch_tensor_shares_memory():
    t = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    a = fg.as_tensor(t)
    t[0, 0] = 9
    assert a[0, 0].item() == 9.0
    a[1, 2] = -1
    assert t[1, 2].item() == -1.0
    assert str(fg.as_tensor(t, dtype=fg.float32).dtype) == "float32"  # a copy
    p = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    ap = fg.as_tensor(p)
    assert not ap.requires_grad
    with torch.no_grad():
        p.mul_(3)
    assert ap.tolist() == [3.0, 3.0]


def test_from_dlpack_capsule():
    t = torch.arange(4.0)
    f = fg.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    t[0] = 7
    assert f.tolist() == [7.0, 1.0, 2.0, 3.0]


def test_dlpack_bfloat16_both_ways():
    t = torch.tensor([0.0, 1.0, 0.0], dtype=torch.bfloat16)
    f = fg.from_dlpack(t)
    assert str(f.dtype) == "bfloat16"
    t[0] = 3
    assert f[0].item() == 3.0
    g = fg.tensor([0.0, 1.0, 0.0], dtype=fg.bfloat16)
    u = torch.from_dlpack(g)
    assert u.dtype == torch.bfloat16 and u.data_ptr() == g.data_ptr()
    g[2] = 5
    assert u[2].item() == 5.0
    assert torch.tensor(g).dtype == torch.bfloat16
