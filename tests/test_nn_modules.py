"""fg.nn modules: parameter discovery, names, state dicts, modes, moving, init, clipping; and
PyTorch programs ported by renaming, run from the same weights, compared in float64."""

from __future__ import annotations

import math
from collections import OrderedDict

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [nn.Linear(2, 3), nn.Linear(3, 3)]  # a plain list
        self.heads = {"a": nn.Linear(3, 1), "b": (nn.Linear(3, 2),)}  # dict holding a tuple
        self.scale = nn.Parameter(fg.ones(1))
        self.table = {"deep": [[nn.Parameter(fg.zeros(2))]]}
        self.register_buffer("steps", fg.zeros((), dtype="int64"))


def test_parameters_found_at_any_depth_with_pytorch_names():
    m = Nested()
    names = [n for n, _ in m.named_parameters()]
    assert names == [
        "scale",
        "table.deep.0.0",
        "blocks.0.weight",
        "blocks.0.bias",
        "blocks.1.weight",
        "blocks.1.bias",
        "heads.a.weight",
        "heads.a.bias",
        "heads.b.0.weight",
        "heads.b.0.bias",
    ]
    assert len(m.parameters()) == 10
    assert [n for n, _ in m.named_buffers()] == ["steps"]
    assert [n for n, _ in m.named_modules()] == ["", "blocks.0", "blocks.1", "heads.a", "heads.b.0"]
    assert len(list(m.children())) == 4
    sd = m.state_dict()
    assert set(sd) == set(names) | {"steps"}


def test_containers_and_sequential_names():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    assert isinstance(named.fc, nn.Linear) and len(named) == 2 and isinstance(seq[1], nn.ReLU)
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.Linear(1, 2))
    assert len(ml) == 4 and len(ml.parameters()) == 8
    md = nn.ModuleDict({"x": nn.Linear(1, 1)})
    md["y"] = nn.Linear(1, 1)
    assert [n for n, _ in md.named_parameters()] == ["x.weight", "x.bias", "y.weight", "y.bias"]
    pl = nn.ParameterList([fg.zeros(2), fg.ones(3)])
    pd = nn.ParameterDict({"a": fg.zeros(1)})
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    assert all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pd.named_parameters()] == ["a"]


def test_tied_weights_and_shared_modules_counted_once():
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(5, 4)
            self.lm_head = nn.Linear(4, 5, bias=False)
            self.lm_head.weight = self.wte.weight  # ties: the same (5, 4) layout

    m = LM()
    assert m.lm_head.weight.shape == m.wte.weight.shape == (5, 4)
    assert len(m.parameters()) == 1
    assert set(m.state_dict()) == {"wte.weight", "lm_head.weight"}  # both keys, as PyTorch


def test_state_dict_roundtrip_and_strict():
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    w = b.weight
    b.load_state_dict({"weight": np.zeros((2, 3)), "bias": [1.0, 2.0]})
    assert b.weight is w  # in place
    assert b.weight.numpy().sum() == 0 and b.bias.numpy().tolist() == [1.0, 2.0]
    with pytest.raises(KeyError, match="Missing key"):
        b.load_state_dict({"weight": np.zeros((2, 3))})
    res = b.load_state_dict({"weight": np.ones((2, 3)), "extra": 1.0}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]
    with pytest.raises(fg.ShapeError, match="weight"):
        b.load_state_dict({"weight": np.zeros((3, 3)), "bias": [0.0, 0.0]})


def test_train_eval_apply_zero_grad_to():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.BatchNorm1d(2))
    m.eval()
    assert not m.training and not m[1].training and not m[2].training
    m.train()
    assert m[2].training
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "Dropout", "BatchNorm1d", "Sequential"]
    for p in m.parameters():
        p.grad = fg.ones_like(p)
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.to(fg.float64)
    assert all(p.dtype == fg.float64 for p in m.parameters())
    assert m[2].running_mean.dtype == fg.float64
    assert m[2].num_batches_tracked.dtype == fg.int64  # integer buffers keep their dtype
    assert isinstance(m[0].weight, nn.Parameter)


def test_init_functions():
    fg.manual_seed(0)
    w = fg.zeros(300, 200)
    nn.init.xavier_uniform_(w)
    a = math.sqrt(6 / 500)
    v = w.numpy()
    assert v.min() >= -a and v.max() <= a and abs(v.std() - a / math.sqrt(3)) < 0.01
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 200)) < 0.005
    nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert np.abs(w.numpy()).max() <= 0.5
    q = fg.zeros(4, 6, dtype="float64")
    nn.init.orthogonal_(q)
    np.testing.assert_allclose(q.numpy() @ q.numpy().T, np.eye(4), atol=1e-12)
    nn.init.constant_(q, 3.0)
    assert q.numpy().min() == 3.0
    nn.init.zeros_(q)
    assert q.numpy().max() == 0.0
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    fg.manual_seed(5)
    l1 = nn.Linear(4, 3)
    fg.manual_seed(5)
    l2 = nn.Linear(4, 3)
    np.testing.assert_array_equal(l1.weight.numpy(), l2.weight.numpy())  # seeded
    assert np.abs(l1.weight.numpy()).max() <= 0.5  # PyTorch's bound 1/sqrt(fan_in)


def test_clip_grad_norm_and_value():
    ps = [nn.Parameter(fg.zeros(3, dtype="float64")), nn.Parameter(fg.zeros(4, dtype="float64"))]
    ps[0].grad = fg.tensor([3.0, 0.0, 0.0], dtype="float64")
    ps[1].grad = fg.tensor([0.0, 4.0, 0.0, 0.0], dtype="float64")
    total = nn.utils.clip_grad_norm_(ps, 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(ps[0].grad.numpy(), [3 / 5.000001, 0, 0], rtol=1e-6)
    nn.utils.clip_grad_value_(ps, 0.1)
    assert ps[1].grad.numpy().max() == pytest.approx(0.1)
    assert nn.utils.clip_grad_norm_(ps, 10.0, norm_type=math.inf).item() == pytest.approx(0.1)


def test_layers_run_and_shapes():
    fg.manual_seed(0)
    x = fg.randn(2, 3, 8, 8)
    assert nn.Conv2d(3, 4, 3, padding=1)(x).shape == (2, 4, 8, 8)
    assert nn.ConvTranspose2d(3, 2, 2, stride=2)(x).shape == (2, 2, 16, 16)
    assert nn.Conv1d(3, 5, 3)(fg.randn(2, 3, 10)).shape == (2, 5, 8)
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 4, 4)
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    assert nn.Flatten()(x).shape == (2, 192)
    assert nn.Unflatten(1, (3, 64))(nn.Flatten()(x)).shape == (2, 3, 64)
    assert nn.GroupNorm(1, 3)(x).shape == x.shape
    assert nn.Embedding(10, 4)(fg.tensor([[1, 2, 3]])).shape == (1, 3, 4)
    assert nn.Identity()(x) is x
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    out, w = mha(fg.randn(2, 5, 8), fg.randn(2, 7, 8), fg.randn(2, 7, 8))
    assert out.shape == (2, 5, 8) and w.shape == (2, 5, 7)
    with pytest.raises(ValueError, match="MultiheadAttention"):
        nn.MultiheadAttention(7, 2)
    with pytest.raises(fg.ShapeError, match="BatchNorm2d"):
        nn.BatchNorm2d(3)(fg.randn(2, 3))


# ----------------------------------------------------------------- ported PyTorch programs


def _programs(lib):
    """Three PyTorch-style models written once against a namespace with torch's names."""
    tnn = lib.nn
    F = lib.nn.functional

    class MLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.net = tnn.Sequential(
                tnn.Linear(6, 16), tnn.GELU(), tnn.Linear(16, 16), tnn.Tanh(), tnn.Linear(16, 3)
            )

        def forward(self, x):
            return self.net(x)

    class CNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 4, 3, padding=1)
            self.bn = tnn.BatchNorm2d(4)
            self.conv2 = tnn.Conv2d(4, 6, 3, stride=2)
            self.pool = tnn.AdaptiveAvgPool2d((2, 2))
            self.fc = tnn.Linear(24, 3)

        def forward(self, x):
            x = F.relu(self.bn(self.conv1(x)))
            x = F.max_pool2d(x, 2) + F.avg_pool2d(x, 2)
            x = F.leaky_relu(self.conv2(x), 0.1)
            x = self.pool(x).flatten(1)
            return self.fc(x)

    class Block(tnn.Module):
        def __init__(self, d=8, h=2):
            super().__init__()
            self.ln1 = tnn.LayerNorm(d)
            self.attn = tnn.MultiheadAttention(d, h, batch_first=True)
            self.ln2 = tnn.LayerNorm(d)
            self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(), tnn.Linear(4 * d, d))
            self.wte = tnn.Embedding(11, d)
            self.head = tnn.Linear(d, 11, bias=False)
            self.head.weight = self.wte.weight

        def forward(self, idx):
            x = self.wte(idx)
            a = self.ln1(x)
            y, _ = self.attn(
                a, a, a, need_weights=False, is_causal=True, attn_mask=_causal(lib, idx.shape[1])
            )
            x = x + y
            x = x + self.mlp(self.ln2(x))
            return self.head(x)

    return MLP, CNN, Block


def _causal(lib, n):
    m = np.triu(np.ones((n, n), dtype=bool), 1)
    return lib.tensor(m)


def _to64(model, lib):
    return model.double() if lib.__name__ == "torch" else model.to(fg.float64)


@pytest.mark.parametrize("which", ["MLP", "CNN", "Block"])
def test_ported_pytorch_program_matches(which):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = _to64(dict(zip(["MLP", "CNN", "Block"], _programs(torch)))[which](), torch)
    fm = _to64(dict(zip(["MLP", "CNN", "Block"], _programs(fg)))[which](), fg)
    # the same initial weights, through the state dicts (names and layouts agree)
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    fm.load_state_dict(sd)
    rng = np.random.default_rng(1)
    if which == "MLP":
        x = rng.normal(size=(5, 6))
        y = rng.integers(0, 3, 5)
    elif which == "CNN":
        x = rng.normal(size=(4, 1, 8, 8))
        y = rng.integers(0, 3, 4)
    else:
        x = rng.integers(0, 11, (2, 5))
        y = rng.integers(0, 11, (2, 5))

    def loss_of(lib, model):
        out = model(lib.tensor(x))
        if which == "Block":
            return lib.nn.functional.cross_entropy(
                out.reshape(-1, 11), lib.tensor(y.reshape(-1)), label_smoothing=0.1
            )
        return lib.nn.functional.cross_entropy(out, lib.tensor(y))

    tl = loss_of(torch, tm)
    tl.backward()
    gm = fg.GradManager().attach(fm.parameters())
    with gm:
        fl = loss_of(fg, fm)
        gm.backward(fl)
    assert fl.item() == pytest.approx(tl.item(), rel=1e-10)
    tgrads = dict(tm.named_parameters())
    for name, p in fm.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), tgrads[name].grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name
        )
    # running statistics move the same way
    for name, b in fm.named_buffers():
        np.testing.assert_allclose(b.numpy(), dict(tm.named_buffers())[name].numpy(), rtol=1e-10)


def test_linear_weight_gradient_is_contiguous_and_right():
    # the weight is used as a transposed view; its gradient comes out in the weight's own
    # layout (as PyTorch's), so optimizers and bucketing copy it as one block
    torch = pytest.importorskip("torch")
    m = fg.nn.Linear(5, 3).to(fg.float64)
    x = np.random.default_rng(0).standard_normal((4, 5))
    gm = fg.GradManager().attach(m.parameters())
    with gm:
        gm.backward((m(fg.tensor(x)) ** 2).sum())
    assert m.weight.grad.is_contiguous()
    tm = torch.nn.Linear(5, 3).double()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(m.weight.numpy()))
        tm.bias.copy_(torch.tensor(m.bias.numpy()))
    (tm(torch.tensor(x)) ** 2).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(m.bias.grad.numpy(), tm.bias.grad.numpy(), rtol=1e-12)


def test_printing_a_model_reads_as_pytorch():
    torch = pytest.importorskip("torch")

    def build(nn):
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 2),
            nn.Dropout(0.1),
            nn.Embedding(5, 3, padding_idx=0),
            nn.ConvTranspose2d(2, 3, 2, stride=2, output_padding=1),
            nn.GELU(),
            nn.LeakyReLU(0.2),
            nn.AvgPool2d(2),
            nn.Conv1d(2, 3, 3, bias=False, dilation=2),
            nn.Conv3d(2, 4, 3, padding="same"),
            nn.Softmax(dim=1),
        )

    assert str(build(fg.nn)) == str(build(torch.nn))


def test_a_linear_weight_gradient_is_contiguous_for_inputs_of_any_rank():
    # (B, T, K) inputs: the batch axes merge into one product, whose result has the weight's
    # own layout, so optimizers take their one-pass update; values as torch's
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for shape in [(6, 4), (2, 3, 4), (2, 2, 3, 4)]:
        x = rng.standard_normal(shape)
        lin = nn.Linear(4, 5, dtype="float64")
        tl = torch.nn.Linear(4, 5).double()
        tl.load_state_dict({k: torch.tensor(v.numpy()) for k, v in lin.state_dict().items()})
        g = rng.standard_normal((*shape[:-1], 5))
        (lin(fg.tensor(x)) * fg.tensor(g)).sum().backward()
        (tl(torch.tensor(x)) * torch.tensor(g)).sum().backward()
        assert lin.weight.grad.is_contiguous()
        np.testing.assert_allclose(lin.weight.grad.numpy(), tl.weight.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(lin.bias.grad.numpy(), tl.bias.grad.numpy(), rtol=1e-12)
