"""View bookkeeping as PyTorch's: ``_base`` (followed to the root) and ``_is_view()`` for
every view op, storages compared through ``data_ptr()``, ``set_`` / ``as_strided_``, the
``*_copy`` functions, ``view(dtype)`` keeping its place in the buffer, and binary operators
that give ``NotImplemented`` to operands they cannot take. Each case runs the same code on
torch and ferrograd."""

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture
def on_the_cpu():
    """For what ferrograd supports on the CPU only (view(dtype)) or compares with PyTorch's
    CPU buffers: tensors are made on the CPU even when the suite runs on another device."""
    prev = fg.get_default_device()
    fg.set_default_device("cpu")
    yield
    fg.set_default_device(prev)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(params=["torch", "ferrograd"])
def lib(request, torch):
    return torch if request.param == "torch" else fg


VIEW_OPS = {
    "view": lambda t: t.view(25),
    "view_infer": lambda t: t.view(-1, 5),
    "reshape": lambda t: t.reshape(5, 5),
    "reshape_as": lambda t: t.reshape_as(t),
    "view_as": lambda t: t.view_as(t),
    "t": lambda t: t.t(),
    "T": lambda t: t.T,
    "mT": lambda t: t.mT,
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.permute(1, 0),
    "movedim": lambda t: t.movedim(0, 1),
    "swapaxes": lambda t: t.swapaxes(0, 1),
    "narrow": lambda t: t.narrow(0, 1, 2),
    "select": lambda t: t.select(0, 1),
    "int_index": lambda t: t[1],
    "slice": lambda t: t[:2],
    "step_slice": lambda t: t[::2, 1:],
    "ellipsis_newaxis": lambda t: t[..., None],
    "expand": lambda t: t[:1].expand(3, 5),
    "expand_as": lambda t: t[:1].expand_as(t),
    "broadcast_to": lambda t: t[0].broadcast_to((2, 5)),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(0, 2, 1),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 2)),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "squeeze": lambda t: t.unsqueeze(0).squeeze(),
    "squeeze_dim": lambda t: t.unsqueeze(0).squeeze(0),
    "flatten": lambda t: t.flatten(),
    "ravel": lambda t: t.ravel(),
    "unflatten": lambda t: t.unflatten(1, (1, 5)),
    "split": lambda t: t.split(2)[1],
    "chunk": lambda t: t.chunk(2)[1],
    "unbind": lambda t: t.unbind(1)[2],
    "iter": lambda t: list(t)[3],
    "view_of_view": lambda t: t.view(25)[3:].view(-1, 2),
    "transpose_of_slice": lambda t: t[1:].t()[2],
}


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_view_ops_record_their_root_base(lib, name):
    t = lib.ones(5, 5)
    v = VIEW_OPS[name](t)
    assert v._is_view()
    assert v._base is t
    assert not t._is_view() and t._base is None
    assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()


NOT_VIEWS = {
    "detach": lambda L, t: t.detach(),
    "clone": lambda L, t: t.clone(),
    "contiguous_copy": lambda L, t: t.t().contiguous(),
    "reshape_copy": lambda L, t: t.t().reshape(25),
    "flatten_copy": lambda L, t: t.t().flatten(),
    "add": lambda L, t: t + 1,
    "advanced_index": lambda L, t: t[[0, 1]],
    "view_dtype": lambda L, t: t.view(L.int32),
    "view_same_dtype": lambda L, t: t.view(L.float32),
}


@pytest.mark.usefixtures("on_the_cpu")
@pytest.mark.parametrize("name", list(NOT_VIEWS))
def test_copies_and_detach_are_not_views(lib, name):
    t = lib.ones(5, 5)
    r = NOT_VIEWS[name](lib, t)
    assert not r._is_view()
    assert r._base is None


def test_views_that_change_nothing_are_new_views_with_the_same_strides(lib):
    t = lib.ones(3, 5, 8)[1:, 1:, ::2]
    for v in (t.view(t.shape), t.reshape(t.shape), t.expand(t.shape), t.view_as(t)):
        assert v is not t and v._is_view() and v._base is t._base
        assert v.stride() == t.stride() and v.storage_offset() == t.storage_offset()
    x = lib.arange(4.0, dtype=lib.float64, requires_grad=True)
    y = x * 1.0
    z = y.reshape(4)
    assert z._base is y
    (z * lib.arange(4.0, dtype=lib.float64)).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_base_of_a_computed_tensor_and_keepalive(lib):
    x = lib.ones(2, requires_grad=True)
    y = x * 2
    v = y.view(2)
    assert v._base is y and x.view(2)._base is x
    d = x.detach()
    assert d.view(2)._base is d
    # the view keeps its base alive
    w = lib.arange(6.0).view(2, 3)[1]
    assert w._base.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_inplace_view_ops_keep_bookkeeping(lib):
    t = lib.ones(3, 4)
    v = t[1:]
    v.unsqueeze_(0)
    assert v._base is t and tuple(v.shape) == (1, 2, 4)
    u = lib.ones(3, 4)
    u.t_()
    assert not u._is_view() and u._base is None


def test_views_of_tracked_tensors_differentiate_after_base_bookkeeping():
    x = fg.tensor([1.0, 2.0, 3.0, 4.0], dtype=fg.float64, requires_grad=True)
    y = x * 1.0
    v = y.view(2, 2).t()
    assert v._base is y
    v[0].mul_(3.0)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 3.0, 1.0]


def test_storage_objects(lib):
    t = lib.arange(6.0, dtype=lib.float32)
    s = t.untyped_storage()
    assert s.data_ptr() == t.data_ptr()
    assert (s.nbytes(), s.size(), len(s), s.element_size()) == (24, 24, 24, 1)
    assert t[2:].untyped_storage().data_ptr() == s.data_ptr()
    assert t[2:].untyped_storage().nbytes() == 24
    assert t.clone().untyped_storage().data_ptr() != s.data_ptr()
    ts = t[3:].storage()
    assert (ts.size(), len(ts), ts.element_size(), ts.nbytes()) == (6, 6, 4, 24)
    assert ts.data_ptr() == s.data_ptr()
    assert ts.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert ts[4] == 4.0


@pytest.mark.usefixtures("on_the_cpu")
def test_empty_tensors_have_null_data_ptr(lib):
    assert lib.zeros(0).data_ptr() == 0
    assert lib.zeros(0, 3).data_ptr() == 0
    assert lib.zeros(3)[3:].data_ptr() == 0
    assert lib.zeros(0).untyped_storage().data_ptr() == 0
    z = lib.zeros(0, 5, 16, dtype=lib.float32)
    assert z.data_ptr() == z.view(lib.float64).data_ptr()


def test_set_and_as_strided_(lib):
    t = lib.arange(6.0)
    u = lib.empty(0)
    assert u.set_(t) is u
    assert tuple(u.shape) == (6,) and u.data_ptr() == t.data_ptr()
    assert not u._is_view() and u.is_set_to(t) and not u.is_set_to(t[1:])
    u.fill_(7.0)
    assert t.tolist() == [7.0] * 6
    t = lib.arange(6.0)
    u = lib.empty(0).set_(t.untyped_storage(), 2, (2, 2), (1, 2))
    assert u.tolist() == [[2.0, 4.0], [3.0, 5.0]] and u.storage_offset() == 2
    assert lib.empty(0).set_(t.storage(), 1, (3,)).tolist() == [1.0, 2.0, 3.0]
    assert lib.empty(0).set_(t, 1, (3,), (1,)).tolist() == [1.0, 2.0, 3.0]
    assert tuple(lib.empty(0).set_(t).set_().shape) == (0,)
    with pytest.raises(RuntimeError):
        lib.empty(0, dtype=lib.int64).set_(t)
    with pytest.raises(RuntimeError):
        lib.ones(3, requires_grad=True).set_(t[:3])
    v = lib.zeros(6)
    assert v.as_strided_((2, 2), (1, 2), 1) is v
    assert tuple(v.shape) == (2, 2) and v.stride() == (1, 2) and v.storage_offset() == 1
    assert not v._is_view()
    with pytest.raises(RuntimeError):
        lib.zeros(6).as_strided_((10,), (1,))


COPIES = {
    "view_copy": lambda L, t: L.view_copy(t, (25,)),
    "as_strided_copy": lambda L, t: L.as_strided_copy(t, (2, 2), (1, 2), 1),
    "detach_copy": lambda L, t: L.detach_copy(t),
    "alias_copy": lambda L, t: L.alias_copy(t),
    "diagonal_copy": lambda L, t: L.diagonal_copy(t, 1),
    "expand_copy": lambda L, t: L.expand_copy(t[:1], (3, 5)),
    "narrow_copy": lambda L, t: L.narrow_copy(t, 1, 1, 3),
    "permute_copy": lambda L, t: L.permute_copy(t, (1, 0)),
    "select_copy": lambda L, t: L.select_copy(t, 1, 2),
    "slice_copy": lambda L, t: L.slice_copy(t, 1, 1, 4, 2),
    "split_copy": lambda L, t: L.split_copy(t, 2),
    "split_with_sizes_copy": lambda L, t: L.split_with_sizes_copy(t, [1, 4], 1),
    "squeeze_copy": lambda L, t: L.squeeze_copy(t[None]),
    "t_copy": lambda L, t: L.t_copy(t),
    "transpose_copy": lambda L, t: L.transpose_copy(t, 0, 1),
    "unbind_copy": lambda L, t: L.unbind_copy(t, 1),
    "unfold_copy": lambda L, t: L.unfold_copy(t, 0, 2, 2),
    "unsqueeze_copy": lambda L, t: L.unsqueeze_copy(t, 1),
}


@pytest.mark.parametrize("name", list(COPIES))
def test_copy_functions_match_torch_and_share_nothing(torch, name):
    data = np.arange(25.0).reshape(5, 5)
    want = COPIES[name](torch, torch.tensor(data))
    t = fg.tensor(data)
    got = COPIES[name](fg, t)
    if isinstance(want, torch.Tensor):
        want, got = [want], [got]
    assert len(got) == len(want)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert not g._is_view()
        if g.numel():
            assert g.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_copy_functions_differentiate_and_take_out(lib):
    a = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64, requires_grad=True)
    (
        lib.view_copy(a, (2, 2)) * lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)
    ).sum().backward()
    assert a.grad.tolist() == [1.0, 2.0, 3.0, 4.0]
    m = lib.arange(4.0).view(2, 2)
    out = lib.empty(2)
    assert lib.diagonal_copy(m, out=out) is out
    assert out.tolist() == [0.0, 3.0]
    o1, o2 = lib.empty(2), lib.empty(2)
    lib.split_copy(lib.arange(4.0), 2, out=(o1, o2))
    assert o1.tolist() == [0.0, 1.0] and o2.tolist() == [2.0, 3.0]


@pytest.mark.usefixtures("on_the_cpu")
def test_view_dtype_misaligned_offset_raises(lib):
    b = lib.arange(8, dtype=lib.float32)
    with pytest.raises(RuntimeError, match="storage_offset"):
        b[1:5].view(lib.float64)


@pytest.mark.usefixtures("on_the_cpu")
def test_view_dtype_keeps_the_storage_offset(lib):
    b = lib.arange(8, dtype=lib.int32)
    w = b[2:].view(lib.float32)
    assert w.storage_offset() == 2
    assert w.as_strided((2,), (1,), 0).view(lib.int32).tolist() == [0, 1]
    h = b[2:6].view(lib.int16)
    assert h.storage_offset() == 4 and tuple(h.shape) == (8,)
    q = lib.arange(8, dtype=lib.int32)[2:6].view(lib.int64)
    assert q.storage_offset() == 1 and q.tolist() == [(3 << 32) + 2, (5 << 32) + 4]
    q[0] = 0
    # writes reach the viewed memory, not a copy
    c = lib.arange(8, dtype=lib.float32)
    c[2:].view(lib.float64)[0] = 0.0
    assert c.tolist()[:4] == [0.0, 1.0, 0.0, 0.0]


class Reflected:
    def __radd__(self, o):
        return "radd"

    def __rsub__(self, o):
        return "rsub"

    def __rmul__(self, o):
        return "rmul"

    def __rtruediv__(self, o):
        return "rtruediv"

    def __rpow__(self, o):
        return "rpow"

    def __rmatmul__(self, o):
        return "rmatmul"

    def __gt__(self, o):
        return "gt"

    def __eq__(self, o):
        return "eq"

    __hash__ = object.__hash__


def test_binary_operators_defer_to_foreign_operands(lib):
    t = lib.ones(2)
    c = Reflected()
    assert t + c == "radd"
    assert t - c == "rsub"
    assert t * c == "rmul"
    assert t / c == "rtruediv"
    assert t**c == "rpow"
    assert t @ c == "rmatmul"
    assert (t < c) == "gt"
    assert (t == c) == "eq"
    assert t.__eq__(None) is NotImplemented
    with pytest.raises(TypeError, match="unsupported operand"):
        t + object()
    with pytest.raises(TypeError):
        _ = t < object()


def test_bool_subtraction_raises(lib):
    b = lib.tensor([True, False])
    for f in (lambda: b - 1, lambda: 1 - b, lambda: lib.ones(2) - True, lambda: lib.ones(2) - b):
        with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
            f()
    with pytest.raises(RuntimeError):
        b - b


def test_data_ptr_tells_shared_memory_on_every_device():
    """``data_ptr()`` on any device: equal where two tensors start at the same memory, apart
    by the byte offset for a view into it, different for separate buffers."""
    a = fg.arange(12.0, dtype=fg.float32).reshape(3, 4)
    b = fg.arange(12.0, dtype=fg.float32).reshape(3, 4)
    assert a.data_ptr() != b.data_ptr()
    assert a.view(12).data_ptr() == a.data_ptr()
    assert a[1].data_ptr() == a.data_ptr() + 4 * a.element_size()
    assert a[1].untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert a.clone().untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
