"""What porting torchvision's classic models (MobileNet, EfficientNet, DenseNet, ShuffleNet,
GoogLeNet, ViT, ...) by renaming ``torch`` to ``ferrograd`` ran into: in-place activation
layers that ignored ``inplace=True``, in-place ops whose gradient keeps their input
(EfficientNet's ``SiLU(inplace=True)``) inside ``fg.trace``, ``Tensor.bernoulli_``
(stochastic depth) inside a traced step and its argument checks, and ``torch.fx`` /
``torch.onnx`` reached as attributes by model files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest

# the folder the package under test was imported from (the source tree or an installed wheel)
PYTHON_DIR = str(Path(fg.__file__).resolve().parents[1])


def _mbconv(lib):
    """A float64 EfficientNet block written as torchvision writes it (SiLU in place,
    squeeze-excitation, depthwise conv), for ``lib`` = torch or ferrograd."""
    nn = lib.nn

    class SqueezeExcitation(nn.Module):
        def __init__(self, c: int, sq: int) -> None:
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(c, sq, 1)
            self.fc2 = nn.Conv2d(sq, c, 1)
            self.activation = nn.SiLU(inplace=True)
            self.scale_activation = nn.Sigmoid()

        def forward(self, x):
            s = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
            return s * x

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(
                nn.Conv2d(4, 8, 1, bias=False),
                nn.BatchNorm2d(8),
                nn.SiLU(inplace=True),
                nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
                nn.BatchNorm2d(8),
                nn.SiLU(inplace=True),
                SqueezeExcitation(8, 2),
                nn.Conv2d(8, 4, 1, bias=False),
                nn.BatchNorm2d(4),
            )
            self.head = nn.Linear(4, 3)

        def forward(self, x):
            r = self.block(x)
            r += x
            return self.head(lib.flatten(nn.functional.adaptive_avg_pool2d(r, 1), 1))

    return Block().double()


def _copy_weights(src, dst) -> None:
    dst.load_state_dict(
        {k: fg.tensor(v.detach().numpy().copy()) for k, v in src.state_dict().items()}
    )


def _sgd_step(lib, model, opt):
    def step(x, y):
        loss = lib.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def test_an_inplace_silu_block_trains_the_same_traced_eager_and_in_torch():
    # SiLU(inplace=True)'s gradient keeps its input; inside fg.trace the copy it computes
    # from was the written tensor's own node, so the traced step raised TraceError
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = _mbconv(torch)
    eager, traced = _mbconv(fg), _mbconv(fg)
    _copy_weights(tm, eager)
    _copy_weights(tm, traced)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4, 6, 6)), np.array([0, 2, 1])
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    eopt = fg.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    popt = fg.optim.SGD(traced.parameters(), lr=0.1, momentum=0.9)
    tstep, estep = _sgd_step(torch, tm, topt), _sgd_step(fg, eager, eopt)
    pstep = fg.trace(_sgd_step(fg, traced, popt))
    for _ in range(3):
        lt = tstep(torch.tensor(x), torch.tensor(y)).item()
        le = estep(fg.tensor(x), fg.tensor(y)).item()
        lp = pstep(fg.tensor(x), fg.tensor(y)).item()
        np.testing.assert_allclose([le, lp], [lt, lt], rtol=1e-10)
    es, ps = eager.state_dict(), traced.state_dict()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(es[k].numpy(), v.numpy(), rtol=1e-8, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(ps[k].numpy(), v.numpy(), rtol=1e-8, atol=1e-12, err_msg=k)


def _imul(h, v):
    h *= v


@pytest.mark.parametrize(
    "write",
    [
        lambda h, v: h.sin_(),
        lambda h, v: h.pow_(3),
        lambda h, v: h.mul_(h),
        _imul,
        lambda h, v: fg.nn.functional.silu(h, inplace=True),
        lambda h, v: fg.nn.functional.hardswish(h, inplace=True),
    ],
    ids=["sin_", "pow_", "mul_self", "imul", "silu_inplace", "hardswish_inplace"],
)
def test_inplace_ops_whose_gradient_keeps_the_input_trace_like_eager(write):
    # inside fg.trace the value such a rule saved was the written tensor's own node: the
    # traced backward raised TraceError (read after an in-place write)
    rng = np.random.default_rng(1)
    w = fg.nn.Parameter(fg.tensor(rng.standard_normal((2, 3))))
    v = fg.nn.Parameter(fg.tensor(rng.standard_normal((2, 3))))

    def grads():
        w.grad = v.grad = None
        h = w * 1.5
        write(h, v)
        (h * h).sum().backward()
        return w.grad.clone(), (v.grad if v.grad is not None else fg.zeros(2, 3)).clone()

    eager = [g.numpy() for g in grads()]
    traced = fg.trace(grads)
    for _ in range(2):
        for got, want in zip(traced(), eager):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    # and the eager gradients are the derivatives (central differences, float64)
    for p, g in zip((w, v), eager):
        base, eps, fd = p.numpy().copy(), 1e-6, np.zeros((2, 3))

        def value(a, p=p):
            with fg.no_grad():
                ws = fg.tensor(a) if p is w else w.detach()
                vs = fg.tensor(a) if p is v else v.detach()
                h = ws * 1.5
                write(h, vs)
                return float((h * h).sum().item())

        for i in np.ndindex(2, 3):
            up, down = base.copy(), base.copy()
            up[i] += eps
            down[i] -= eps
            fd[i] = (value(up) - value(down)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def _drop_path(lib, x, p):
    """torchvision's stochastic_depth in "row" mode, as its source writes it."""
    survival = 1.0 - p
    noise = lib.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype)
    noise = noise.bernoulli_(survival)
    noise.div_(survival)
    return x * noise


def test_stochastic_depth_draws_a_fresh_mask_on_every_traced_call():
    # bernoulli_ drew from a numpy stream, which fg.trace refuses (TraceError)
    x = fg.ones(400, 2, dtype=fg.float64)

    def step(x):
        return _drop_path(fg, x, 0.25)

    traced = fg.trace(step)
    fg.manual_seed(3)
    eager_draws = [step(x).numpy() for _ in range(3)]
    fg.manual_seed(3)
    traced_draws = [traced(x).numpy() for _ in range(3)]
    for e, t in zip(eager_draws, traced_draws):
        np.testing.assert_array_equal(t, e)  # the eager draws, replayed by the graph
        assert set(np.unique(t).round(6)) == {0.0, round(1 / 0.75, 6)}
        assert (t == t[:, :1]).all()  # one draw per row
        assert 0.15 < (t[:, 0] == 0).mean() < 0.35
    assert not np.array_equal(traced_draws[0], traced_draws[1])


def test_bernoulli_inplace_checks_p_and_takes_a_tensor_p_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, fg):
        for bad in (1.5, -0.1, float("nan")):
            with pytest.raises(RuntimeError, match="bernoulli_"):
                lib.zeros(3).bernoulli_(bad)
        with pytest.raises(RuntimeError):
            lib.zeros(2, 3).bernoulli_(lib.ones(4))  # p does not broadcast to (2, 3)
        rows = lib.zeros(2, 3).bernoulli_(lib.tensor([[0.0], [1.0]]))
        np.testing.assert_array_equal(np.asarray(rows.tolist()), [[0, 0, 0], [1, 1, 1]])
        ints = lib.zeros(2, 3, dtype=lib.int64).bernoulli_(1.0)
        assert str(ints.dtype).endswith("int64") and ints.tolist() == [[1, 1, 1]] * 2
    with pytest.raises(TypeError, match="bernoulli_"):
        fg.zeros(3).bernoulli_("0.5")
    fg.manual_seed(0)
    draws = fg.zeros(20000, dtype=fg.float64).bernoulli_(0.3).numpy()
    assert set(np.unique(draws)) == {0.0, 1.0} and abs(draws.mean() - 0.3) < 0.02


def test_fx_and_onnx_are_reached_as_attributes_of_the_package():
    # torchvision's model files call torch.fx.wrap(...) at import and
    # torch.onnx.is_in_onnx_export() in forward, after only `import torch`
    code = (
        "import ferrograd as fg\n"
        "assert fg.fx.wrap('pad') == 'pad'\n"
        "assert fg.onnx.is_in_onnx_export() is False\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env={**os.environ, "PYTHONPATH": PYTHON_DIR},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("ReLU6", ()),
        ("Hardswish", ()),
        ("Hardsigmoid", ()),
        ("SELU", ()),
        ("CELU", (0.7,)),
        ("Mish", ()),
        ("Threshold", (0.1, -2.0)),
    ],
)
def test_inplace_activation_layers_write_their_input_as_torch(name, args):
    # MobileNet's ReLU6(inplace=True) and Hardswish(inplace=True) returned a new tensor
    # and left the input as it was; F.selu(x, inplace=True) left elu(x) in x
    torch = pytest.importorskip("torch")
    base = np.array([-4.0, -3.0, -1.0, 0.05, 0.5, 2.0, 3.0, 7.0])
    seen = {}
    for lib in (torch, fg):
        w = lib.tensor(base, dtype=lib.float64, requires_grad=True)
        h = w * 1.5
        out = getattr(lib.nn, name)(*args, inplace=True)(h)
        assert out is h
        (out * out).sum().backward()
        seen[lib] = (h.detach().numpy().copy(), w.grad.numpy().copy())
        with pytest.raises(RuntimeError):  # a leaf that requires grad is refused
            getattr(lib.nn, name)(*args, inplace=True)(lib.tensor(base, requires_grad=True))
    np.testing.assert_allclose(seen[fg][0], seen[torch][0], rtol=1e-12)
    # PyTorch's hardsigmoid and celu backward round their constants (1/6, 1/alpha) to
    # float32 even for float64 tensors: ferrograd's exact gradient differs by ~1e-8
    np.testing.assert_allclose(seen[fg][1], seen[torch][1], rtol=1e-7)
    x = fg.tensor(base)
    assert fg.nn.functional.selu(x, inplace=True) is x
    np.testing.assert_allclose(
        x.numpy(), torch.nn.functional.selu(torch.tensor(base)).numpy(), rtol=1e-12
    )


def test_a_product_reading_an_inplace_silu_output_traces_in_a_long_step():
    # the value silu_ wrote was the node of silu's own result, which the trace released
    # (silu's rule keeps only its input); a squeeze-excitation product reading it after a
    # release sweep raised TraceError in the traced backward
    fg.manual_seed(0)
    nn, F = fg.nn, fg.nn.functional
    convs = [nn.Conv2d(8, 8, 1, bias=False).double() for _ in range(4)]
    bns = [nn.BatchNorm2d(8).double() for _ in range(2)]
    fc1, fc2 = nn.Conv2d(8, 2, 1).double(), nn.Conv2d(2, 8, 1).double()
    params = [p for m in (*convs, *bns, fc1, fc2) for p in m.parameters()]

    def step(x):
        for p in params:
            p.grad = None
        h = x
        for i in range(2):
            a = F.silu(bns[i](convs[2 * i](h)), inplace=True)
            s = fc2(F.silu(fc1(a.mean((2, 3), keepdim=True)), inplace=True)).sigmoid()
            r = convs[2 * i + 1](s * a)
            r += h
            h = r
        (h**2).sum().backward()
        return [p.grad.clone() for p in params]

    x = fg.tensor(np.random.default_rng(0).standard_normal((2, 8, 4, 4)))
    for b in bns:
        b.eval()  # running statistics left alone: every call sees the same model
    eager = [g.numpy() for g in step(x)]
    traced = fg.trace(step)
    for _ in range(2):
        for got, want in zip(traced(x), eager):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
