"""PyTorch's recurrent and transformer layers and the smaller layers, ported by renaming: the
same state dict gives the same outputs and gradients as torch.nn (float64); deepcopy and
pickle of models, as PyTorch programs use them (target networks, EMA, best checkpoints)."""

from __future__ import annotations

import copy
import pickle

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
rng = np.random.default_rng(5)


def _pair(make):
    """The same layer in both libraries, torch's weights copied into ferrograd's."""
    torch.manual_seed(0)
    t = make(torch.nn).double()
    f = make(fg.nn)
    sd = {k: fg.tensor(v.detach().numpy()) for k, v in t.state_dict().items()}
    assert sorted(sd) == sorted(f.state_dict()), (sorted(sd), sorted(f.state_dict()))
    f.load_state_dict(sd)
    f.to(fg.float64)
    t.eval()
    f.eval()
    return f, t


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _check(f, t, inputs, fm=None, tm=None):
    """Outputs, input gradients and (for modules ``fm``/``tm``, by default ``f``/``t``)
    parameter gradients of a weighted sum of the first output agree."""
    fm = f if fm is None else fm
    tm = t if tm is None else tm
    fx = [fg.tensor(a, requires_grad=True) for a in inputs]
    tx = [torch.tensor(a, requires_grad=True) for a in inputs]
    fo, to = _flat(f(*fx)), _flat(t(*tx))
    assert len(fo) == len(to)
    for a, b in zip(fo, to):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = rng.standard_normal(tuple(to[0].shape))
    (fo[0] * fg.tensor(w)).sum().backward()
    (to[0] * torch.tensor(w)).sum().backward()
    for a, b in zip(fx, tx):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)
    fp = dict(fm.named_parameters())
    for name, p in tm.named_parameters():
        if p.grad is None:
            continue
        assert fp[name].grad is not None, name
        np.testing.assert_allclose(fp[name].grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-11)


SEQ = rng.standard_normal((5, 2, 3))  # (L, N, H_in)


@pytest.mark.parametrize(
    "make,inputs",
    [
        (lambda nn: nn.LSTM(3, 4), (SEQ,)),
        (lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True), (SEQ,)),
        (lambda nn: nn.LSTM(3, 4, batch_first=True), (SEQ.transpose(1, 0, 2).copy(),)),
        (lambda nn: nn.GRU(3, 4, num_layers=2), (SEQ,)),
        (lambda nn: nn.GRU(3, 4, bidirectional=True, bias=False), (SEQ[:, 0].copy(),)),
        (lambda nn: nn.RNN(3, 4, nonlinearity="relu"), (SEQ,)),
        (lambda nn: nn.RNN(3, 4, num_layers=3), (SEQ,)),
    ],
    ids=[
        "lstm",
        "lstm-2-bidir",
        "lstm-batch-first",
        "gru-2",
        "gru-bidir-unbatched",
        "rnn-relu",
        "rnn-3",
    ],
)
def test_recurrent_layers_match_torch(make, inputs):
    f, t = _pair(make)
    _check(f, t, inputs)


def test_recurrent_initial_state_and_final_states():
    f, t = _pair(lambda nn: nn.LSTM(3, 4, num_layers=2))
    h0 = rng.standard_normal((2, 2, 4))
    c0 = rng.standard_normal((2, 2, 4))
    fo, (fh, fc) = f(fg.tensor(SEQ), (fg.tensor(h0), fg.tensor(c0)))
    to, (th, tc) = t(torch.tensor(SEQ), (torch.tensor(h0), torch.tensor(c0)))
    for a, b in ((fo, to), (fh, th), (fc, tc)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10)
    g, _ = _pair(lambda nn: nn.GRU(3, 4))
    with pytest.raises(fg.ShapeError, match="h_0 must have shape"):
        g(fg.tensor(SEQ), fg.zeros(2, 2, 4, dtype="float64"))
    with pytest.raises(fg.ShapeError, match="GRU: input must be"):
        g(fg.tensor(SEQ[..., :2].copy()))


@pytest.mark.parametrize(
    "make,inputs",
    [
        (lambda nn: nn.LSTMCell(3, 4), (SEQ[0], SEQ[1, :, :].repeat(2, 1)[:, :4].copy())),
        (lambda nn: nn.GRUCell(3, 4), (SEQ[0], rng.standard_normal((2, 4)))),
        (lambda nn: nn.RNNCell(3, 4, nonlinearity="relu"), (SEQ[0], rng.standard_normal((2, 4)))),
    ],
    ids=["lstm-cell", "gru-cell", "rnn-cell"],
)
def test_cells_match_torch(make, inputs):
    f, t = _pair(make)
    if isinstance(f, fg.nn.LSTMCell):
        c = rng.standard_normal((2, 4))

        def run(m, x, h, lib=None):
            lib = fg if isinstance(m, fg.nn.Module) else torch
            return m(x, (h, lib.tensor(c)))

        _check(lambda x, h: run(f, x, h), lambda x, h: run(t, x, h), inputs, f, t)
    else:
        _check(f, t, inputs)


SRC = rng.standard_normal((2, 5, 8))  # (N, S, E) batch first
TGT = rng.standard_normal((2, 4, 8))


@pytest.mark.parametrize(
    "make,inputs,kw",
    [
        (lambda nn: nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), (SRC,), {}),
        (
            lambda nn: nn.TransformerEncoderLayer(
                8, 2, 16, 0.0, "gelu", batch_first=True, norm_first=True
            ),
            (SRC,),
            {"is_causal": True, "src_mask": "causal"},
        ),
        (
            lambda nn: nn.TransformerEncoder(
                nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2
            ),
            (SRC,),
            {},
        ),
        (lambda nn: nn.TransformerDecoderLayer(8, 2, 16, 0.0, batch_first=True), (TGT, SRC), {}),
        (
            lambda nn: nn.Transformer(8, 2, 1, 1, 16, 0.0, batch_first=True),
            (SRC, TGT),
            {"tgt_mask": "causal4"},
        ),
    ],
    ids=[
        "encoder-layer",
        "encoder-layer-prenorm-causal",
        "encoder",
        "decoder-layer",
        "transformer",
    ],
)
def test_transformer_layers_match_torch(make, inputs, kw):
    f, t = _pair(make)

    def masks(lib):
        out = {}
        for k, v in kw.items():
            if v == "causal":
                out[k] = lib.nn.Transformer.generate_square_subsequent_mask(5, dtype=lib.float64)
            elif v == "causal4":
                out[k] = lib.nn.Transformer.generate_square_subsequent_mask(4, dtype=lib.float64)
            else:
                out[k] = v
        return out

    fk, tk = masks(fg), masks(torch)
    _check(lambda *xs: f(*xs, **fk), lambda *xs: t(*xs, **tk), inputs, f, t)


@pytest.mark.parametrize(
    "make,shape",
    [
        (lambda nn: nn.ReLU6(), (2, 3)),
        (lambda nn: nn.Hardswish(), (2, 3)),
        (lambda nn: nn.Mish(), (2, 3)),
        (lambda nn: nn.CELU(0.5), (2, 3)),
        (lambda nn: nn.GLU(), (2, 4)),
        (lambda nn: nn.Softmin(dim=1), (2, 3)),
        (lambda nn: nn.PReLU(3), (2, 3, 4)),
        (lambda nn: nn.RMSNorm(4), (2, 3, 4)),
        (lambda nn: nn.MaxPool1d(2), (2, 3, 6)),
        (lambda nn: nn.AvgPool1d(3, 1, 1), (2, 3, 6)),
        (lambda nn: nn.AdaptiveAvgPool1d(2), (2, 3, 6)),
        (lambda nn: nn.ZeroPad2d((1, 0, 2, 1)), (1, 2, 3, 3)),
        (lambda nn: nn.ReflectionPad2d(1), (1, 2, 3, 3)),
        (lambda nn: nn.PixelShuffle(2), (1, 8, 2, 2)),
        (lambda nn: nn.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 3)),
    ],
    ids=lambda v: "" if callable(v) else str(v),
)
def test_small_layers_match_torch(make, shape):
    f, t = _pair(make)
    _check(f, t, (rng.standard_normal(shape),))


def test_loss_modules_match_torch():
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    y = np.where(rng.standard_normal(4) > 0, 1.0, -1.0)
    for name, args in [
        ("HuberLoss", (a, b)),
        ("TripletMarginLoss", (a, b, b[::-1].copy())),
        ("CosineEmbeddingLoss", (a, b, y)),
        ("MarginRankingLoss", (a[:, 0].copy(), b[:, 0].copy(), y)),
        ("SoftMarginLoss", (a[:, 0].copy(), y)),
    ]:
        fl = getattr(fg.nn, name)()(*[fg.tensor(v) for v in args])
        tl = getattr(torch.nn, name)()(*[torch.tensor(v) for v in args])
        np.testing.assert_allclose(fl.item(), tl.item(), rtol=1e-12, err_msg=name)


def test_deepcopy_and_pickle_of_models():
    net = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.Tanh(), fg.nn.Linear(4, 1))
    x = fg.randn(5, 3)
    target = copy.deepcopy(net)  # a target network: same values, separate storage
    for p, q in zip(net.parameters(), target.parameters()):
        assert p is not q and isinstance(q, fg.nn.Parameter) and q.requires_grad
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    with fg.no_grad():
        for p in target.parameters():
            p.mul_(0.0)
    assert float(net(x).abs().sum()) > 0 and float(target(x).abs().sum()) == 0
    best = copy.deepcopy(net.state_dict())
    restored = pickle.loads(pickle.dumps(net))
    np.testing.assert_array_equal(restored(x).numpy(), net(x).numpy())
    net.load_state_dict(best)
    loss = net(x).sum()
    loss.backward()
    assert all(p.grad is not None for p in net.parameters())
    t = fg.tensor([1.0, 2.0], dtype="bfloat16")
    assert pickle.loads(pickle.dumps(t)).dtype == fg.bfloat16


def test_forward_hooks_get_parameter_and_parameter_vectors_match_torch():
    calls = []
    torch.manual_seed(0)
    sd = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    sd = {k: v.detach().numpy().copy() for k, v in sd.state_dict().items()}
    for lib in (fg, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Tanh(), lib.nn.Linear(3, 1))
        m.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
        seen = []
        h1 = m[1].register_forward_hook(
            lambda mod, args, out, seen=seen: seen.append(out.shape) or out * 2
        )
        h2 = m[0].register_forward_pre_hook(lambda mod, args: (args[0] + 1.0,))
        x = lib.tensor(np.ones((4, 2), np.float32))
        calls.append((m(x).detach().numpy().copy(), seen[:]))
        h1.remove()
        h2.remove()
        calls.append(m(x).detach().numpy().copy())
        w = m.get_parameter("2.weight")
        assert tuple(w.shape) == (1, 3)
        vec = lib.nn.utils.parameters_to_vector(m.parameters())
        assert tuple(vec.shape) == (13,)
        lib.nn.utils.vector_to_parameters(vec * 0.0, m.parameters())
        assert float(m[0].weight.detach().abs().sum()) == 0.0
    np.testing.assert_allclose(calls[0][0], calls[2][0], rtol=1e-6)
    assert [tuple(s) for s in calls[0][1]] == [tuple(s) for s in calls[2][1]]
    np.testing.assert_allclose(calls[1], calls[3], rtol=1e-6)


IMG = rng.standard_normal((2, 3, 5, 6))


@pytest.mark.parametrize(
    "make,inputs",
    [
        (lambda nn: nn.InstanceNorm2d(3), (IMG,)),
        (lambda nn: nn.InstanceNorm2d(3, affine=True), (IMG,)),
        (lambda nn: nn.InstanceNorm1d(3, affine=True), (IMG[:, :, 0].copy(),)),
        (lambda nn: nn.Unfold(2), (IMG,)),
        (lambda nn: nn.Unfold((2, 3), dilation=1, padding=1, stride=2), (IMG,)),
        (lambda nn: nn.Fold((5, 6), 2), (rng.standard_normal((2, 12, 20)),)),
        (
            lambda nn: nn.Fold((6, 7), (2, 3), padding=1, stride=2),
            (rng.standard_normal((2, 18, 16)),),
        ),
    ],
    ids=[
        "instance2d",
        "instance2d-affine",
        "instance1d",
        "unfold",
        "unfold-pad-stride",
        "fold",
        "fold-pad-stride",
    ],
)
def test_instance_norm_unfold_fold_match_torch(make, inputs):
    f, t = _pair(make)
    f.train()
    t.train()
    _check(f, t, inputs)


def test_instance_norm_running_stats_match_torch():
    f, t = _pair(lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True))
    f.train()
    t.train()
    for _ in range(2):
        f(fg.tensor(IMG))
        t(torch.tensor(IMG))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(
            getattr(f, name).numpy(), getattr(t, name).numpy(), rtol=1e-12, err_msg=name
        )
    f.eval()
    t.eval()
    _check(f, t, (IMG,))


@pytest.mark.parametrize(
    "make,inputs",
    [
        (
            lambda nn: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
            (IMG[:, :, 0].copy(),),
        ),
        (
            lambda nn: nn.ConvTranspose1d(4, 4, 2, groups=2, dilation=2),
            (rng.standard_normal((2, 4, 5)),),
        ),
        (lambda nn: nn.AdaptiveMaxPool2d((2, 3)), (IMG[:, :, :4].copy(),)),
        (lambda nn: nn.AdaptiveMaxPool2d((3, 4)), (IMG,)),
        (lambda nn: nn.AdaptiveMaxPool1d(4), (IMG[:, :, 0].copy(),)),
        (
            lambda nn: nn.Bilinear(3, 4, 5),
            (rng.standard_normal((6, 3)), rng.standard_normal((6, 4))),
        ),
        (lambda nn: nn.ChannelShuffle(2), (rng.standard_normal((2, 4, 3, 3)),)),
    ],
    ids=[
        "convT1d",
        "convT1d-groups-dilation",
        "adaptive-max-even",
        "adaptive-max-uneven",
        "adaptive-max-1d",
        "bilinear",
        "channel-shuffle",
    ],
)
def test_more_layers_match_torch(make, inputs):
    f, t = _pair(make)
    _check(f, t, inputs)


def test_padding_and_packing_sequences_match_torch():
    seqs = [rng.standard_normal((n, 3)) for n in (4, 2, 5)]
    for batch_first in (False, True):
        fp = fg.nn.utils.rnn.pad_sequence([fg.tensor(s) for s in seqs], batch_first, -1.0)
        tp = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -1.0)
        np.testing.assert_array_equal(fp.numpy(), tp.numpy())
    padded = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs]).numpy()
    fpk = fg.nn.utils.rnn.pack_padded_sequence(fg.tensor(padded), [4, 2, 5], enforce_sorted=False)
    tpk = torch.nn.utils.rnn.pack_padded_sequence(
        torch.tensor(padded), [4, 2, 5], enforce_sorted=False
    )
    np.testing.assert_array_equal(fpk.data.numpy(), tpk.data.numpy())
    np.testing.assert_array_equal(fpk.batch_sizes.numpy(), tpk.batch_sizes.numpy())
    np.testing.assert_array_equal(fpk.sorted_indices.numpy(), tpk.sorted_indices.numpy())
    back, lens = fg.nn.utils.rnn.pad_packed_sequence(fpk, batch_first=True)
    tback, tlens = torch.nn.utils.rnn.pad_packed_sequence(tpk, batch_first=True)
    np.testing.assert_array_equal(back.numpy(), tback.numpy())
    np.testing.assert_array_equal(lens.numpy(), tlens.numpy())
    with pytest.raises(RuntimeError, match="decreasing"):
        fg.nn.utils.rnn.pack_padded_sequence(fg.tensor(padded), [4, 2, 5])


@pytest.mark.parametrize(
    "make",
    [lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True), lambda nn: nn.GRU(3, 4)],
    ids=["lstm-2-bidir", "gru"],
)
def test_recurrent_layers_on_packed_sequences_match_torch(make):
    f, t = _pair(make)
    seqs = [rng.standard_normal((n, 3)) for n in (4, 2, 5)]
    outs = []
    for lib, m in ((fg, f), (torch, t)):
        xs = [lib.tensor(s, requires_grad=True) for s in seqs]
        pk = lib.nn.utils.rnn.pack_sequence(xs, enforce_sorted=False)
        out, hid = m(pk)
        padded, lens = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        h = hid[0] if isinstance(hid, tuple) else hid
        (padded.sum() + (h * h).sum()).backward()
        grads = [x.grad for x in xs] + [p.grad for _, p in m.named_parameters()]
        outs.append([padded, h, lens, *grads])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    x = rng.standard_normal((2, 3, 5, 6))
    grid = rng.uniform(-1.2, 1.2, (2, 4, 7, 2))  # some points outside the image
    got = []
    for lib in (fg, torch):
        xt, gt = lib.tensor(x, requires_grad=True), lib.tensor(grid, requires_grad=True)
        y = lib.nn.functional.grid_sample(xt, gt, mode, padding_mode, align_corners)
        w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        gg = gt.grad.numpy() if gt.grad is not None else np.zeros(grid.shape)
        got.append((y.detach().numpy(), xt.grad.numpy(), gg))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_spatial_transformer_affine_grid_matches_torch():
    # the spatial transformer tutorial's sampler: affine_grid then grid_sample
    x = rng.standard_normal((2, 3, 5, 6))
    theta = np.array([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.05]], [[1.2, 0, -0.2], [0.3, 0.8, 0.1]]])
    got = []
    for lib in (fg, torch):
        xt, tt = lib.tensor(x, requires_grad=True), lib.tensor(theta, requires_grad=True)
        grid = lib.nn.functional.affine_grid(tt, (2, 3, 4, 7), align_corners=False)
        y = lib.nn.functional.grid_sample(xt, grid, align_corners=False)
        (y * y).sum().backward()
        got.append((grid.detach().numpy(), y.detach().numpy(), xt.grad.numpy(), tt.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    g = fg.nn.functional.affine_grid(fg.tensor(theta), (2, 3, 4, 7), align_corners=True)
    tg = torch.nn.functional.affine_grid(torch.tensor(theta), (2, 3, 4, 7), align_corners=True)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(fg.ShapeError, match="affine_grid"):
        fg.nn.functional.affine_grid(fg.tensor(theta), (3, 3, 4, 7))


IMG5 = rng.standard_normal((2, 5, 4, 4))
LOGITS = rng.standard_normal((4, 6))


class _Fn:
    """A functional as a (parameterless) module for ``_pair``/``_check``."""

    def __init__(self, lib, fn):
        self.lib, self.fn = lib, fn

    def __call__(self, *xs):
        return self.fn(self.lib, *xs)

    def named_parameters(self):
        return iter(())


@pytest.mark.parametrize(
    "make,inputs",
    [
        (lambda nn: nn.Threshold(0.1, -2.0), (IMG5,)),
        (lambda nn: nn.Hardshrink(0.3), (IMG5,)),
        (lambda nn: nn.Softshrink(0.3), (IMG5,)),
        (lambda nn: nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0), (IMG5,)),
        (lambda nn: nn.LocalResponseNorm(2), (IMG5[:, :, :, 0].copy(),)),
        (lambda nn: nn.UpsamplingNearest2d(scale_factor=2), (IMG5,)),
        (lambda nn: nn.UpsamplingBilinear2d(size=(7, 6)), (IMG5,)),
        (lambda nn: nn.Softmax2d(), (IMG5,)),
        (lambda nn: nn.CircularPad2d((1, 2, 0, 1)), (IMG5,)),
        (lambda nn: nn.CircularPad1d(2), (IMG5[:, :, 0].copy(),)),
        (lambda nn: nn.ReplicationPad1d((1, 3)), (IMG5[:, :, 0].copy(),)),
        (lambda nn: nn.ZeroPad1d(2), (IMG5[:, :, 0].copy(),)),
    ],
)
def test_threshold_shrink_norm_and_padding_layers_match_torch(make, inputs):
    f, t = _pair(make)
    _check(f, t, inputs)


@pytest.mark.parametrize(
    "fn,inputs",
    [
        (lambda m, x, w: m.nn.functional.prelu(x, w), (IMG5, rng.standard_normal(5))),
        (lambda m, x, w: m.nn.functional.prelu(x, w[:1]), (IMG5, rng.standard_normal(5))),
        (lambda m, x: m.nn.functional.pdist(x), (LOGITS,)),
        (lambda m, x: m.nn.functional.pdist(x, p=1.5), (LOGITS,)),
        (
            lambda m, x: m.nn.functional.multi_margin_loss(x, m.tensor([0, 5, 2, 2])),
            (LOGITS,),
        ),
        (
            lambda m, x: m.nn.functional.multi_margin_loss(
                x,
                m.tensor([1, 0, 3, 2]),
                p=2,
                margin=0.5,
                weight=m.tensor(np.linspace(0.5, 1.5, 6)),
                reduction="sum",
            ),
            (LOGITS,),
        ),
        (
            lambda m, x: m.nn.functional.multilabel_soft_margin_loss(
                x, (x.detach() > 0).to(x.dtype)
            ),
            (LOGITS,),
        ),
        (lambda m, x: m.nn.functional.interpolate(x, scale_factor=2, mode="nearest"), (IMG5,)),
        (lambda m, x: m.nn.functional.threshold(x, 0.2, 7.0), (IMG5,)),
    ],
)
def test_more_functionals_match_torch(fn, inputs):
    _check(_Fn(fg, fn), _Fn(torch, fn), inputs)


def test_inplace_functionals_write_their_input():
    for name in ("relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_"):
        a = rng.standard_normal(6)
        x, tx = fg.tensor(a), torch.tensor(a)
        out = getattr(fg.nn.functional, name)(x)
        getattr(torch.nn.functional, name)(tx)
        assert out is x, name
        np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-12, err_msg=name)


def test_gumbel_softmax_and_alpha_dropout_statistics():
    fg.manual_seed(0)
    x = fg.zeros(20000, 3)
    y = fg.nn.functional.gumbel_softmax(x, tau=0.5)
    np.testing.assert_allclose(y.sum(-1).numpy(), 1.0, rtol=1e-6)
    # with equal logits every class wins about a third of the time
    hard = fg.nn.functional.gumbel_softmax(x, hard=True)
    assert set(np.unique(hard.numpy())) <= {0.0, 1.0}
    np.testing.assert_allclose(hard.numpy().mean(0), 1 / 3, atol=0.02)
    # straight-through: the hard sample's gradient is the soft sample's
    logits = fg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    (
        fg.nn.functional.gumbel_softmax(logits, hard=True) * fg.tensor([1.0, 2.0, 3.0])
    ).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0
    # alpha dropout keeps zero mean, unit variance of standard normal inputs
    z = fg.randn(200000)
    d = fg.nn.functional.alpha_dropout(z, 0.3, training=True)
    assert abs(d.mean().item()) < 0.02 and abs(d.std().item() - 1.0) < 0.02
    assert fg.nn.AlphaDropout(0.3).eval()(z) is not None


def test_rprop_and_cyclic_lr_match_torch():
    a = rng.standard_normal(5)
    results = []
    for lib in (fg, torch):
        p = lib.tensor(a.copy(), requires_grad=True)
        opt = lib.optim.Rprop([p], lr=0.05, etas=(0.4, 1.3), step_sizes=(1e-3, 0.2))
        for i in range(12):
            opt.zero_grad()
            ((p - 0.3) ** 2 * (1 + i % 3)).sum().backward()
            opt.step()
        results.append(p.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
    for mode in ("triangular", "triangular2", "exp_range"):
        seqs = []
        for lib in (fg, torch):
            p = lib.tensor(a.copy(), requires_grad=True)
            opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
            sch = lib.optim.lr_scheduler.CyclicLR(
                opt, 0.01, 0.1, step_size_up=3, step_size_down=2, mode=mode, gamma=0.9
            )
            seq = []
            for _ in range(14):
                seq.append((opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
                opt.step()
                sch.step()
            seqs.append(seq)
        np.testing.assert_allclose(seqs[0], seqs[1], rtol=1e-12, err_msg=mode)


def test_total_norm_and_clipping_with_it_match_torch():
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    out = []
    for lib in (fg, torch):
        ps = [lib.tensor(np.zeros_like(g), requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps], 3.0)
        lib.nn.utils.clip_grads_with_norm_(ps, 0.5, total)
        out.append([float(total)] + [p.grad.numpy().copy() for p in ps])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10)
