"""numpy's advanced indexing, get and set, with gradients: several index arrays, arrays of any
rank, boolean masks, integers, slices, None and ... mixed in any position."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from conftest import check_grad

A = np.arange(120.0).reshape(4, 5, 6)
I0 = np.array([3, 0, 1])
I1 = np.array([[1, -1], [0, 0]])
M3 = A % 7 < 3
M2 = A[:, :, 0] > 40
M1 = np.array([True, False, True, True, False])

# each key as numpy takes it; `T` marks the arrays also given as ferrograd tensors
KEYS = {
    "two arrays": (I0, I0),
    "array, slice, array": (I0, slice(None), np.array([5, 0, 2])),
    "int, slice, array": (0, slice(None), I0),
    "slice, int, array": (slice(1, 3), 2, I0),
    "2-D array": (I1,),
    "2-D and 1-D broadcast": (I1[:, :1], np.array([2, 4])),
    "ellipsis then arrays": (Ellipsis, I0, np.array([5, 0, 2])),
    "None between arrays": (I0, None, np.array([4, 1, 1])),
    "3-D mask": (M3,),
    "2-D mask then slice": (M2, slice(None, None, -2)),
    "slice then 1-D mask": (slice(None), M1),
    "mask and array": (slice(None), M1, np.array([0, 5, 5])),
    "repeated indices": (np.array([1, 1, 1, 2]), np.array([0, 0, 0, 4])),
    "negative step and arrays": (slice(None, None, -1), I0[:2], I0[:2]),
    "empty array": (np.array([], dtype=np.int64),),
    "empty mask result": (A > 1000,),
}


def _fg_key(key, as_tensor):
    return tuple(fg.tensor(k) if as_tensor and isinstance(k, np.ndarray) else k for k in key)


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("as_tensor", [True, False], ids=["tensors", "numpy"])
def test_getitem_matches_numpy(name, as_tensor):
    key = KEYS[name]
    want = A[key]
    got = fg.tensor(A)[_fg_key(key, as_tensor)]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_gradients_add_into_repeated_indices(name):
    key = KEYS[name]
    if A[key].size == 0:
        pytest.skip("nothing selected")
    check_grad(
        lambda x: x[_fg_key(key, True)] * 1.5, [np.random.default_rng(0).standard_normal(A.shape)]
    )


def test_getitem_gradient_matches_pytorch_with_repeats_and_masks():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((4, 5, 6))
    x = fg.tensor(a)
    t = torch.tensor(a, requires_grad=True)
    k1, k2 = np.array([1, 1, 3]), np.array([[0], [0]])
    gm = fg.GradManager().attach([x])
    with gm:
        y = x[k1, :, k2].sum() + (x[fg.tensor(M3)] ** 2).sum()
        gm.backward(y)
    (t[torch.tensor(k1), :, torch.tensor(k2)].sum() + (t[torch.tensor(M3)] ** 2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("as_tensor", [True, False], ids=["tensors", "numpy"])
def test_setitem_matches_numpy_with_scalars_and_broadcast_values(name, as_tensor):
    key = KEYS[name]
    shape = A[key].shape
    for value in (-1.0, np.arange(float(shape[-1])) if shape and shape[-1] else 2.0):
        want = A.copy()
        want[key] = value
        x = fg.tensor(A)
        x[_fg_key(key, as_tensor)] = fg.tensor(value) if isinstance(value, np.ndarray) else value
        np.testing.assert_array_equal(x.numpy(), want)


def test_setitem_repeated_indices_keep_the_last_value_as_numpy():
    a = np.zeros(5)
    x = fg.tensor(a)
    idx = np.array([1, 3, 1, 1])
    a[idx] = [10.0, 20.0, 30.0, 40.0]
    x[fg.tensor(idx)] = fg.tensor([10.0, 20.0, 30.0, 40.0], dtype="float64")
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_gradients_flow_to_the_value_and_the_untouched_elements():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal(2)
    w = rng.standard_normal((3, 4))
    x, val = fg.tensor(a), fg.tensor(v)
    gm = fg.GradManager().attach([x, val])
    with gm:
        y = x * 2.0
        y[fg.tensor([0, 2]), fg.tensor([1, 3])] = val * 3.0
        y[fg.tensor(a > 1.0)] = 0.0
        gm.backward((y * fg.tensor(w)).sum())
    t, tv = torch.tensor(a, requires_grad=True), torch.tensor(v, requires_grad=True)
    ty = t * 2.0
    ty[torch.tensor([0, 2]), torch.tensor([1, 3])] = tv * 3.0
    ty[torch.tensor(a > 1.0)] = 0.0
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(val.grad.numpy(), tv.grad.numpy(), rtol=1e-12)


def test_bad_advanced_indices_name_getitem_or_setitem_and_change_nothing():
    x = fg.tensor(A)
    with pytest.raises(IndexError, match="getitem.*out of bounds"):
        x[I0, np.array([0, 9, 1])]
    with pytest.raises(IndexError, match="getitem"):
        x[fg.tensor(M1)]  # a mask for the wrong axis length
    with pytest.raises(IndexError, match="setitem"):
        x[I0, np.array([0, 9, 1])] = 1.0
    with pytest.raises(fg.ShapeError, match="setitem.*shape"):
        x[I0, I0] = fg.tensor(np.ones(4))
    np.testing.assert_array_equal(x.numpy(), A)


def test_index_tensors_inside_a_trace_are_graph_values_not_fixed():
    @fg.trace
    def f(x, i, j):
        return x[i, j]

    for i, j in (([0, 1], [2, 3]), ([2, 0], [-1, 1])):
        got = f(fg.tensor(A[0]), fg.tensor(i), fg.tensor(j))
        np.testing.assert_array_equal(got.numpy(), A[0][i, j])
    assert f.cache_size == 1


@pytest.mark.parametrize("key", ["[(((0,),),)]", "[(0, 1, 1), :]", "[[0, 1, 1], 2]"])
def test_a_tuple_inside_the_key_is_an_index_sequence(key):
    x = np.arange(2 * 5 * 6 * 7.0).reshape(2, 5, 6, 7)
    fx = fg.tensor(x, requires_grad=True)
    got = eval("fx" + key, {"fx": fx})
    want = eval(
        "x"
        + key.replace("(((0,),),)", "(np.array([[0]]),)").replace(
            "(0, 1, 1), :", "np.array([0, 1, 1]), :"
        ),
        {"x": x, "np": np},
    )
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    got.sum().backward()  # a repeated row gets its gradient twice
    assert fx.grad.numpy().sum() == got.numel()


def test_assignment_through_a_tuple_of_rows_and_into_bools():
    a = fg.zeros(5, 3)
    a[(0, 4, 2), :] = fg.ones(3, 3)
    np.testing.assert_array_equal(a.numpy().sum(1), [3, 0, 3, 0, 3])
    m = fg.tensor([True, True, False])
    m[fg.tensor([True, False, False])] = False
    np.testing.assert_array_equal(m.numpy(), [False, True, False])
