"""PyTorch's other spellings of ferrograd's operations: the function forms of in-place methods,
method aliases, ``torch.range``, ``typename``, the tensor predicates,
``set_default_tensor_type``, the anomaly switches, ``torch.GradScaler`` and
``OutOfMemoryError``: each run on both libraries where torch is installed."""

from __future__ import annotations

import warnings

import ferrograd as fg
import numpy as np
import pytest


def _np(t):
    return np.asarray(t.detach().cpu().numpy())


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize(
    "args, kwargs",
    [((1, 4), {}), ((0, 1, 0.3), {}), ((5, 1, -2), {}), ((1, 4), {"dtype": "int64"})],
)
def test_range_includes_the_end_and_warns_as_torch(torch, args, kwargs):
    tk = {"dtype": getattr(torch, kwargs["dtype"])} if kwargs else {}
    with pytest.warns(UserWarning, match="deprecated"):
        got = fg.range(*args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.range(*args, **tk)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-7)
    with pytest.raises(ValueError):
        fg.range(1, 4, 0)
    with pytest.raises(ValueError):
        fg.range(4, 1, 1)


def test_inplace_function_forms_write_into_their_input(torch):
    for name, args in [
        ("relu_", ()),
        ("sigmoid_", ()),
        ("exp_", ()),
        ("clamp_", (-0.5, 0.5)),
        ("clamp_min_", (0.1,)),
        ("nan_to_num_", ()),
        ("zero_", ()),
        ("fill_", (2.5,)),
        ("arccos_", ()),
    ]:
        data = np.array([-0.75, -0.2, 0.0, 0.3, 0.9])
        x, tx = fg.tensor(data), torch.tensor(data)
        got, want = getattr(fg, name)(x, *args), getattr(torch, name)(tx, *args)
        np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-12, err_msg=name)
        # in place: the input holds the result
        np.testing.assert_allclose(_np(x), tx.numpy(), rtol=1e-12, err_msg=name)
    with pytest.raises(TypeError, match="relu_"):
        fg.relu_([1.0])


@pytest.mark.parametrize(
    "alias, other",
    [
        ("divide_", 2.0),
        ("multiply_", 3.0),
        ("subtract_", 0.5),
        ("greater_", 0.0),
        ("less_equal_", 0.3),
        ("not_equal_", 0.3),
        ("negative_", None),
        ("absolute_", None),
        ("fix_", None),
        ("arctan_", None),
        ("arcsinh_", None),
    ],
)
def test_method_aliases_match_torch(torch, alias, other):
    data = np.array([-1.7, -0.2, 0.3, 2.6])
    x, tx = fg.tensor(data), torch.tensor(data)
    args = () if other is None else (other,)
    out = getattr(x, alias)(*args)
    want = getattr(tx, alias)(*args)
    # in place: the result is the input, which holds torch's values
    assert out is x
    np.testing.assert_allclose(_np(x), want.numpy(), rtol=1e-12)


def test_predicates_and_names(torch):
    previous = fg.get_default_device()
    fg.set_default_device("cpu")
    try:
        for make, tmake in [
            (lambda: fg.zeros(2), lambda: torch.zeros(2)),
            (lambda: fg.zeros(2, dtype=fg.float64), lambda: torch.zeros(2, dtype=torch.float64)),
            (lambda: fg.zeros(2, dtype=fg.int64), lambda: torch.zeros(2, dtype=torch.int64)),
            (lambda: fg.zeros(2, dtype=fg.uint8), lambda: torch.zeros(2, dtype=torch.uint8)),
        ]:
            x, tx = make(), tmake()
            assert fg.typename(x) == torch.typename(tx)
            assert fg.is_signed(x) == torch.is_signed(tx)
            assert fg.get_device(x) == torch.get_device(tx) == -1
        lin = fg.nn.Linear(2, 2)
        assert fg.typename(lin) == f"{type(lin).__module__}.Linear"
        assert fg.typename(3) == torch.typename(3) == "int"
    finally:
        fg.set_default_device(previous)
    for data in ([1.0], [0.0], [[0.5]]):
        assert fg.is_nonzero(fg.tensor(data)) == torch.is_nonzero(torch.tensor(data))
        assert fg.tensor(data).is_nonzero() == torch.tensor(data).is_nonzero()
    for data in ([1.0, 2.0], []):
        with pytest.raises(RuntimeError, match="ambiguous"):
            fg.is_nonzero(fg.tensor(data))
    a, b = fg.zeros(2, 3), fg.ones(2, 3)
    assert fg.is_same_size(a, b) and a.is_same_size(b) and not fg.is_same_size(a, fg.ones(3, 2))
    assert not fg.is_conj(a) and not fg.is_neg(a) and not a.is_conj() and not a.is_neg()
    assert fg.resolve_conj(a) is a and fg.resolve_neg(a) is a


def test_fill_is_out_of_place_and_differentiable_in_a_tensor_value(torch):
    x = fg.zeros(3, dtype=fg.float64)
    got = fg.fill(x, 2.5)
    np.testing.assert_array_equal(_np(got), torch.fill(torch.zeros(3), 2.5).numpy())
    np.testing.assert_array_equal(_np(x), [0.0, 0.0, 0.0])
    v = fg.tensor(1.5, dtype=fg.float64, requires_grad=True)
    tv = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    (fg.fill(x, v) * fg.tensor([1.0, 2.0, 3.0], dtype=fg.float64)).sum().backward()
    (
        torch.fill(torch.zeros(3, dtype=torch.float64), tv) * torch.tensor([1.0, 2.0, 3.0])
    ).sum().backward()
    assert float(v.grad) == float(tv.grad) == 6.0
    with pytest.raises(ValueError, match="fill"):
        fg.fill(x, fg.ones(2))


def test_split_spellings(torch):
    x, tx = fg.arange(10).reshape(5, 2), torch.arange(10).reshape(5, 2)
    for fn, args in [
        ("split_with_sizes", ([2, 3],)),
        ("unsafe_split_with_sizes", ([1, 4],)),
        ("unsafe_split", (2,)),
        ("unsafe_chunk", (3,)),
    ]:
        got, want = getattr(fg, fn)(x, *args), getattr(torch, fn)(tx, *args)
        assert len(got) == len(want), fn
        for g, w in zip(got, want):
            np.testing.assert_array_equal(_np(g), w.numpy())
    got = fg.split_with_sizes(x, [1, 1], dim=-1)
    np.testing.assert_array_equal(_np(got[1]), tx[:, 1:].numpy())
    with pytest.raises(ValueError, match="sum"):
        fg.split_with_sizes(x, [2, 2])


def test_set_default_tensor_type():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            fg.set_default_tensor_type("torch.DoubleTensor")
        assert fg.zeros(1).dtype == fg.float64 and fg.tensor([1.5]).dtype == fg.float64
        with pytest.warns(UserWarning):
            fg.set_default_tensor_type(fg.FloatTensor)
        assert fg.zeros(1).dtype == fg.float32
        with pytest.raises(TypeError, match="floating-point"):
            fg.set_default_tensor_type("torch.LongTensor")
    finally:
        fg.set_default_dtype(fg.float32)


def test_anomaly_switches_turn_detection_on():
    assert not fg.is_anomaly_enabled()
    fg.set_anomaly_enabled(True)
    try:
        assert fg.is_anomaly_enabled() and fg.autograd.is_anomaly_enabled()
        assert fg.is_anomaly_check_nan_enabled()
        x = fg.tensor([0.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="nan|NaN"):
            fg.sqrt(x * 0.0 - 1.0).sum().backward()
    finally:
        fg.set_anomaly_enabled(False)
    assert not fg.is_anomaly_enabled()


def test_gradscaler_and_out_of_memory_names(torch):
    assert fg.GradScaler is fg.amp.GradScaler
    with pytest.raises(fg.OutOfMemoryError) as e:
        fg.empty(10**13)
    # caught as PyTorch's programs catch it, and as a MemoryError
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, MemoryError)
    assert fg.cuda.OutOfMemoryError is fg.OutOfMemoryError
    assert issubclass(torch.OutOfMemoryError, RuntimeError)
    # the process keeps working
    assert float(fg.ones(2).sum()) == 2.0


def test_method_extras(torch):
    data = np.arange(12.0).reshape(3, 4)
    x, tx = fg.tensor(data), torch.tensor(data)
    got = x.narrow_copy(1, 1, 2)
    np.testing.assert_array_equal(_np(got), tx.narrow_copy(1, 1, 2).numpy())
    got[0, 0] = -1.0
    assert float(x[0, 1]) == 1.0  # a copy, not a view
    assert x.to_dense() is x
    assert x.to_dense(fg.float32).dtype == fg.float32
    assert x.record_stream(None) is None
    w = fg.tensor([0.25])
    np.testing.assert_allclose(
        _np((x - 5).prelu(w)), (tx - 5).prelu(torch.tensor([0.25], dtype=torch.float64)).numpy()
    )
