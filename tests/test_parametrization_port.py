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
        model.weight.copy_(skew(model.weight))
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
