"""Layer options against torch.nn (float64, weights copied through state dicts both ways):
MultiheadAttention's kdim/vdim, add_bias_kv and add_zero_attn; LSTM's proj_size; instance
norm's running statistics and InstanceNorm3d; the lazy layers; EmbeddingBag's
include_last_offset and max_norm; the 3-D padding layers; nn.Buffer, nn.RNNBase and
nn.RNNCellBase."""

from __future__ import annotations

import copy
import pickle
import warnings

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = fg.nn
RNG = np.random.default_rng(11)


def _to_fg(sd):
    return {k: fg.tensor(v.detach().numpy()) for k, v in sd.items()}


def _to_torch(sd):
    return {k: torch.tensor(v.detach().numpy()) for k, v in sd.items()}


def _same_keys(f, t):
    fs, ts = f.state_dict(), t.state_dict()
    assert list(fs) == list(ts)
    for k in ts:
        assert tuple(fs[k].shape) == tuple(ts[k].shape), k


def _pair(make, eval_mode=True):
    """The same layer in both libraries (float64), torch's weights copied into ferrograd's;
    the state dict keys, their order and shapes agree."""
    torch.manual_seed(0)
    t = make(torch.nn).double()
    f = make(nn).to(fg.float64)
    _same_keys(f, t)
    f.load_state_dict(_to_fg(t.state_dict()))
    if eval_mode:
        t.eval()
        f.eval()
    return f, t


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [x for v in o for x in _flat(v)]
    return [o]


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def _check(f, t, inputs, call=None, **kw):
    """Outputs, and the gradients of a weighted sum of all outputs with respect to the
    inputs and every parameter, agree."""
    call = call if call is not None else (lambda m, xs, lib: m(*xs, **kw))
    fx = [fg.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    tx = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    fo = [o for o in _flat(call(f, fx, fg)) if o is not None]
    to = [o for o in _flat(call(t, tx, torch)) if o is not None]
    assert len(fo) == len(to)
    for a, b in zip(fo, to):
        assert tuple(a.shape) == tuple(b.shape)
        _close(a, b)
    ws = [RNG.standard_normal(tuple(o.shape)) for o in to]
    sum((o * fg.tensor(w)).sum() for o, w in zip(fo, ws)).backward()
    sum((o * torch.tensor(w)).sum() for o, w in zip(to, ws)).backward()
    for a, b in zip(fx, tx):
        if b.grad is not None:
            _close(a.grad, b.grad, 1e-9, 1e-11)
    fp = dict(f.named_parameters())
    for name, p in t.named_parameters():
        assert p.grad is not None, name
        _close(fp[name].grad, p.grad, 1e-9, 1e-11)
    return fo, to


# ------------------------------------------------------------------------ MultiheadAttention

L, S, N, E, H = 3, 4, 2, 4, 2


def _mha_inputs(kdim=E, vdim=E, batch_first=False, batched=True):
    shapes = [(L, N, E), (S, N, kdim), (S, N, vdim)]
    if not batched:
        shapes = [(s[0], s[2]) for s in shapes]
    elif batch_first:
        shapes = [(s[1], s[0], s[2]) for s in shapes]
    return [RNG.standard_normal(s) for s in shapes]


def _masks(kind):
    if kind == "none":
        return {}
    if kind == "bool2d":
        return {"attn_mask": np.triu(np.ones((L, S), bool), 2)}
    if kind == "float2d":
        return {"attn_mask": RNG.standard_normal((L, S))}
    if kind == "bool3d":
        m = RNG.random((N * H, L, S)) < 0.3
        m[:, :, 0] = False
        return {"attn_mask": m}
    if kind == "float3d":
        return {"attn_mask": RNG.standard_normal((N * H, L, S))}
    if kind == "kpm":
        return {"key_padding_mask": np.array([[False, True, False, True], [False] * S])}
    if kind == "kpm+float":
        return {
            "key_padding_mask": np.array([[0.0, -1.5, 0.0, 2.0], [0.0] * S]),
            "attn_mask": RNG.standard_normal((L, S)),
        }
    raise AssertionError(kind)


def _mha_call(masks, **kw):
    def call(m, xs, lib):
        return m(*xs, **{k: lib.tensor(v) for k, v in masks.items()}, **kw)

    return call


MHA_CONFIGS = {
    "plain": {},
    "kdim-vdim": {"kdim": 3, "vdim": 5},
    "bias-kv": {"add_bias_kv": True},
    "zero-attn": {"add_zero_attn": True},
    "all": {"kdim": 3, "vdim": 5, "add_bias_kv": True, "add_zero_attn": True},
    "all-no-bias": {
        "kdim": 3,
        "vdim": 5,
        "add_bias_kv": True,
        "add_zero_attn": True,
        "bias": False,
    },
}


@pytest.mark.parametrize("config", list(MHA_CONFIGS))
@pytest.mark.parametrize(
    "masks", ["none", "bool2d", "float2d", "bool3d", "float3d", "kpm", "kpm+float"]
)
def test_multihead_attention_options_match_torch(config, masks):
    kw = MHA_CONFIGS[config]
    f, t = _pair(lambda lib: lib.MultiheadAttention(E, H, dropout=0.2, **kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's warning on mixed mask types)
        _check(f, t, _mha_inputs(kw.get("kdim", E), kw.get("vdim", E)), _mha_call(_masks(masks)))


@pytest.mark.parametrize(
    "call_kw",
    [
        {"need_weights": False},
        {"average_attn_weights": False},
        {"need_weights": False, "is_causal": True},
        {"need_weights": True, "is_causal": True},
    ],
    ids=["no-weights", "per-head", "causal-hint", "causal-weights"],
)
@pytest.mark.parametrize("config", ["plain", "all"])
def test_multihead_attention_call_options(config, call_kw):
    kw = MHA_CONFIGS[config]
    f, t = _pair(lambda lib: lib.MultiheadAttention(E, H, **kw))
    masks = {"attn_mask": np.triu(np.ones((L, S), bool), 1)}
    _check(f, t, _mha_inputs(kw.get("kdim", E), kw.get("vdim", E)), _mha_call(masks, **call_kw))


@pytest.mark.parametrize("config", ["plain", "all"])
def test_multihead_attention_batch_first_and_unbatched(config):
    kw = MHA_CONFIGS[config]
    kd, vd = kw.get("kdim", E), kw.get("vdim", E)
    f, t = _pair(lambda lib: lib.MultiheadAttention(E, H, batch_first=True, **kw))
    _check(f, t, _mha_inputs(kd, vd, batch_first=True), _mha_call(_masks("kpm")))
    f, t = _pair(lambda lib: lib.MultiheadAttention(E, H, **kw))
    kpm = {"key_padding_mask": np.array([False, True, False, False])}
    _check(f, t, _mha_inputs(kd, vd, batched=False), _mha_call(kpm))
    mask3 = {"attn_mask": RNG.standard_normal((H, L, S))}
    _check(f, t, _mha_inputs(kd, vd, batched=False), _mha_call(mask3, average_attn_weights=False))


def test_multihead_attention_self_attention_and_fully_masked_rows():
    f, t = _pair(lambda lib: lib.MultiheadAttention(E, H, add_zero_attn=False))

    def call(m, xs, lib):
        kpm = lib.tensor(np.array([[True] * L, [False, True, False]]))
        out = m(xs[0], xs[0], xs[0], key_padding_mask=kpm, need_weights=False)[0]
        return out[:, 1:]  # (the fully masked sequence: NaN with weights, zeros without)

    _check(f, t, [RNG.standard_normal((L, N, E))], call)
    x = RNG.standard_normal((L, N, E))
    kpm = np.array([[True] * L, [False] * L])
    fo = f(*[fg.tensor(x)] * 3, key_padding_mask=fg.tensor(kpm), need_weights=False)[0]
    to = t(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(kpm), need_weights=False)[0]
    _close(fo, to)


def test_multihead_attention_parameters_and_init():
    m = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True, dtype="float64")
    tm = torch.nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True)
    _same_keys(m, tm)
    assert list(m.state_dict()) == [
        "q_proj_weight",
        "k_proj_weight",
        "v_proj_weight",
        "in_proj_bias",
        "bias_k",
        "bias_v",
        "out_proj.weight",
        "out_proj.bias",
    ]
    assert m._qkv_same_embed_dim is False and m.in_proj_weight is None
    assert (m.kdim, m.vdim, m.add_zero_attn) == (3, 5, False)
    assert np.abs(m.q_proj_weight.numpy()).max() <= np.sqrt(6 / 16)
    assert np.abs(m.k_proj_weight.numpy()).max() <= np.sqrt(6 / 11)
    assert np.abs(m.v_proj_weight.numpy()).max() <= np.sqrt(6 / 13)
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    same = nn.MultiheadAttention(8, 2, kdim=8, vdim=8)
    assert same._qkv_same_embed_dim and same.q_proj_weight is None
    assert list(same.state_dict()) == list(torch.nn.MultiheadAttention(8, 2).state_dict())
    # xavier_normal_ on (1, 1, E): std sqrt(1 / E)
    big = nn.MultiheadAttention(512, 2, add_bias_kv=True, dtype="float64")
    assert abs(big.bias_k.numpy().std() - np.sqrt(1 / 512)) < 0.15 * np.sqrt(1 / 512)
    # ferrograd's weights load into torch and give torch's outputs
    f = nn.MultiheadAttention(E, H, kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True)
    f = f.to(fg.float64).eval()
    t = torch.nn.MultiheadAttention(E, H, kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True)
    t = t.double().eval()
    t.load_state_dict(_to_torch(f.state_dict()))
    xs = _mha_inputs(3, 5)
    _close(f(*map(fg.tensor, xs))[0], t(*map(torch.tensor, xs))[0])


def test_multihead_attention_bad_input():
    m = nn.MultiheadAttention(E, H, kdim=3)
    with pytest.raises(fg.ShapeError, match="key must have 3 features"):
        m(fg.randn(L, N, E), fg.randn(S, N, E), fg.randn(S, N, E))
    with pytest.raises(fg.ShapeError, match="attn_mask"):
        m(fg.randn(L, N, E), fg.randn(S, N, 3), fg.randn(S, N, E), attn_mask=fg.zeros((L, L)))
    with pytest.raises(ValueError, match="kdim"):
        nn.MultiheadAttention(E, H, kdim=0)
    assert nn.modules.MultiheadAttention is nn.MultiheadAttention


# ----------------------------------------------------------------------------- LSTM proj_size

SEQ = RNG.standard_normal((5, 3, 3))  # (L, N, H_in)


@pytest.mark.parametrize(
    "kw,with_state",
    [
        ({}, False),
        ({"num_layers": 2, "bidirectional": True}, False),
        ({"num_layers": 2, "bidirectional": True}, True),
        ({"batch_first": True, "bias": False}, True),
        ({"num_layers": 2}, True),
    ],
    ids=["one", "two-bidir", "two-bidir-state", "batch-first-state", "two-state"],
)
def test_lstm_proj_size_matches_torch(kw, with_state):
    f, t = _pair(lambda lib: lib.LSTM(3, 5, proj_size=2, **kw))
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1) * dirs
    x = SEQ.transpose(1, 0, 2).copy() if kw.get("batch_first") else SEQ
    inputs = [x]
    if with_state:
        inputs += [RNG.standard_normal((layers, 3, 2)), RNG.standard_normal((layers, 3, 5))]

    def call(m, xs, lib):
        return m(xs[0], tuple(xs[1:]) if len(xs) > 1 else None)

    fo, _ = _check(f, t, inputs, call)
    assert tuple(fo[1].shape) == (layers, 3, 2) and tuple(fo[2].shape) == (layers, 3, 5)


def test_lstm_proj_size_parameters_unbatched_and_packed():
    f, t = _pair(lambda lib: lib.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2))
    names = [n for n, _ in t.named_parameters()]
    assert [n for n, _ in f.named_parameters()] == names
    assert "weight_hr_l1_reverse" in names and tuple(f.weight_hr_l1.shape) == (2, 5)
    assert tuple(f.weight_ih_l1.shape) == (20, 4) and tuple(f.weight_hh_l0.shape) == (20, 2)
    _check(f, t, [SEQ[:, 0].copy()])  # unbatched

    def packed(m, xs, lib):
        p = lib.nn.utils.rnn.pack_padded_sequence(
            xs[0], lib.tensor([5, 2, 4]), enforce_sorted=False
        )
        out, (h, c) = m(p, (xs[1], xs[2]))
        return out.data, h, c

    inputs = [SEQ, RNG.standard_normal((4, 3, 2)), RNG.standard_normal((4, 3, 5))]
    _check(f, t, inputs, packed)
    bound = 1 / np.sqrt(5)
    assert all(np.abs(p.numpy()).max() <= bound for p in nn.LSTM(3, 5, proj_size=2).parameters())


def test_lstm_proj_size_errors():
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(ValueError, match="proj_size"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size"):
        nn.RNN(3, 4, proj_size=2)
    with pytest.raises(fg.ShapeError, match="h_0 must have shape"):
        nn.LSTM(3, 5, proj_size=2)(fg.tensor(SEQ), (fg.zeros((1, 3, 5)), fg.zeros((1, 3, 5))))


# ------------------------------------------------------------------------------ instance norm

INORM_OPTIONS = [
    {},
    {"affine": True},
    {"track_running_stats": True},
    {"track_running_stats": True, "affine": True, "momentum": None},
    {"track_running_stats": True, "momentum": 0.3},
]


@pytest.mark.parametrize(
    "name,shape",
    [
        ("InstanceNorm1d", (2, 3, 5)),
        ("InstanceNorm1d", (3, 5)),
        ("InstanceNorm2d", (2, 3, 4, 3)),
        ("InstanceNorm3d", (2, 3, 3, 2, 3)),
        ("InstanceNorm3d", (3, 3, 2, 3)),
    ],
)
@pytest.mark.parametrize("options", range(len(INORM_OPTIONS)))
def test_instance_norm_matches_torch(name, shape, options):
    kw = INORM_OPTIONS[options]

    def make(lib):
        m = getattr(lib, name)(3, **kw)
        if kw.get("affine") and lib is torch.nn:
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
        return m

    f, t = _pair(make, eval_mode=False)
    for training in (True, True, False):
        f.train(training)
        t.train(training)
        _check(f, t, [RNG.standard_normal(shape)])
        fb = dict(f.named_buffers())
        for k, v in t.named_buffers():
            _close(fb[k], v)  # running statistics, and num_batches_tracked left at 0
    if kw.get("track_running_stats"):
        assert int(f.num_batches_tracked.item()) == 0


def test_instance_norm_checks():
    with pytest.raises(fg.ShapeError, match="InstanceNorm3d"):
        nn.InstanceNorm3d(3)(fg.randn(2, 3, 4))
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm2d(4, affine=True)(fg.randn(2, 3, 4, 4))
    with pytest.warns(UserWarning, match="num_features"):
        nn.InstanceNorm2d(4)(fg.randn(2, 3, 4, 4))
    m, tm = (
        nn.InstanceNorm3d(3, affine=True, bias=False),
        torch.nn.InstanceNorm3d(3, affine=True, bias=False),
    )
    _same_keys(m, tm)


# ---------------------------------------------------------------------------------- lazy layers

LAZY = [
    ("LazyLinear", (4,), (2, 5)),
    ("LazyConv1d", (4, 3), (2, 2, 7)),
    ("LazyConv2d", (4, 3), (2, 2, 5, 5)),
    ("LazyConv2d", (4, 3, 1, 1, 1, 2, True, "reflect"), (2, 4, 5, 5)),
    ("LazyConv3d", (2, 2), (2, 2, 3, 3, 3)),
    ("LazyConvTranspose1d", (4, 3, 2), (2, 2, 5)),
    ("LazyConvTranspose2d", (4, 3, 2, 1, 1, 2), (2, 4, 3, 3)),
    ("LazyConvTranspose3d", (2, 2), (2, 2, 3, 2, 3)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm1d", (), (4, 3, 5)),
    ("LazyBatchNorm2d", (), (2, 3, 2, 2)),
    ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), (2, 3, 3, 2, 2)),
    ("LazyInstanceNorm2d", (1e-5, 0.1, False, False), (2, 3, 4, 4)),
]


@pytest.mark.parametrize("name,args,shape", LAZY, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAZY)])
def test_lazy_layers_match_torch(name, args, shape):
    tm, fm = getattr(torch.nn, name)(*args), getattr(nn, name)(*args)
    plain = getattr(nn, tm.cls_to_become.__name__)
    assert isinstance(fm, plain)
    assert list(fm.state_dict()) == list(tm.state_dict())  # (placeholders before the call)
    tm, fm = tm.double(), fm.double()
    x = RNG.standard_normal(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's num_features warning without affine)
        tm(torch.tensor(x))
        fm(fg.tensor(x))
    assert type(fm) is plain
    _same_keys(fm, tm)
    for k, v in fm.state_dict().items():
        assert str(v.dtype) == str(tm.state_dict()[k].dtype).replace("torch.", ""), k
    fm.load_state_dict(_to_fg(tm.state_dict()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(fm, tm, [x])
    # an unused lazy layer is sized by the state dict it loads
    if tm.state_dict():
        f2 = getattr(nn, name)(*args).double()
        f2.load_state_dict(_to_fg(tm.state_dict()))
        assert type(f2) is plain
        for attr in ("in_features", "in_channels", "num_features"):
            if hasattr(fm, attr):
                assert getattr(f2, attr) == getattr(fm, attr)


def test_lazy_linear_takes_the_module_dtype():
    m = nn.LazyLinear(4).double()
    y = m(fg.tensor(RNG.standard_normal((2, 3))))
    assert y.dtype == fg.float64 and m.weight.dtype == fg.float64 and m.in_features == 3
    assert np.abs(m.weight.numpy()).max() <= 1 / np.sqrt(3)
    c = nn.LazyConv2d(2, 3).to(dtype=fg.float64)
    c(fg.tensor(RNG.standard_normal((1, 2, 4, 4))))
    assert c.weight.dtype == fg.float64 and tuple(c.weight.shape) == (2, 2, 3, 3)
    assert np.abs(c.weight.numpy()).max() <= 1 / np.sqrt(18)


def test_lazy_layers_nested_load_copy_and_errors():
    net = nn.Sequential(nn.LazyConv2d(3, 2), nn.LazyBatchNorm2d(), nn.Flatten(), nn.LazyLinear(2))
    copied = copy.deepcopy(net)
    pickled = pickle.loads(pickle.dumps(net))
    tnet = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 2),
        torch.nn.BatchNorm2d(3),
        torch.nn.Flatten(),
        torch.nn.Linear(27, 2),
    ).double()
    net.to(fg.float64).load_state_dict(_to_fg(tnet.state_dict()))
    assert [type(m).__name__ for m in net] == ["Conv2d", "BatchNorm2d", "Flatten", "Linear"]
    x = RNG.standard_normal((2, 2, 4, 4))
    _close(net.eval()(fg.tensor(x)), tnet.eval()(torch.tensor(x)))
    for other in (copied, pickled):
        other(fg.randn(2, 2, 4, 4))
        assert [type(m).__name__ for m in other] == ["Conv2d", "BatchNorm2d", "Flatten", "Linear"]
    with pytest.raises(ValueError, match="groups"):
        nn.LazyConv2d(4, 3, groups=2)(fg.randn(1, 3, 5, 5))
    with pytest.raises(ValueError, match="out_channels"):
        nn.LazyConv2d(3, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.LazyConvTranspose2d(3, 3, padding_mode="reflect")
    with pytest.raises(fg.ShapeError, match="LazyConv2d"):
        nn.LazyConv2d(3, 3)(fg.randn(5, 5))
    with pytest.raises(fg.ShapeError, match="LazyBatchNorm2d"):
        nn.LazyBatchNorm2d()(fg.randn(2, 3))


# ------------------------------------------------------------------------------- EmbeddingBag


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets", [[0, 2, 7], [0, 2, 5], [0, 2, 2], [0, 3, 3, 3], [0, 0, 1]])
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_bag_include_last_offset_matches_torch(mode, offsets, max_norm):
    def make(lib):
        return lib.EmbeddingBag(10, 3, mode=mode, include_last_offset=True, max_norm=max_norm)

    f, t = _pair(make, eval_mode=False)
    inputs = [np.array([1, 2, 3, 4, 5, 6, 7]), np.array(offsets)]
    if mode == "sum":
        inputs.append(RNG.standard_normal(7))
    _check(f, t, inputs)
    _close(f.weight, t.weight)  # (renormalised in place)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_max_norm_matches_torch(norm_type, padding_idx):
    def make(lib):
        return lib.EmbeddingBag(10, 3, max_norm=1.2, norm_type=norm_type, padding_idx=padding_idx)

    f, t = _pair(make, eval_mode=False)
    _check(f, t, [np.array([[1, 2, 3], [2, 4, 9]])])
    _check(f, t, [np.array([1, 2, 3, 2, 4, 9]), np.array([0, 2])])
    _close(f.weight, t.weight)


def test_embedding_bag_bad_offsets():
    m = nn.EmbeddingBag(10, 3, include_last_offset=True)
    with pytest.raises(ValueError, match="offsets"):
        m(fg.tensor([1, 2, 3]), fg.tensor([0, 2, 4]))
    with pytest.raises(ValueError, match="offsets"):
        m(fg.tensor([1, 2, 3]), fg.tensor([0]))
    with pytest.raises(fg.ShapeError, match="offsets"):
        m(fg.tensor([1, 2, 3]), fg.tensor([[0, 3]]))


# ----------------------------------------------------------------------------- 3-D padding


@pytest.mark.parametrize(
    "name,args",
    [
        ("ZeroPad3d", ((1, 0, 2, 1, 0, 1),)),
        ("ZeroPad3d", (1,)),
        ("ConstantPad3d", (1, 2.5)),
        ("ConstantPad3d", ((0, 1, 1, 0, 2, 1), -1.0)),
        ("ReflectionPad3d", ((1, 0, 1, 1, 0, 1),)),
        ("ReflectionPad3d", (1,)),
        ("ReplicationPad3d", (2,)),
        ("ReplicationPad3d", ((0, 1, 2, 0, 1, 1),)),
        ("CircularPad3d", ((1, 0, 1, 1, 0, 1),)),
        ("CircularPad3d", (2,)),
    ],
)
@pytest.mark.parametrize("shape", [(2, 2, 3, 3, 3), (2, 3, 3, 3)], ids=["batched", "unbatched"])
def test_padding_3d_matches_torch(name, args, shape):
    f, t = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert f.padding == t.padding
    _check(f, t, [RNG.standard_normal(shape)])


def test_padding_3d_bad_padding():
    with pytest.raises(ValueError, match="ReflectionPad3d"):
        nn.ReflectionPad3d((1, 2))


# ------------------------------------------------------------- Buffer, RNNBase, RNNCellBase


def _buffers_init(self, lib):
    self.a = lib.nn.Buffer(lib.ones(3))
    self.b = lib.nn.Buffer(lib.zeros(2), persistent=False)
    self.lin = lib.nn.Linear(2, 2)


class _WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        _buffers_init(self, fg)


class _TorchWithBuffers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _buffers_init(self, torch)


@pytest.mark.parametrize("lib", [torch, fg], ids=["torch", "ferrograd"])
def test_buffer_registers_on_assignment(lib):
    M = _TorchWithBuffers if lib is torch else _WithBuffers
    m = M()
    assert list(m.state_dict()) == ["a", "lin.weight", "lin.bias"]
    assert [n for n, _ in m.named_buffers()] == ["a", "b"]
    assert [n for n, _ in m.named_parameters()] == ["lin.weight", "lin.bias"]
    assert isinstance(m.a, lib.nn.Buffer) and isinstance(m.a, lib.Tensor)
    m.a = lib.nn.Buffer(lib.zeros(3), persistent=False)
    assert list(m.state_dict()) == ["lin.weight", "lin.bias"]
    m.a = lib.full((3,), 2.0)  # (a plain tensor keeps the buffer's registration)
    assert list(m.state_dict()) == ["lin.weight", "lin.bias"]
    with pytest.raises(TypeError, match="parameter"):
        m.lin.weight = lib.nn.Buffer(lib.zeros(2, 2))
    m2 = copy.deepcopy(m).double()
    assert m2.b.dtype == lib.float64 and [n for n, _ in m2.named_buffers()] == ["a", "b"]
    m3 = pickle.loads(pickle.dumps(M()))
    assert list(m3.state_dict()) == ["a", "lin.weight", "lin.bias"]
    assert tuple(lib.nn.Buffer().shape) == (0,)
    assert lib.nn.Buffer(lib.ones(2, requires_grad=True)).requires_grad


def test_rnn_bases():
    for name in ("RNN", "LSTM", "GRU"):
        layer, cell = getattr(nn, name)(3, 4), getattr(nn, name + "Cell")(3, 4)
        assert isinstance(layer, nn.RNNBase) and not isinstance(layer, nn.RNNCellBase)
        assert isinstance(cell, nn.RNNCellBase) and not isinstance(cell, nn.RNNBase)
    plain = {"LSTM": {}, "GRU": {}, "RNN_TANH": {}, "RNN_RELU": {"nonlinearity": "relu"}}
    for mode, kw in plain.items():
        torch.manual_seed(0)
        t = getattr(torch.nn, mode.split("_")[0])(3, 4, num_layers=2, **kw).double()
        f = nn.RNNBase(mode, 3, 4, num_layers=2).to(fg.float64)
        assert list(f.state_dict()) == list(torch.nn.RNNBase(mode, 3, 4, 2).state_dict())
        f.load_state_dict(_to_fg(t.state_dict()))
        _check(f, t, [SEQ])
    f, t = _pair(lambda lib: lib.RNN(3, 4, 2, "relu", False))  # (torch's positional order)
    assert f.nonlinearity == "relu" and f.bias is False
    _check(f, t, [SEQ])
    f, t = _pair(lambda lib: lib.RNNCell(3, 4, False, "relu"))
    _check(f, t, [SEQ[0]])
    assert repr(nn.LSTM(3, 5, proj_size=2, num_layers=2)) == repr(
        torch.nn.LSTM(3, 5, proj_size=2, num_layers=2)
    )
    assert repr(nn.RNNCell(3, 5, False, "relu")) == repr(torch.nn.RNNCell(3, 5, False, "relu"))
    shapes = [[tuple(p.shape) for p in w] for w in nn.LSTM(3, 5, proj_size=2).all_weights]
    assert shapes == [
        [tuple(p.shape) for p in w] for w in torch.nn.LSTM(3, 5, proj_size=2).all_weights
    ]
    with pytest.raises(ValueError, match="mode"):
        nn.RNNBase("LSTMX", 3, 4)
