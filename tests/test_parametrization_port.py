"""PyTorch's test/nn/test_parametrization.py and the weight_norm / spectral_norm tests of
test/test_nn.py, run on both libraries: each body takes the library module (torch or
ferrograd) and must pass on both; the cross-library tests copy float64 weights across and
compare values, gradients and the parameters after optimizer steps."""

from __future__ import annotations

import copy
import pickle

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

LIBS = pytest.mark.parametrize("L", [torch, fg], ids=["torch", "ferrograd"])


def _np(t):
    return t.detach().numpy()


def _eq(a, b, atol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=1.3e-6, atol=atol)


def _ne(a, b):
    assert not np.allclose(_np(a), _np(b))


def _pz(L):
    return L.nn.utils.parametrize


def _pzs(L):
    return L.nn.utils.parametrizations


# ------------------------------------------------------------------ parametrizations


def _skew(L):
    class Skew(L.nn.Module):
        def forward(self, X):
            X = X.tril(-1)
            return X - X.T

    return Skew


def _cayley(L):
    class Orthogonal(L.nn.Module):
        def forward(self, X):
            Id = L.eye(X.size(0), dtype=X.dtype)
            return L.linalg.solve(Id + X, Id - X)

    return Orthogonal


def _first_last_zero(L):
    class FirstZero(L.nn.Module):
        def forward(self, x):
            return L.cat([x.new_zeros(1), x[1:]])

    class LastZero(L.nn.Module):
        def forward(self, x):
            return L.cat([x[:-1], x.new_zeros(1)])

    return FirstZero, LastZero


def _double(L, inverse=True):
    class Double(L.nn.Module):
        def forward(self, x):
            return 2.0 * x

    if inverse:
        Double.right_inverse = lambda self, w: 0.5 * w
    return Double


def _rank_one(L):
    class RankOne(L.nn.Module):
        def forward(self, x, y):
            return x.unsqueeze(-1) @ y.unsqueeze(-2)

        def right_inverse(self, Y):
            U, S, Vh = L.linalg.svd(Y, full_matrices=False)
            s0 = S[0].sqrt().unsqueeze(-1)
            return U[..., :, 0] * s0, Vh[..., 0, :] * s0

    return RankOne


def _identity(L):
    class Identity(L.nn.Module):
        def forward(self, x):
            return x

    return Identity


# ------------------------------------------------------------------ parametrize


@LIBS
def test_register_and_remove_parametrization(L):
    P = _pz(L)
    Skew, Orthogonal = _skew(L), _cayley(L)
    FirstZero, LastZero = _first_last_zero(L)

    class Resize(L.nn.Module):
        def forward(self, X):
            return X[[0]]

    class NoResize(L.nn.Module):
        def forward(self, X):
            return X

    L.manual_seed(0)
    model = L.nn.Linear(8, 8)
    wid, bid = id(model.weight), id(model.bias)
    initial = copy.deepcopy(model)

    with pytest.raises(ValueError, match="(?i)shape"):
        P.register_parametrization(model, "weight", Resize())
    assert not P.is_parametrized(model)

    def check_removed():
        P.remove_parametrizations(model, "weight", leave_parametrized=False)
        assert not hasattr(model, "parametrizations")
        _eq(model.weight, initial.weight)
        assert id(model.weight) == wid
        assert model.__class__ is L.nn.Linear

    def check_structure():
        assert hasattr(model, "parametrizations")
        assert P.is_parametrized(model) and P.is_parametrized(model, "weight")
        assert not P.is_parametrized(model, "bias")
        assert "weight" not in model._parameters

    P.register_parametrization(model, "weight", Resize(), unsafe=True)
    check_structure()
    assert model.weight.shape[0] == 1
    check_removed()

    P.register_parametrization(model, "weight", Resize(), unsafe=True)
    P.register_parametrization(model, "weight", NoResize(), unsafe=False)
    check_structure()
    assert model.weight.shape[0] == 1
    check_removed()

    for unsafe in (True, False):
        P.register_parametrization(model, "weight", Skew(), unsafe=unsafe)
        check_structure()
        A = model.weight
        _eq(A, -A.T)
        check_removed()

    P.register_parametrization(model, "weight", Skew())
    P.register_parametrization(model, "weight", Orthogonal())
    X = model.weight
    _eq(X.T @ X, L.eye(X.size(0)))
    check_structure()
    assert "weight" in model.parametrizations
    check_removed()

    P.register_parametrization(model, "weight", Skew())
    P.register_parametrization(model, "weight", Orthogonal())
    P.register_parametrization(model, "bias", FirstZero())
    P.register_parametrization(model, "bias", LastZero())
    assert P.is_parametrized(model, "weight") and P.is_parametrized(model, "bias")
    assert model.bias[0].item() == 0.0 and model.bias[-1].item() == 0.0
    assert len(list(model.parameters())) == 2

    sgd = L.optim.SGD(model.parameters(), lr=0.01)

    def step():
        w, b = model.weight.clone(), model.bias.clone()
        sgd.zero_grad()
        (model.weight.T @ model.bias).sum().backward()
        sgd.step()
        _ne(model.weight, w)
        _ne(model.bias, b)

    step()
    P.remove_parametrizations(model, "weight", leave_parametrized=False)
    assert P.is_parametrized(model) and not P.is_parametrized(model, "weight")
    assert P.is_parametrized(model, "bias")
    assert model.bias[0].item() == 0.0 and model.bias[-1].item() == 0.0
    _ne(model.weight, initial.weight)
    assert id(model.weight) == wid
    assert len(list(model.parameters())) == 2
    step()

    P.remove_parametrizations(model, "bias", leave_parametrized=False)
    assert not P.is_parametrized(model)
    _ne(model.bias, initial.bias)
    assert model.bias[0].item() != 0.0 and model.bias[-1].item() != 0.0
    assert id(model.bias) == bid
    assert not hasattr(model, "parametrizations")
    assert model.__class__ is L.nn.Linear
    assert len(list(model.parameters())) == 2
    step()

    for _ in range(2):
        P.register_parametrization(model, "weight", Skew())
        P.register_parametrization(model, "weight", Orthogonal())
        P.remove_parametrizations(model, "weight", leave_parametrized=True)
        assert id(model.weight) == wid and id(model.bias) == bid
        step()


@LIBS
def test_register_and_remove_nested_parametrization(L):
    P = _pz(L)
    Skew = _skew(L)
    model = L.nn.Linear(8, 8)
    P.register_parametrization(model, "weight", Skew())
    A = model.weight
    _eq(A, -A.T)
    param_mod = model.parametrizations.weight
    assert not hasattr(param_mod, "parametrizations")
    assert not P.is_parametrized(param_mod)
    assert not P.is_parametrized(param_mod, "original")
    P.register_parametrization(param_mod, "original", Skew())
    assert hasattr(param_mod, "parametrizations")
    assert P.is_parametrized(param_mod) and P.is_parametrized(param_mod, "original")
    assert "original" not in param_mod._parameters
    A = param_mod.original
    _eq(A, -A.T)
    P.remove_parametrizations(param_mod, "original", leave_parametrized=False)
    assert not hasattr(param_mod, "parametrizations")
    assert param_mod.__class__ is P.ParametrizationList
    P.remove_parametrizations(model, "weight", leave_parametrized=False)
    assert not hasattr(model, "parametrizations")
    assert model.__class__ is L.nn.Linear


@LIBS
def test_register_and_remove_buffer_parametrization(L):
    P = _pz(L)
    FirstZero, LastZero = _first_last_zero(L)
    model = L.nn.Linear(8, 8)
    delattr(model, "bias")
    model.bias = L.nn.Buffer(L.ones(8))
    P.register_parametrization(model, "bias", FirstZero())
    P.register_parametrization(model, "bias", LastZero())
    assert P.is_parametrized(model) and P.is_parametrized(model, "bias")
    assert model.bias[0].item() == 0.0 and model.bias[-1].item() == 0.0
    assert bool((model.bias[1:-1] == L.ones(6)).all())
    assert len(list(model.parameters())) == 1
    P.remove_parametrizations(model, "bias", leave_parametrized=True)
    assert not P.is_parametrized(model) and not P.is_parametrized(model, "bias")
    assert model.bias[0].item() == 0.0 and model.bias[-1].item() == 0.0
    assert bool((model.bias[1:-1] == L.ones(6)).all())
    assert len(list(model.parameters())) == 1
    assert "bias" in model._buffers


@LIBS
def test_serialization_parametrization(L):
    P = _pz(L)

    class Orthogonal(L.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.id = L.nn.Buffer(L.eye(n))
            self.B = L.nn.Buffer(L.empty(n, n))
            L.nn.init.orthogonal_(self.B)

        def forward(self, X):
            A = X.triu(1)
            A = A - A.T
            return self.B @ L.linalg.solve(self.id + A, self.id - A)

    def get_model():
        model = L.nn.Sequential(L.nn.Linear(5, 5), L.nn.ReLU(), L.nn.Linear(5, 1))
        P.register_parametrization(model[0], "weight", Orthogonal(5))
        return model

    model = get_model()
    prev_weight = model[0].weight
    prev_B = model[0].parametrizations.weight[0].B
    new_model = get_model()
    new_model.load_state_dict(copy.deepcopy(model.state_dict()))
    assert P.is_parametrized(new_model[0], "weight")
    _eq(prev_weight, new_model[0].weight)
    _eq(prev_B, new_model[0].parametrizations.weight[0].B)
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(model)


@LIBS
def test_initialization_parametrization(L):
    P = _pz(L)

    class Skew(L.nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.T

        def right_inverse(self, X):
            if not L.allclose(X, -X.T, atol=1e-6):
                raise ValueError("The matrix is not skew-symmetric.")
            return X.triu(1)

    class Orthogonal(L.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.B = L.nn.Buffer(L.eye(n))

        def forward(self, X):
            Id = L.eye(X.size(0))
            return self.B @ L.linalg.solve(Id + X, Id - X)

        def right_inverse(self, X):
            if not L.allclose(X.T @ X, L.eye(X.size(0)), atol=1e-4):
                raise ValueError("The input is not orthogonal.")
            self.B = X
            return L.zeros_like(X)

    N = 5
    model = L.nn.Linear(N, N)
    skew = Skew()
    with L.no_grad():
        model.weight.set_(skew(model.weight))
    P.register_parametrization(model, "weight", skew)
    X = L.rand(N, N)
    with pytest.raises(ValueError, match="skew"):
        model.weight = X
    X = X - X.T
    model.weight = X
    _eq(model.parametrizations.weight.original, X.triu(1))
    _eq(model.weight, X)

    P.register_parametrization(model, "weight", Orthogonal(N))
    X = L.rand(N, N)
    with pytest.raises(ValueError, match="orthogonal"):
        model.weight = X
    L.nn.init.orthogonal_(X)
    model.weight = X
    _eq(model.weight, X)
    _eq(model.parametrizations.weight.original, L.zeros_like(X))


@LIBS
def test_errors_unparametrized_tensor_parametrization(L):
    P = _pz(L)
    Identity = _identity(L)
    module = L.nn.Linear(3, 4)
    weight_init = module.weight.clone()

    with pytest.raises(ValueError, match="foo"):
        P.register_parametrization(module, "foo", Identity())
    assert not P.is_parametrized(module)
    with pytest.raises(ValueError, match="bias"):
        P.remove_parametrizations(module, "bias")
    assert not P.is_parametrized(module)

    class Sum(L.nn.Module):
        def forward(self, x, y):
            return x + y

        def right_inverse(self, z):
            return z, L.zeros_like(z)

    P.register_parametrization(module, "weight", Sum())
    with pytest.raises(ValueError, match="leave_parametrized=False"):
        P.remove_parametrizations(module, "weight", leave_parametrized=False)
    P.remove_parametrizations(module, "weight", leave_parametrized=True)

    class WrongNumberParams(L.nn.Module):
        def forward(self, x, y, z):
            return x + y + z

        def right_inverse(self, w):
            return w, L.zeros_like(w)

    with pytest.raises(TypeError, match="positional argument"):
        P.register_parametrization(module, "weight", WrongNumberParams())
    assert not P.is_parametrized(module)

    class WrongRightInverse(Identity):
        def right_inverse(self, z):
            return None

    with pytest.raises(ValueError, match="(?i)tensor or a sequence of"):
        P.register_parametrization(module, "weight", WrongRightInverse())
    assert not P.is_parametrized(module)

    class WrongRightInverseSequence(L.nn.Module):
        def forward(self, x, y):
            return x

        def right_inverse(self, z):
            return None, z

    with pytest.raises(ValueError, match="NoneType"):
        P.register_parametrization(module, "weight", WrongRightInverseSequence())
    assert not P.is_parametrized(module)

    class ChangeDtypeInverse(L.nn.Module):
        def forward(self, x):
            return x.float()

        def right_inverse(self, w):
            return w.bool()

    with pytest.raises(ValueError, match="dtype"):
        P.register_parametrization(module, "weight", ChangeDtypeInverse())
    assert not P.is_parametrized(module)

    class NotTensor(L.nn.Module):
        def forward(self, x):
            return 2

    with pytest.raises(ValueError, match="(?i)must return a tensor"):
        P.register_parametrization(module, "weight", NotTensor())
    assert not P.is_parametrized(module)

    class ChangeDtype(L.nn.Module):
        def forward(self, x):
            return x.bool()

    with pytest.raises(ValueError, match="dtype"):
        P.register_parametrization(module, "weight", ChangeDtype())
    assert not P.is_parametrized(module)

    class ChangeShape(L.nn.Module):
        def forward(self, x):
            return x[:-1]

    with pytest.raises(ValueError, match="shape"):
        P.register_parametrization(module, "weight", ChangeShape())
    assert not P.is_parametrized(module)

    class ChangeDtypeMulti(L.nn.Module):
        def forward(self, x, y):
            return (x + y).bool()

        def right_inverse(self, w):
            return w, w + 1

    with pytest.raises(ValueError, match="dtype"):
        P.register_parametrization(module, "weight", ChangeDtypeMulti())
    assert not P.is_parametrized(module)

    class SequenceLen1(L.nn.Module):
        def forward(self, x):
            return x

        def right_inverse(self, w):
            return (w,)

    P.register_parametrization(module, "weight", SequenceLen1())
    assert hasattr(module.parametrizations.weight, "original0")
    assert not hasattr(module.parametrizations.weight, "original1")
    _ = module.weight
    assert P.is_parametrized(module)
    P.remove_parametrizations(module, "weight", leave_parametrized=True)
    assert not P.is_parametrized(module)
    _eq(module.weight, weight_init)


@LIBS
def test_errors_parametrized_tensor_parametrization(L):
    P = _pz(L)
    Identity = _identity(L)
    module = L.nn.Linear(3, 4)
    P.register_parametrization(module, "weight", Identity())

    def unchanged():
        assert P.is_parametrized(module)
        assert len(module.parametrizations.weight) == 1
        assert isinstance(module.parametrizations.weight[0], Identity)

    class WrongReturn(L.nn.Module):
        def forward(self, x):
            return x, x

    class ChangeDtype(L.nn.Module):
        def forward(self, x):
            return x.bool()

    class ChangeShape(L.nn.Module):
        def forward(self, x):
            return x[:-1]

    class WrongReturnInverse(Identity):
        def right_inverse(self, x):
            return x, x

    class ChangeDtypeInverse(Identity):
        def right_inverse(self, x):
            return x.bool()

    class ChangeShapeInverse(Identity):
        def right_inverse(self, x):
            return x[:-1]

    for cls, msg in (
        (WrongReturn, "(?i)must return a tensor"),
        (ChangeDtype, "dtype"),
        (ChangeShape, "shape"),
        (WrongReturnInverse, "(?i)right_inverse must return a tensor"),
        (ChangeDtypeInverse, "dtype"),
        (ChangeShapeInverse, "shape"),
    ):
        with pytest.raises(ValueError, match=msg):
            P.register_parametrization(module, "weight", cls())
        unchanged()


@LIBS
def test_multiple_inputs_parametrization(L):
    P = _pz(L)
    RankOne, Double = _rank_one(L), _double(L)
    model = L.nn.Linear(3, 3)
    P.register_parametrization(model, "weight", RankOne())
    assert hasattr(model.parametrizations.weight, "original0")
    assert "original0" in model.parametrizations.weight._parameters
    assert "original1" in model.parametrizations.weight._parameters
    assert not P.is_parametrized(model, "bias")
    assert "weight" not in model._parameters
    assert L.linalg.matrix_rank(model.weight).item() == 1
    with pytest.raises(ValueError, match="leave_parametrized=False"):
        P.remove_parametrizations(model, "weight", leave_parametrized=False)
    P.remove_parametrizations(model, "weight", leave_parametrized=True)
    assert not hasattr(model, "parametrizations")
    assert model.__class__ is L.nn.Linear
    assert L.linalg.matrix_rank(model.weight).item() == 1
    assert "weight" in model._parameters

    init_weight = model.weight.clone()
    P.register_parametrization(model, "weight", RankOne())
    _eq(init_weight, model.weight)
    P.register_parametrization(model, "weight", Double())
    _eq(2.0 * init_weight, model.weight)
    assert L.linalg.matrix_rank(model.weight).item() == 1
    assert len(list(model.parameters())) == 3

    sgd = L.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        sgd.zero_grad()
        (model.weight.T @ model.bias).sum().backward()
        sgd.step()
    with pytest.raises(ValueError, match="leave_parametrized=False"):
        P.remove_parametrizations(model, "weight", leave_parametrized=False)
    P.remove_parametrizations(model, "weight", leave_parametrized=True)
    assert not hasattr(model, "parametrizations")
    assert L.linalg.matrix_rank(model.weight).item() == 1
    assert "weight" in model._parameters
    assert len(list(model.parameters())) == 2
    sgd = L.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        sgd.zero_grad()
        (model.weight.T @ model.bias).sum().backward()
        sgd.step()


@LIBS
def test_caching_parametrization(L):
    P = _pz(L)
    model = L.nn.Linear(5, 5)
    P.register_parametrization(model, "weight", _skew(L)())
    P.register_parametrization(model, "weight", _cayley(L)())
    with P.cached():
        X = model.weight
        Y = model.weight
        assert X is Y


@LIBS
def test_caching_parametrization_with_transfer_parametrizations_and_params(L):
    P = _pz(L)
    model = L.nn.Linear(5, 5)
    P.register_parametrization(model, "weight", _skew(L)())
    P.register_parametrization(model, "weight", _cayley(L)())
    to_model = L.nn.Linear(5, 5)
    P.transfer_parametrizations_and_params(model, to_model)
    with P.cached():
        X = model.weight
        Y = model.weight
        assert X is Y
        A = to_model.weight
        B = to_model.weight
        assert A is B
        assert A is not X


@LIBS
def test_parametrization_same_training_mode(L):
    P = _pz(L)
    Identity = _identity(L)
    module = L.nn.Linear(4, 4)
    module.eval()
    P.register_parametrization(module, "weight", Identity())
    assert not module.parametrizations.weight[0].training
    module.train()
    P.register_parametrization(module, "weight", Identity().eval())
    assert module.parametrizations.weight[0].training
    assert module.parametrizations.weight[1].training


@LIBS
def test_type_before_parametrizations(L):
    P = _pz(L)
    model = L.nn.Linear(5, 5)
    assert P.type_before_parametrizations(model) is L.nn.Linear
    P.register_parametrization(model, "weight", _identity(L)())
    assert P.type_before_parametrizations(model) is L.nn.Linear
    assert isinstance(model, L.nn.Linear)


@LIBS
def test_deepcopy_after_parametrization(L):
    P = _pz(L)

    class AddOne(L.nn.Module):
        def forward(self, x):
            return x + 1.0

    class ModelWithoutDeepcopy(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = L.nn.Parameter(L.tensor([1.0, 1.0, 1.0, 1.0]), requires_grad=True)
            self.bias = L.nn.Parameter(L.tensor([0.0, 0.0, 0.0, 0.0]), requires_grad=True)
            self.attr = [1.0, 2.0, 3.0, 4.0]

    class ActualModel(ModelWithoutDeepcopy):
        def __deepcopy__(self, memo):
            result = self.__new__(self.__class__)
            memo[id(self)] = result
            result.__dict__ = copy.deepcopy(self.__dict__, memo)
            return result

    def check_deepcopy(m1, m2):
        w1 = m1.parametrizations.weight.original
        w2 = m2.parametrizations.weight.original
        b1 = m1.parametrizations.bias.original if P.is_parametrized(m1, "bias") else m1.bias
        b2 = m2.parametrizations.bias.original if P.is_parametrized(m2, "bias") else m2.bias
        assert m1.__dict__.keys() == m2.__dict__.keys()
        assert m1 is not m2
        _eq(w1, w2)
        assert w1 is not w2
        _eq(b1, b2)
        assert b1 is not b2
        assert m1.attr == m2.attr and m1.attr is not m2.attr
        _eq(m1.weight, m2.weight)

    for model in (ModelWithoutDeepcopy(), ActualModel()):
        P.register_parametrization(model, "weight", AddOne())
        check_deepcopy(model, copy.deepcopy(model))
        P.register_parametrization(model, "bias", AddOne())
        check_deepcopy(model, copy.deepcopy(model))
        P.register_parametrization(model, "weight", AddOne())
        check_deepcopy(model, copy.deepcopy(model))


@LIBS
def test_transfer_parametrizations_and_params(L):
    P = _pz(L)

    class AddOne(L.nn.Module):
        def forward(self, x):
            return x + 1.0

    class MinusOne(L.nn.Module):
        def forward(self, x):
            return x - 1.0

    Double = _double(L)
    model = L.nn.Linear(5, 5)
    P.register_parametrization(model, "weight", AddOne())
    P.register_parametrization(model, "weight", Double())
    P.register_parametrization(model, "weight", MinusOne())
    hold_weight = model.weight
    to_model = L.nn.Linear(5, 5)
    P.transfer_parametrizations_and_params(model, to_model)
    assert P.is_parametrized(to_model, "weight")
    _eq(model.weight, to_model.weight)
    _eq(model.parametrizations.weight.original, to_model.parametrizations.weight.original)
    _eq(hold_weight, model.weight)
    P.remove_parametrizations(to_model, "weight")
    assert not P.is_parametrized(to_model, "weight")
    assert P.is_parametrized(model, "weight")

    model.test_param = L.nn.Parameter(L.randn(5, 5))
    assert not hasattr(to_model, "test_param")
    P.register_parametrization(model, "test_param", Double())
    hold_test_param = model.test_param
    P.transfer_parametrizations_and_params(model, to_model, "test_param")
    _eq(model.test_param, to_model.test_param)
    _eq(
        model.parametrizations.test_param.original,
        to_model.parametrizations.test_param.original,
    )
    _eq(hold_test_param, model.test_param)


@LIBS
def test_transfer_parametrizations_and_params_right_inverse(L):
    P = _pz(L)
    model = L.nn.Linear(5, 5)
    P.register_parametrization(model, "weight", _double(L)())
    hold_weight = model.weight
    to_model = L.nn.Linear(5, 5)
    P.transfer_parametrizations_and_params(model, to_model)
    _eq(model.weight, to_model.weight)
    _eq(model.parametrizations.weight.original, to_model.parametrizations.weight.original)
    _eq(hold_weight, model.weight)


@LIBS
def test_transfer_parametrizations_and_params_single_param(L):
    P = _pz(L)

    class AddOne(L.nn.Module):
        def forward(self, x):
            return x + 1.0

    Double = _double(L, inverse=False)
    model = L.nn.Linear(5, 5, bias=True)
    for name in ("weight", "bias"):
        P.register_parametrization(model, name, AddOne())
        P.register_parametrization(model, name, Double())
    to_model = L.nn.Linear(5, 5, bias=True)
    P.transfer_parametrizations_and_params(model, to_model, "weight")
    _eq(model.weight, to_model.weight)
    _eq(model.parametrizations.weight.original, to_model.parametrizations.weight.original)
    assert "bias" not in to_model.parametrizations


@LIBS
def test_transfer_parametrizations_and_params_many_to_one(L):
    P = _pz(L)
    RankOne, Double = _rank_one(L), _double(L, inverse=False)
    model = L.nn.Linear(3, 3)
    P.register_parametrization(model, "weight", RankOne())
    P.register_parametrization(model, "weight", Double())
    hold_weight = model.weight
    to_model = L.nn.Linear(3, 3)
    P.transfer_parametrizations_and_params(model, to_model)
    assert P.is_parametrized(to_model, "weight")
    _eq(model.weight, to_model.weight)
    for k in ("original0", "original1"):
        _eq(getattr(model.parametrizations.weight, k), getattr(to_model.parametrizations.weight, k))
    _eq(hold_weight, model.weight)

    model.test_param = L.nn.Parameter(L.randn(3, 3))
    assert not hasattr(to_model, "test_param")
    P.register_parametrization(model, "test_param", RankOne())
    hold = model.test_param
    P.transfer_parametrizations_and_params(model, to_model, "test_param")
    _eq(model.test_param, to_model.test_param)
    for k in ("original0", "original1"):
        _eq(
            getattr(model.parametrizations.test_param, k),
            getattr(to_model.parametrizations.test_param, k),
        )
    _eq(hold, model.test_param)


@LIBS
def test_register_parametrization_no_grad(L):
    P = _pz(L)

    class SplitAndCat(L.nn.Module):
        def right_inverse(self, x):
            return L.split(x, x.shape[1] // 2)

        def forward(self, x0, x1):
            return L.cat([x0, x1])

    model = L.nn.Linear(8, 8)
    model.weight.requires_grad = False
    P.register_parametrization(model, "weight", SplitAndCat())
    assert not model.weight.requires_grad
    assert not model.parametrizations.weight.original0.requires_grad
    assert not model.parametrizations.weight.original1.requires_grad


# ------------------------------------------------------------------ parametrizations


def _check_spectral_norm_modes(L, get_modules, u_of, v_of, orig_of, remove, reapply):
    """The train / eval / remove checks shared by both spectral norm APIs."""
    for requires_grad in (True, False):
        m, sn = get_modules(requires_grad)
        inp = L.randn(2, 3, dtype=L.float64)
        u0, v0 = u_of(sn).clone(), v_of(sn).clone()
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        opt.zero_grad()
        m(inp).sum().backward()
        opt.step()
        out = m(inp)
        if requires_grad:
            _ne(u0, u_of(sn))
            _ne(v0, v_of(sn))
            (g,) = L.autograd.grad(out.sum(), orig_of(m))
            assert g.shape == orig_of(m).shape

        # removing in eval mode keeps the output
        m, sn = get_modules(requires_grad)
        pre = m(inp).detach()
        m.eval()
        m = remove(m)
        _eq(m(inp), pre, atol=1e-12)
        reapply(m)
        for _ in range(3):
            pre = m(inp).detach()
        m.eval()
        m = remove(m)
        _eq(m(inp), pre, atol=1e-12)

        # eval mode: no more power iterations
        m, sn = get_modules(requires_grad)
        m(inp)
        last = m(inp)
        lu, lv = u_of(sn).clone(), v_of(sn).clone()
        m.zero_grad()
        m.eval()
        e0 = m(inp)
        _eq(e0, last, atol=1e-12)
        _eq(e0, m(inp), atol=1e-12)
        _eq(lu, u_of(sn), atol=0)
        _eq(lv, v_of(sn), atol=0)


@LIBS
def test_new_spectral_norm(L):
    P, S = _pz(L), _pzs(L)
    m = S.spectral_norm(L.nn.Linear(5, 7, dtype=L.float64))
    snm = m.parametrizations.weight[0]
    assert tuple(snm._u.shape) == (m.weight.size(0),)
    assert "original" in m.parametrizations.weight._parameters
    assert "_u" in snm._buffers and "_v" in snm._buffers
    assert "weight" not in m._buffers and "weight" not in m._parameters
    assert m.parametrizations.weight.original.shape == m.weight.shape
    m = P.remove_parametrizations(m, "weight")
    assert not hasattr(m, "parametrizations") and "weight" in m._parameters
    m = S.spectral_norm(m, "weight")
    m = S.spectral_norm(m, "weight")
    m = S.spectral_norm(m, "bias")
    m = P.remove_parametrizations(m, "bias")
    assert "bias" in m._parameters and hasattr(m, "parametrizations")
    assert "weight" not in m._parameters
    m = P.remove_parametrizations(m, "weight")
    assert not hasattr(m, "parametrizations") and "weight" in m._parameters
    assert not P.is_parametrized(m)

    def get_modules(requires_grad):
        m = L.nn.Linear(3, 4, dtype=L.float64)
        m.weight.requires_grad_(requires_grad)
        m = S.spectral_norm(m)
        return m, m.parametrizations.weight[0]

    def reapply(m):
        S.spectral_norm(m)

    _check_spectral_norm_modes(
        L,
        get_modules,
        lambda sn: sn._u,
        lambda sn: sn._v,
        lambda m: m.parametrizations.weight.original,
        lambda m: P.remove_parametrizations(m, "weight"),
        reapply,
    )


@LIBS
def test_new_spectral_norm_load_state_dict(L):
    P, S = _pz(L), _pzs(L)
    for activate_times in (0, 3):
        inp = L.randn(2, 3)
        snm = S.spectral_norm(L.nn.Linear(3, 5))
        snm.train()
        for _ in range(activate_times):
            snm(inp)
        state_dict = copy.deepcopy(snm.state_dict())
        assert set(state_dict) == {
            "parametrizations.weight.original",
            "bias",
            "parametrizations.weight.0._v",
            "parametrizations.weight.0._u",
        }
        bad = copy.deepcopy(state_dict)
        bad["nonsense"] = L.zeros(1)
        with pytest.raises(RuntimeError, match="nonsense"):
            snm.load_state_dict(bad, strict=True)
        snm.load_state_dict(bad, strict=False)
        for k in (
            "parametrizations.weight.original",
            "parametrizations.weight.0._u",
            "parametrizations.weight.0._v",
            "bias",
        ):
            del bad[k]
            snm.load_state_dict(bad, strict=False)

        snm = S.spectral_norm(P.remove_parametrizations(snm, "weight"))
        snm.load_state_dict(state_dict)
        with L.no_grad():
            snm.eval()
            out0 = snm(inp)
            snm.train()
            out1, out2 = snm(inp), snm(inp)
            snm.eval()
            out3 = snm(inp)
        snm = S.spectral_norm(P.remove_parametrizations(snm, "weight"))
        snm.load_state_dict(state_dict)
        with L.no_grad():
            snm.eval()
            _eq(out0, snm(inp), atol=0)
            snm.train()
            _eq(out1, snm(inp), atol=0)
            _eq(out2, snm(inp), atol=0)
            snm.eval()
            _eq(out3, snm(inp), atol=0)


@LIBS
def test_new_spectral_norm_dim(L):
    m = _pzs(L).spectral_norm(L.nn.ConvTranspose2d(3, 4, (5, 6)))
    m(L.randn(2, 3, 10, 12))
    snm = m.parametrizations.weight[0]
    assert snm._u.shape == m.parametrizations.weight.original[0, :, 0, 0].shape


@LIBS
def test_new_spectral_norm_forward(L):
    F = L.nn.functional
    inp = L.randn(3, 5)
    m = _pzs(L).spectral_norm(L.nn.Linear(5, 7))
    snm = m.parametrizations.weight[0]
    w = m.parametrizations.weight.original.detach().clone()
    wm = w.reshape(w.size(0), -1)
    u = F.normalize(L.mv(wm, snm._v), dim=0, eps=1e-12)
    v = F.normalize(L.mv(wm.t(), u), dim=0, eps=1e-12)
    w = w / L.dot(u, L.matmul(wm, v))
    out_hat = F.linear(inp, w, m.bias)
    _eq(m(inp), out_hat)


@LIBS
def test_new_spectral_norm_value(L):
    m = L.nn.Linear(2, 2)
    with L.no_grad():
        # a fixed diagonal: with the random one the power iteration converges as
        # (x[1] / x[0]) ** 30, short of the tolerance when the two are close (in both libraries)
        x = L.tensor([0.8, -0.3])
        m.weight = L.nn.Parameter(L.diag(x))
        _pzs(L).spectral_norm(m)
        _eq(m.weight, L.diag(x / x.abs().max()))


def _assert_is_orthogonal(L, X):
    n, k = X.size(-2), X.size(-1)
    if n < k:
        X = X.mT
        n, k = k, n
    eye = np.broadcast_to(np.eye(k), (*X.shape[:-2], k, k))
    eps = 10 * n * np.finfo(_np(X).dtype).eps
    np.testing.assert_allclose(_np(X.mT @ X), eye, atol=eps, rtol=0)


def _assert_weight_allclose_q(L, weight, W):
    wide = W.size(-2) < W.size(-1)
    if wide:
        W = W.mT
    Q, R = L.linalg.qr(W)
    Q = Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)
    if wide:
        Q = Q.mT
    np.testing.assert_allclose(_np(weight), _np(Q), atol=1e-5, rtol=0)


@LIBS
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("triv", [False, True])
def test_orthogonal_parametrization(L, shape, orth_map, triv):
    can_initialize = triv or orth_map == "householder"
    m = L.nn.Linear(*shape)
    inp = L.randn(3, shape[0])
    w_init = m.weight.detach().clone()
    wide = w_init.size(-2) < w_init.size(-1)
    _pzs(L).orthogonal(m, "weight", orth_map, use_trivialization=triv)
    assert w_init.shape == m.weight.shape
    _assert_is_orthogonal(L, m.weight)
    if can_initialize:
        _assert_weight_allclose_q(L, m.weight, w_init)

    X = L.randn_like(m.weight)
    if wide:
        X = X.mT
    w_new = L.linalg.qr(X).Q
    if wide:
        w_new = w_new.mT
    msg = "assign to the matrix exponential or the Cayley parametrization"
    if can_initialize:
        m.weight = w_new
        np.testing.assert_allclose(_np(m.weight), _np(w_new), atol=1e-5, rtol=0)
    else:
        with pytest.raises(NotImplementedError, match=msg):
            m.weight = w_new
    w_new = L.randn_like(m.weight)
    if can_initialize:
        m.weight = w_new
        _assert_weight_allclose_q(L, m.weight, w_new)
    else:
        with pytest.raises(NotImplementedError, match=msg):
            m.weight = w_new

    opt = L.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        m(inp).norm().backward()
        grad = m.parametrizations.weight.original.grad
        assert grad is not None
        zeros = grad.triu(1) if grad.size(-2) >= grad.size(-1) else grad.tril(-1)
        assert not _np(zeros).any()
        assert not _np(grad.diagonal(dim1=-2, dim2=-1)).any()
        opt.step()
        _assert_is_orthogonal(L, m.weight)


@LIBS
def test_orthogonal_errors(L):
    S = _pzs(L)
    m = L.nn.Linear(3, 4)
    with pytest.raises(ValueError, match="has to be one of"):
        S.orthogonal(m, "weight", "foo")
    with pytest.raises(ValueError, match="Expected a matrix"):
        S.orthogonal(m, "bias")
    S.orthogonal(m, "weight")
    with pytest.raises(ValueError, match="matrices of shape"):
        m.weight = L.randn(5, 5)
    _pz(L).remove_parametrizations(m, "weight")


@LIBS
def test_weight_norm_state_dict_compat(L):
    m = L.nn.utils.weight_norm(L.nn.Linear(4, 5))
    m2 = _pzs(L).weight_norm(L.nn.Linear(4, 5))
    m2.load_state_dict(m.state_dict())
    inp = L.randn(3, 4)
    _eq(m(inp), m2(inp))


@LIBS
def test_weight_norm_pickle(L):
    m = _pzs(L).weight_norm(L.nn.Linear(4, 5))
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(m)


@LIBS
def test_weight_norm_deepcopy(L):
    m = _pzs(L).weight_norm(L.nn.Linear(4, 5))
    m2 = copy.deepcopy(m)
    inp = L.randn(3, 4)
    _eq(m(inp), m2(inp))


@LIBS
def test_weight_norm_parametrization(L):
    P, S = _pz(L), _pzs(L)
    inp = L.randn(3, 4)
    m = L.nn.Linear(4, 5)
    expected = m(inp)
    m = S.weight_norm(m)
    assert m.parametrizations.weight.original1.shape == m.weight.shape
    assert tuple(m.parametrizations.weight.original0.shape) == (5, 1)
    _eq(m(inp), expected)
    P.remove_parametrizations(m, "weight")
    assert not hasattr(m, "parametrizations")
    _eq(m(inp), expected)
    m = S.weight_norm(m, dim=1)
    assert m.parametrizations.weight.original1.shape == m.weight.shape
    assert tuple(m.parametrizations.weight.original0.shape) == (1, 4)
    _eq(m(inp), expected)
    m = L.nn.Linear(4, 5)
    expected = m(inp)
    m = S.weight_norm(m, dim=None)
    _eq(m(inp), expected)


# ------------------------------------------------------------------ the hook-based APIs


@LIBS
def test_weight_norm(L):
    U = L.nn.utils
    inp = L.randn(3, 4)
    m = L.nn.Linear(4, 5)
    expected = m(inp)
    m = U.weight_norm(m)
    assert m.weight_v.shape == m.weight.shape
    assert tuple(m.weight_g.shape) == (5, 1)
    _eq(m(inp), expected)
    m = U.remove_weight_norm(m)
    assert not hasattr(m, "weight_g") and not hasattr(m, "weight_v")
    _eq(m(inp), expected)
    m = U.weight_norm(m, dim=1)
    assert m.weight_v.shape == m.weight.shape
    assert tuple(m.weight_g.shape) == (1, 4)
    _eq(m(inp), expected)
    m = L.nn.Linear(4, 5)
    expected = m(inp)
    m = U.weight_norm(m, dim=None)
    _eq(m(inp), expected)
    with pytest.raises(RuntimeError):
        U.weight_norm(m)


@LIBS
def test_weight_norm_hook_pickle(L):
    m = pickle.loads(pickle.dumps(L.nn.utils.weight_norm(L.nn.Linear(5, 7))))
    assert isinstance(m, L.nn.Linear)
    inp = L.randn(2, 5)
    assert m(inp).shape == (2, 7)


@LIBS
def test_spectral_norm(L):
    U = L.nn.utils
    m = U.spectral_norm(L.nn.Linear(5, 7, dtype=L.float64))
    assert tuple(m.weight_u.shape) == (m.weight.size(0),)
    assert "weight_orig" in m._parameters
    assert "weight_u" in m._buffers and "weight_v" in m._buffers
    assert "weight" not in m._buffers and "weight" not in m._parameters
    assert m.weight_orig.shape == m.weight.shape
    m = U.remove_spectral_norm(m)
    assert not hasattr(m, "weight_orig") and not hasattr(m, "weight_u")
    assert "weight" in m._parameters
    with pytest.raises(RuntimeError):
        U.spectral_norm(U.spectral_norm(m))

    def get_modules(requires_grad):
        m = L.nn.Linear(3, 4, dtype=L.float64)
        m.weight.requires_grad_(requires_grad)
        m = U.spectral_norm(m)
        return m, m

    _check_spectral_norm_modes(
        L,
        get_modules,
        lambda sn: sn.weight_u,
        lambda sn: sn.weight_v,
        lambda m: m.weight_orig,
        U.remove_spectral_norm,
        U.spectral_norm,
    )


@LIBS
def test_spectral_norm_load_state_dict(L):
    U = L.nn.utils
    inp = L.randn(2, 3)
    for activate_times in (0, 3):
        snm = U.spectral_norm(L.nn.Linear(3, 5))
        snm.train()
        for _ in range(activate_times):
            snm(inp)
        ref = copy.deepcopy(snm.state_dict())
        assert set(ref) == {"weight_orig", "bias", "weight_u", "weight_v"}
        bad = copy.deepcopy(ref)
        bad["nonsense"] = L.zeros(1)
        with pytest.raises(RuntimeError, match="nonsense"):
            snm.load_state_dict(bad, strict=True)
        snm.load_state_dict(bad, strict=False)
        for k in ("weight_orig", "weight_u", "weight_v", "bias"):
            del bad[k]
            snm.load_state_dict(bad, strict=False)

        snm = U.spectral_norm(U.remove_spectral_norm(snm))
        snm.load_state_dict(ref)
        with L.no_grad():
            snm.eval()
            out0 = snm(inp)
            snm.train()
            out1, out2 = snm(inp), snm(inp)
            snm.eval()
            out3 = snm(inp)
        snm = U.spectral_norm(U.remove_spectral_norm(snm))
        snm.load_state_dict(ref)
        with L.no_grad():
            snm.eval()
            _eq(out0, snm(inp), atol=0)
            snm.train()
            _eq(out1, snm(inp), atol=0)
            _eq(out2, snm(inp), atol=0)
            snm.eval()
            _eq(out3, snm(inp), atol=0)


@LIBS
def test_spectral_norm_dim(L):
    m = L.nn.utils.spectral_norm(L.nn.ConvTranspose2d(3, 4, (5, 6)))
    m(L.randn(2, 3, 10, 12))
    assert m.weight_u.shape == m.weight_orig[0, :, 0, 0].shape


@LIBS
def test_spectral_norm_forward(L):
    F = L.nn.functional
    inp = L.randn(3, 5)
    m = L.nn.utils.spectral_norm(L.nn.Linear(5, 7))
    w = m.weight_orig.detach().clone()
    wm = w.reshape(w.size(0), -1)
    v = F.normalize(L.mv(wm.t(), m.weight_u), dim=0, eps=1e-12)
    u = F.normalize(L.mv(wm, v), dim=0, eps=1e-12)
    w = w / L.dot(u, L.matmul(wm, v))
    _eq(m(inp), F.linear(inp, w, m.bias))


@LIBS
def test_spectral_norm_hook_pickle(L):
    m = pickle.loads(pickle.dumps(L.nn.utils.spectral_norm(L.nn.Linear(5, 7))))
    assert isinstance(m, L.nn.Linear)
    assert m(L.randn(2, 5)).shape == (2, 7)


# ------------------------------------------------------------------ against torch, float64


def _module_pair(make):
    """The same module in both libraries (``make(lib)``), float64, with torch's values."""
    torch.manual_seed(0)
    tm = make(torch).double()
    fm = make(fg)
    fm.to(fg.float64)
    return fm, tm


def _copy_state(fm, tm):
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert list(fm.state_dict()) == list(tm.state_dict())


def _compare_state(fm, tm, rtol=1e-8):
    fs = fm.state_dict()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(_np(fs[k]), v.numpy(), rtol=rtol, atol=1e-12, err_msg=k)


def _train_both(fm, tm, x, steps=3, opt="sgd", train=True):
    fm.train(train)
    tm.train(train)
    if opt == "sgd":
        fo = fg.optim.SGD(fm.parameters(), lr=0.1, momentum=0.9)
        to = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    else:
        fo = fg.optim.Adam(fm.parameters(), lr=0.01)
        to = torch.optim.Adam(tm.parameters(), lr=0.01)
    tnames = [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in fm.named_parameters()] == tnames
    for _ in range(steps):
        fo.zero_grad()
        to.zero_grad()
        fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
        np.testing.assert_allclose(_np(fy), _np(ty), rtol=1e-8, atol=1e-12)
        (fy * fy).sum().backward()
        (ty * ty).sum().backward()
        for (n, fp), tp in zip(fm.named_parameters(), tm.parameters(), strict=True):
            np.testing.assert_allclose(
                _np(fp.grad), tp.grad.numpy(), rtol=1e-8, atol=1e-12, err_msg=n
            )
        fo.step()
        to.step()
        _compare_state(fm, tm)


_CONVS = {
    "linear": (lambda L: L.nn.Linear(5, 4), (3, 5)),
    "conv2d": (lambda L: L.nn.Conv2d(2, 3, 3), (2, 2, 5, 5)),
    "convT2d": (lambda L: L.nn.ConvTranspose2d(3, 2, (2, 3)), (2, 3, 4, 4)),
    "convT1d": (lambda L: L.nn.ConvTranspose1d(3, 2, 2), (2, 3, 4)),
    "convT3d": (lambda L: L.nn.ConvTranspose3d(2, 3, 2), (1, 2, 3, 3, 2)),
}


@pytest.mark.parametrize("kind", list(_CONVS))
@pytest.mark.parametrize("api", ["parametrizations", "hooks"])
@pytest.mark.parametrize("n_power_iterations", [1, 3])
def test_spectral_norm_trains_as_torch(kind, api, n_power_iterations):
    make, xshape = _CONVS[kind]
    fm, tm = _module_pair(make)
    for m, L in ((fm, fg), (tm, torch)):
        sn = L.nn.utils.parametrizations.spectral_norm if api == "parametrizations" else None
        sn = sn or L.nn.utils.spectral_norm
        sn(m, n_power_iterations=n_power_iterations)
    _copy_state(fm, tm)
    x = np.random.default_rng(1).standard_normal(xshape)
    _train_both(fm, tm, x)  # power iterations at each forward
    _train_both(fm, tm, x, train=False)  # none in eval mode
    _train_both(fm, tm, x, opt="adam")


@pytest.mark.parametrize("kind", list(_CONVS))
@pytest.mark.parametrize("api", ["parametrizations", "hooks"])
@pytest.mark.parametrize("dim", [0, 1, -1, None])
def test_weight_norm_trains_as_torch(kind, api, dim):
    make, xshape = _CONVS[kind]
    fm, tm = _module_pair(make)
    for m, L in ((fm, fg), (tm, torch)):
        if api == "parametrizations":
            L.nn.utils.parametrizations.weight_norm(m, dim=dim)
        else:
            L.nn.utils.weight_norm(m, dim=dim)
    _copy_state(fm, tm)
    x = np.random.default_rng(2).standard_normal(xshape)
    _train_both(fm, tm, x)
    _train_both(fm, tm, x, opt="adam")
    fm(fg.tensor(x))  # (the hook-based weight is recomputed at each forward)
    if api == "parametrizations":
        fw = fm.weight
        g, v = fm.parametrizations.weight.original0, fm.parametrizations.weight.original1
    else:
        fw, g, v = fm.weight, fm.weight_g, fm.weight_v
    v = _np(v)
    axes = tuple(a for a in range(v.ndim) if dim is None or dim == -1 or a != dim % v.ndim)
    if dim is None:
        norm = np.sqrt((v * v).sum())
    else:
        norm = np.sqrt((v * v).sum(axis=axes, keepdims=True))
    np.testing.assert_allclose(_np(fw), _np(g) * v / norm, rtol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("triv", [False, True])
def test_orthogonal_trains_as_torch(shape, orth_map, triv):
    fm, tm = _module_pair(lambda L: L.nn.Linear(*shape))
    for m, L in ((fm, fg), (tm, torch)):
        L.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orth_map, use_trivialization=triv)
    _copy_state(fm, tm)
    np.testing.assert_allclose(_np(fm.weight), _np(tm.weight), rtol=1e-8, atol=1e-12)
    x = np.random.default_rng(3).standard_normal((3, shape[0]))
    _train_both(fm, tm, x)
    _train_both(fm, tm, x, opt="adam")


def test_spectral_norm_double_forward_gradient_equals_finite_differences():
    # training mode, the estimates reset before each evaluation: the gradient of two
    # forwards (two power iterations) with respect to the input
    fg.manual_seed(0)
    m = fg.nn.utils.parametrizations.spectral_norm(fg.nn.Linear(3, 4, dtype="float64"))
    sn = m.parametrizations.weight[0]
    saved_u, saved_v = sn._u.detach().copy(), sn._v.detach().copy()

    def fn(inp):
        sn._u.copy_(saved_u)
        sn._v.copy_(saved_v)
        return m(inp) + m(inp)

    x = fg.tensor(np.random.default_rng(4).standard_normal((2, 3)), requires_grad=True)
    assert fg.autograd.gradcheck(fn, (x,))
    m.eval()
    assert fg.autograd.gradcheck(lambda w: m(x.detach()), (m.parametrizations.weight.original,))


@LIBS
def test_unsafe_shape_changes_keep_the_trained_parameter_object(L):
    # registering a right_inverse that changes the shape, and removing a parametrization
    # that does, leave the same Parameter object (an optimizer holding it trains it on)
    P = _pz(L)

    class Halves(L.nn.Module):
        def forward(self, x):
            return L.cat([x, x])

        def right_inverse(self, w):
            return w[: w.shape[0] // 2]

    class Top(L.nn.Module):
        def forward(self, x):
            return x[[0]] * 3.0

    m = L.nn.Linear(3, 4, dtype=L.float64)
    w = m.weight
    opt = L.optim.SGD([w], lr=0.5)
    P.register_parametrization(m, "weight", Halves(), unsafe=True)
    assert m.parametrizations.weight.original is w
    assert tuple(w.shape) == (2, 3) and tuple(m.weight.shape) == (4, 3)
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert m.weight is w
    P.register_parametrization(m, "weight", Top(), unsafe=True)
    before = _np(m.weight).copy()
    P.remove_parametrizations(m, "weight", leave_parametrized=True)
    assert m.weight is w and tuple(w.shape) == (1, 3) and w.requires_grad and w.is_leaf
    np.testing.assert_array_equal(_np(w), before)
    opt.zero_grad()
    (m.weight * m.weight).sum().backward()
    opt.step()
    np.testing.assert_allclose(_np(w), before - 0.5 * 2 * before, rtol=1e-12)


@LIBS
def test_set_under_no_grad_keeps_a_trainable_leaf(L):
    p = L.nn.Parameter(L.ones(3, 3))
    src = L.zeros(1, 3)
    with pytest.raises(RuntimeError, match="leaf"):
        p.set_(src)
    with L.no_grad():
        p.set_(src)
    assert tuple(p.shape) == (1, 3) and p.requires_grad and p.is_leaf
    with L.no_grad():
        src.add_(1.0)  # the memory is shared
    np.testing.assert_array_equal(_np(p), np.ones((1, 3)))
    (p * 2).sum().backward()
    np.testing.assert_array_equal(_np(p.grad), np.full((1, 3), 2.0))


@pytest.mark.parametrize("api", ["parametrizations", "hooks"])
def test_spectral_norm_mixed_mode_gradient_equals_finite_differences(api):
    # train, eval, train, eval forwards from the same saved estimates: the gradient with
    # respect to the input, and in eval mode with respect to the trained weight
    fg.manual_seed(0)
    m = fg.nn.Linear(3, 4, dtype="float64")
    if api == "parametrizations":
        fg.nn.utils.parametrizations.spectral_norm(m)
        sn = m.parametrizations.weight[0]
        bufs, weight = (sn._u, sn._v), m.parametrizations.weight.original
    else:
        fg.nn.utils.spectral_norm(m)
        bufs, weight = (m.weight_u, m.weight_v), m.weight_orig
    saved = [b.detach().copy() for b in bufs]

    def fn(inp):
        for b, s in zip(bufs, saved, strict=True):
            b.copy_(s)
        outs = []
        for train in (True, False, True, False):
            m.train(train)
            outs.append(m(inp))
        return outs[0] + outs[1] + outs[2] + outs[3]

    x = fg.tensor(np.random.default_rng(5).standard_normal((2, 3)), requires_grad=True)
    assert fg.autograd.gradcheck(fn, (x,))
    m.eval()
    assert fg.autograd.gradcheck(lambda w: m(x.detach()), (weight,))


def test_hook_weight_norm_is_deprecated_as_in_torch():
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        torch.nn.utils.weight_norm(torch.nn.Linear(2, 2))
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        fg.nn.utils.weight_norm(fg.nn.Linear(2, 2))


@LIBS
def test_weight_norm_dim_out_of_range_is_an_index_error(L):
    for wn in (L.nn.utils.weight_norm, L.nn.utils.parametrizations.weight_norm):
        with pytest.raises(IndexError):
            wn(L.nn.Linear(2, 3), dim=5)
        with pytest.raises(IndexError):
            wn(L.nn.Linear(2, 3), dim=-3)
    with pytest.raises(IndexError):
        L.nn.utils.parametrizations.spectral_norm(L.nn.Linear(2, 3), dim=2)


def test_assigning_through_a_multi_output_parametrization_matches_torch():
    def build(L):
        class Split(L.nn.Module):
            def forward(self, a, b):
                return a + 2.0 * b

            def right_inverse(self, w):
                return w * 0.25, w * 0.375

        class Scale(L.nn.Module):
            def forward(self, x):
                return 3.0 * x

            def right_inverse(self, w):
                return w / 3.0

        m = L.nn.Linear(3, 2, dtype=L.float64)
        L.nn.utils.parametrize.register_parametrization(m, "weight", Split())
        L.nn.utils.parametrize.register_parametrization(m, "weight", Scale())
        return m

    fm, tm = build(fg), build(torch)
    _copy_state(fm, tm)
    a = np.random.default_rng(6).standard_normal((2, 3))
    fm.weight = fg.tensor(a)
    tm.weight = torch.tensor(a)
    _compare_state(fm, tm)
    np.testing.assert_allclose(_np(fm.weight), a, rtol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        fm.weight = fg.tensor(np.ones((3, 3)))
    x = np.random.default_rng(7).standard_normal((4, 3))
    _train_both(fm, tm, x)


@LIBS
def test_assigning_another_shape_through_an_unsafe_parametrization(L):
    class Twice(L.nn.Module):
        def forward(self, x):
            return L.cat([x, x])

        def right_inverse(self, w):
            return w[: w.shape[0] // 2]

    m = L.nn.Linear(3, 4, dtype=L.float64)
    L.nn.utils.parametrize.register_parametrization(m, "weight", Twice(), unsafe=True)
    orig = m.parametrizations.weight.original
    m.weight = L.ones(8, 3, dtype=L.float64)
    assert m.parametrizations.weight.original is orig
    assert tuple(orig.shape) == (4, 3) and tuple(m.weight.shape) == (8, 3)


@pytest.mark.parametrize(
    "kind", ["weight_norm", "spectral_norm", "orthogonal", "hook_weight_norm", "hook_spectral_norm"]
)
def test_traced_training_step_matches_eager(kind):
    def build():
        fg.manual_seed(0)
        m = fg.nn.Linear(4, 4, dtype="float64")
        U = fg.nn.utils
        if kind.startswith("hook_"):
            getattr(U, kind[5:])(m)
        else:
            getattr(U.parametrizations, kind)(m)
        return m

    x = fg.tensor(np.random.default_rng(8).standard_normal((3, 4)))
    runs = []
    for traced in (False, True):
        m = build()
        opt = fg.optim.SGD(m.parameters(), lr=0.1)

        def step(x, m=m, opt=opt):
            opt.zero_grad()
            loss = (m(x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss

        f = fg.trace(step) if traced else step
        losses = [float(f(x).numpy()) for _ in range(3)]
        runs.append((losses, {k: _np(v).copy() for k, v in m.state_dict().items()}))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-10)
    for k, v in runs[0][1].items():
        np.testing.assert_allclose(runs[1][1][k], v, rtol=1e-10, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("api", ["parametrizations", "hooks"])
@pytest.mark.parametrize("name, kw", [("weight_ih_l0", {}), ("weight_hr_l0", {"proj_size": 3})])
def test_weight_norm_on_an_lstm_weight_trains_as_torch(api, name, kw):
    fm, tm = _module_pair(lambda L: L.nn.LSTM(4, 5, **kw))
    for m, L in ((fm, fg), (tm, torch)):
        if api == "hooks":
            L.nn.utils.weight_norm(m, name=name)
        else:
            L.nn.utils.parametrizations.weight_norm(m, name=name)
    _copy_state(fm, tm)

    class First(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    class FFirst(fg.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    x = np.random.default_rng(9).standard_normal((3, 2, 4))
    _train_both(FFirst(fm), First(tm), x, steps=2)
    if api == "hooks":
        for m, L in ((fm, fg), (tm, torch)):
            L.nn.utils.remove_weight_norm(m, name=name)
            assert name in m._parameters
            assert name + "_g" not in dict(m.named_parameters())
        _train_both(FFirst(fm), First(tm), x, steps=1)
