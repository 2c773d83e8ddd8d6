"""nn.utils.parametrize and nn.utils.parametrizations against PyTorch's."""

from __future__ import annotations

import copy

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.nn.utils import parametrizations, parametrize

torch = pytest.importorskip("torch")


def _same_weights(fm, tm):
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in fm.state_dict().items()})


def _grads(m):
    return {n: p.grad.numpy() for n, p in m.named_parameters()}


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch_in_values_keys_and_gradients(dim):
    fm = fg.nn.Linear(5, 3, dtype="float64")
    tm = torch.nn.Linear(5, 3).double()
    _same_weights(fm, tm)
    parametrizations.weight_norm(fm, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    assert list(fm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(fm.state_dict()[k].numpy(), v.numpy(), rtol=1e-12)
    x = np.random.default_rng(0).standard_normal((4, 5))
    fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(fy.numpy(), ty.detach().numpy(), rtol=1e-10)
    (fy * fy).sum().backward()
    (ty * ty).sum().backward()
    tg = {n: p.grad.numpy() for n, p in tm.named_parameters()}
    for n, g in _grads(fm).items():
        np.testing.assert_allclose(g, tg[n], rtol=1e-10, atol=1e-12)


def test_weight_norm_gradient_equals_finite_differences():
    fm = fg.nn.Conv2d(2, 3, 3, dtype="float64")
    parametrizations.weight_norm(fm)
    x = fg.tensor(np.random.default_rng(1).standard_normal((2, 2, 5, 5)))
    g0 = fm.parametrizations.weight.original0

    def loss():
        return float((fm(x) ** 2).sum().numpy())

    (fm(x) ** 2).sum().backward()
    analytic = g0.grad.numpy().ravel()
    flat = g0.detach().numpy().ravel().copy()
    h = 1e-6
    for i in range(flat.size):
        with fg.no_grad():
            e = np.zeros_like(flat)
            e[i] = h
            g0.copy_(fg.tensor((flat + e).reshape(g0.shape)))
            up = loss()
            g0.copy_(fg.tensor((flat - e).reshape(g0.shape)))
            down = loss()
            g0.copy_(fg.tensor(flat.reshape(g0.shape)))
        assert abs((up - down) / (2 * h) - analytic[i]) < 1e-6 * max(1.0, abs(analytic[i]))


def test_a_torch_checkpoint_of_a_weight_normed_model_loads():
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    torch.nn.utils.parametrizations.weight_norm(tm[0])
    fm = fg.nn.Sequential(fg.nn.Linear(4, 6), fg.nn.Tanh(), fg.nn.Linear(6, 2))
    parametrizations.weight_norm(fm[0])
    fm.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        fm(fg.tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


class _Symmetric(fg.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, a):
        return a.triu()


class _TSymmetric(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, a):
        return a.triu()


def test_custom_parametrization_trains_the_original_and_assigns_through_right_inverse():
    fm = fg.nn.Linear(3, 3, bias=False, dtype="float64")
    tm = torch.nn.Linear(3, 3, bias=False).double()
    _same_weights(fm, tm)
    parametrize.register_parametrization(fm, "weight", _Symmetric())
    torch.nn.utils.parametrize.register_parametrization(tm, "weight", _TSymmetric())
    w = fm.weight.numpy()
    np.testing.assert_array_equal(w, w.T)
    np.testing.assert_allclose(w, tm.weight.detach().numpy())
    assert parametrize.is_parametrized(fm) and parametrize.is_parametrized(fm, "weight")
    assert not parametrize.is_parametrized(fm, "bias")
    assert parametrize.type_before_parametrizations(fm) is fg.nn.Linear
    assert isinstance(fm, fg.nn.Linear)
    opt = fg.optim.SGD(fm.parameters(), lr=0.1)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    x = np.random.default_rng(3).standard_normal((4, 3))
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        fm(fg.tensor(x)).pow(2).sum().backward()
        tm(torch.tensor(x)).pow(2).sum().backward()
        opt.step()
        topt.step()
    np.testing.assert_allclose(fm.weight.numpy(), tm.weight.detach().numpy(), rtol=1e-12)
    a = np.arange(9.0).reshape(3, 3)
    fm.weight = fg.tensor(a)
    np.testing.assert_array_equal(
        fm.parametrizations.weight.original.numpy(), np.triu(a)
    )  # right_inverse stored the upper triangle
    np.testing.assert_array_equal(fm.weight.numpy(), np.triu(a) + np.triu(a, 1).T)


def test_parametrizations_compose_in_registration_order():
    class Double(fg.nn.Module):
        def forward(self, x):
            return 2 * x

    m = fg.nn.Linear(3, 3, bias=False, dtype="float64")
    w0 = m.weight.numpy().copy()
    parametrize.register_parametrization(m, "weight", _Symmetric())
    parametrize.register_parametrization(m, "weight", Double())
    s = np.triu(w0) + np.triu(w0, 1).T
    np.testing.assert_allclose(m.weight.numpy(), 2 * s)
    assert len(m.parametrizations.weight) == 2


def test_cached_computes_each_parametrized_tensor_once():
    calls = []

    class Counting(fg.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1.0

    m = fg.nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    with parametrize.cached():
        a, b = m.weight, m.weight
    assert len(calls) == 1 and a is b
    m.weight  # noqa: B018 (outside the block every read computes again)
    assert len(calls) == 2


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_restores_a_plain_parameter(leave):
    m = fg.nn.Linear(3, 3, bias=False, dtype="float64")
    parametrize.register_parametrization(m, "weight", _Symmetric())
    orig = m.parametrizations.weight.original.numpy().copy()
    value = m.weight.numpy().copy()
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert type(m) is fg.nn.Linear
    assert "parametrizations" not in m.state_dict() and list(m.state_dict()) == ["weight"]
    assert isinstance(m.weight, fg.nn.Parameter)
    np.testing.assert_array_equal(m.weight.numpy(), value if leave else orig)
    other = fg.nn.Linear(3, 3)
    assert type(other) is fg.nn.Linear and not hasattr(type(other), "weight")


def test_removing_weight_norm_leaves_the_normalised_weight_and_refuses_the_original():
    m = fg.nn.Linear(4, 2)
    parametrizations.weight_norm(m)
    w = m.weight.numpy().copy()
    with pytest.raises(ValueError, match="leave_parametrized"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    np.testing.assert_allclose(m.weight.numpy(), w, rtol=1e-6)


def test_spectral_norm_divides_by_the_largest_singular_value():
    fg.manual_seed(0)
    m = fg.nn.Conv2d(3, 5, 3, dtype="float64")
    w0 = m.weight.numpy().copy()
    parametrizations.spectral_norm(m)
    assert list(m.state_dict()) == [
        "bias",
        "parametrizations.weight.original",
        "parametrizations.weight.0._u",
        "parametrizations.weight.0._v",
    ]
    for _ in range(30):  # power iterations converge on reads in training mode
        w = m.weight
    sigma = np.linalg.svd(w0.reshape(5, -1), compute_uv=False)[0]
    np.testing.assert_allclose(w.numpy(), w0 / sigma, rtol=1e-6)
    m.eval()
    u = m.parametrizations.weight[0]._u.numpy().copy()
    m.weight  # noqa: B018 (no power iteration in eval mode)
    np.testing.assert_array_equal(m.parametrizations.weight[0]._u.numpy(), u)
    x = fg.tensor(np.random.default_rng(4).standard_normal((1, 3, 6, 6)))
    m(x).sum().backward()
    assert m.parametrizations.weight.original.grad is not None


def test_spectral_norm_gradient_matches_torch_with_the_same_estimates():
    fm = fg.nn.Linear(4, 3, dtype="float64")
    tm = torch.nn.Linear(4, 3).double()
    _same_weights(fm, tm)
    parametrizations.spectral_norm(fm)
    torch.nn.utils.parametrizations.spectral_norm(tm)
    fm.eval()
    tm.eval()
    sn = tm.parametrizations.weight[0]
    with torch.no_grad():
        sn._u.copy_(torch.tensor(fm.parametrizations.weight[0]._u.numpy()))
        sn._v.copy_(torch.tensor(fm.parametrizations.weight[0]._v.numpy()))
    x = np.random.default_rng(5).standard_normal((2, 4))
    fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(fy.numpy(), ty.detach().numpy(), rtol=1e-10)
    fy.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(
        fm.parametrizations.weight.original.grad.numpy(),
        tm.parametrizations.weight.original.grad.numpy(),
        rtol=1e-10,
    )


def test_deepcopy_and_bad_names():
    m = fg.nn.Linear(3, 2)
    parametrizations.weight_norm(m)
    c = copy.deepcopy(m)
    np.testing.assert_array_equal(c.weight.numpy(), m.weight.numpy())
    with fg.no_grad():
        c.parametrizations.weight.original0.mul_(2.0)
    assert not np.allclose(c.weight.numpy(), m.weight.numpy())
    with pytest.raises(ValueError, match="nope"):
        parametrize.register_parametrization(m, "nope", _Symmetric())
    with pytest.raises(ValueError, match="bias"):
        parametrize.remove_parametrizations(m, "bias")
    with pytest.raises(ValueError, match="dim"):
        parametrizations.weight_norm(fg.nn.Linear(2, 2), dim=5)
