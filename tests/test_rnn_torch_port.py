"""The recurrent-layer tests of PyTorch's ``test/test_nn.py`` (RNN, LSTM, GRU and their
cells) run on ferrograd and on torch from the same float64 weights: outputs, final states and
the gradients of both with respect to inputs, states and every weight, packed sequences,
parameter layout, state_dict round trips, dropout and the errors for malformed inputs."""

from __future__ import annotations

import itertools
import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.nn.utils import rnn as frnn

torch = pytest.importorskip("torch")

RTOL = 1e-8


def _fg(t, grad: bool = False):
    return fg.tensor(t.detach().numpy().copy(), requires_grad=grad)


def _pair(mode: str, *args, **kwargs):
    """The same layer built in torch and in ferrograd, ferrograd holding torch's weights."""
    tm = getattr(torch.nn, mode)(*args, **kwargs).double()
    fm = getattr(fg.nn, mode)(*args, **kwargs, dtype="float64")
    fm.load_state_dict({k: _fg(v) for k, v in tm.state_dict().items()})
    return tm, fm


def _close(a, b, what: str = "") -> None:
    a = a.detach().numpy()
    assert tuple(a.shape) == tuple(b.shape), what
    np.testing.assert_allclose(b.numpy(), a, rtol=RTOL, atol=RTOL, err_msg=what)


def _states(h, lstm: bool) -> list:
    return list(h) if lstm else [h]


def _compare_grads(outs_t, outs_f, ins_t, ins_f, tm, fm) -> None:
    """Backpropagates the same random weighting of every output on both sides and compares
    the gradients of the inputs and of every parameter."""
    ws = [torch.randn(*o.shape, dtype=torch.float64) for o in outs_t]
    lt = sum((o * w).sum() for o, w in zip(outs_t, ws))
    lf = sum((o * fg.tensor(w.numpy())).sum() for o, w in zip(outs_f, ws))
    gt = torch.autograd.grad(lt, ins_t + list(tm.parameters()))
    gf = fg.autograd.grad(lf, ins_f + list(fm.parameters()))
    names = [f"input {i}" for i in range(len(ins_t))] + [n for n, _ in tm.named_parameters()]
    for n, a, b in zip(names, gt, gf):
        _close(a, b, f"gradient of {n}")


@pytest.mark.parametrize(
    "mode,bidirectional,batch_first,bias,proj,with_hx,unbatched",
    [
        c
        for c in itertools.product(
            ["RNN", "LSTM", "GRU"],
            [False, True],
            [False, True],
            [True, False],
            [0, 2],
            [False, True],
            [False, True],
        )
        if not (c[4] and c[0] != "LSTM") and not (c[2] and c[6])
    ],
)
def test_layer_outputs_states_and_gradients_match_torch(
    mode, bidirectional, batch_first, bias, proj, with_hx, unbatched
):
    torch.manual_seed(0)
    kw = {"num_layers": 2, "bidirectional": bidirectional, "batch_first": batch_first, "bias": bias}
    if proj:
        kw["proj_size"] = proj
    if mode == "RNN" and bias:
        kw["nonlinearity"] = "relu"
    tm, fm = _pair(mode, 3, 4, **kw)
    lstm = mode == "LSTM"
    steps, batch, dirs = 5, 2, 2 if bidirectional else 1
    shape = (steps, 3) if unbatched else ((batch, steps, 3) if batch_first else (steps, batch, 3))
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    lead = (2 * dirs,) if unbatched else (2 * dirs, batch)
    hx = hx_f = None
    states: list = []
    if with_hx:
        states = [torch.randn(*lead, proj or 4, dtype=torch.float64, requires_grad=True)]
        if lstm:
            states.append(torch.randn(*lead, 4, dtype=torch.float64, requires_grad=True))
        hx = tuple(states) if lstm else states[0]
        hx_f = tuple(_fg(s, True) for s in states) if lstm else _fg(states[0], True)
    xf = _fg(x, True)
    out_t, h_t = tm(x, hx)
    out_f, h_f = fm(xf, hx_f)
    _close(out_t, out_f, "output")
    for a, b in zip(_states(h_t, lstm), _states(h_f, lstm)):
        _close(a, b, "final state")
    states_f = [] if hx_f is None else _states(hx_f, lstm)
    _compare_grads(
        [out_t, *_states(h_t, lstm)],
        [out_f, *_states(h_f, lstm)],
        [x, *states],
        [xf, *states_f],
        tm,
        fm,
    )


@pytest.mark.parametrize(
    "mode,bidirectional,enforce_sorted,batch_first,with_hx,total_length",
    list(
        itertools.product(
            ["RNN", "LSTM", "GRU"],
            [False, True],
            [True, False],
            [False, True],
            [False, True],
            [None, 7],
        )
    ),
)
def test_packed_sequence_matches_torch(
    mode, bidirectional, enforce_sorted, batch_first, with_hx, total_length
):
    torch.manual_seed(1)
    from torch.nn.utils import rnn as trnn

    tm, fm = _pair(mode, 3, 4, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
    lstm = mode == "LSTM"
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = torch.randn(*((3, 5, 3) if batch_first else (5, 3, 3)), dtype=torch.float64)
    x.requires_grad_(True)
    xf = _fg(x, True)
    pt = trnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first, enforce_sorted)
    pf = frnn.pack_padded_sequence(xf, fg.tensor(np.array(lengths)), batch_first, enforce_sorted)
    dirs = 2 if bidirectional else 1
    states: list = []
    hx = hx_f = None
    if with_hx:
        states = [torch.randn(2 * dirs, 3, 4, dtype=torch.float64, requires_grad=True)]
        if lstm:
            states.append(torch.randn(2 * dirs, 3, 4, dtype=torch.float64, requires_grad=True))
        hx = tuple(states) if lstm else states[0]
        hx_f = tuple(_fg(s, True) for s in states) if lstm else _fg(states[0], True)
    out_t, h_t = tm(pt, hx)
    out_f, h_f = fm(pf, hx_f)
    _close(out_t.data, out_f.data, "packed data")
    _close(out_t.batch_sizes, out_f.batch_sizes, "batch_sizes")
    pad_t, len_t = trnn.pad_packed_sequence(out_t, batch_first, total_length=total_length)
    pad_f, len_f = frnn.pad_packed_sequence(out_f, batch_first, total_length=total_length)
    _close(pad_t, pad_f, "padded output")
    _close(len_t, len_f, "lengths")
    states_f = [] if hx_f is None else _states(hx_f, lstm)
    _compare_grads(
        [pad_t, *_states(h_t, lstm)],
        [pad_f, *_states(h_f, lstm)],
        [x, *states],
        [xf, *states_f],
        tm,
        fm,
    )


@pytest.mark.parametrize(
    "mode,bias,unbatched,with_hx",
    list(
        itertools.product(
            ["RNNCell", "LSTMCell", "GRUCell"], [True, False], [False, True], [False, True]
        )
    ),
)
def test_cells_match_torch(mode, bias, unbatched, with_hx):
    torch.manual_seed(2)
    tm, fm = _pair(mode, 3, 4, bias=bias)
    lstm = mode == "LSTMCell"
    x = torch.randn(*((3,) if unbatched else (2, 3)), dtype=torch.float64, requires_grad=True)
    hs = (4,) if unbatched else (2, 4)
    states: list = []
    hx = hx_f = None
    if with_hx:
        states = [torch.randn(*hs, dtype=torch.float64, requires_grad=True)]
        if lstm:
            states.append(torch.randn(*hs, dtype=torch.float64, requires_grad=True))
        hx = tuple(states) if lstm else states[0]
        hx_f = tuple(_fg(s, True) for s in states) if lstm else _fg(states[0], True)
    xf = _fg(x, True)
    ot = _states(tm(x, hx), lstm)
    of = _states(fm(xf, hx_f), lstm)
    for a, b in zip(ot, of):
        _close(a, b, "cell output")
    states_f = [] if hx_f is None else _states(hx_f, lstm)
    _compare_grads(ot, of, [x, *states], [xf, *states_f], tm, fm)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_gradients_match_finite_differences(mode):
    fg.manual_seed(3)
    kw = {"proj_size": 2} if mode == "LSTM" else {}
    m = getattr(fg.nn, mode)(2, 3, num_layers=2, bidirectional=True, dtype="float64", **kw)
    x = fg.tensor(np.random.default_rng(0).standard_normal((3, 2, 2)), requires_grad=True)
    params = list(m.parameters())

    def loss():
        out, h = m(x)
        hn = h[0] if mode == "LSTM" else h
        return out.sin().sum() + (hn * hn).sum()

    grads = fg.autograd.grad(loss(), [x, *params])
    eps = 1e-6
    for t, g in zip([x, *params], grads):
        base = t.numpy().copy()
        flat = base.reshape(-1)
        rng = np.random.default_rng(len(flat))
        for i in rng.choice(flat.size, size=min(4, flat.size), replace=False):
            for sign, store in ((1, "up"), (-1, "down")):
                v = flat.copy()
                v[i] += sign * eps
                with fg.no_grad():
                    t.copy_(fg.tensor(v.reshape(base.shape)))
                val = float(loss().item())
                if store == "up":
                    up = val
                else:
                    down = val
            with fg.no_grad():
                t.copy_(fg.tensor(base))
            np.testing.assert_allclose(
                g.numpy().reshape(-1)[i], (up - down) / (2 * eps), rtol=1e-5, atol=1e-7
            )


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_traced_step_matches_eager(mode):
    fg.manual_seed(4)
    m = getattr(fg.nn, mode)(3, 4, num_layers=2, bidirectional=True, dtype="float64")
    x = fg.tensor(np.random.default_rng(1).standard_normal((5, 2, 3)), requires_grad=True)

    def step(x):
        out, h = m(x)
        hn = h[0] if mode == "LSTM" else h
        loss = (out**2).sum() + hn.sin().sum()
        return loss, fg.autograd.grad(loss, [x, *m.parameters()])

    le, ge = step(x)
    traced = fg.trace(step)
    traced(x)
    lt, gt = traced(x)
    np.testing.assert_allclose(lt.numpy(), le.numpy(), rtol=1e-12)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_parameter_names_shapes_and_state_dict_round_trip(mode):
    kw = {"num_layers": 2, "bidirectional": True}
    if mode == "LSTM":
        kw["proj_size"] = 2
    tm = getattr(torch.nn, mode)(3, 4, **kw)
    fm = getattr(fg.nn, mode)(3, 4, **kw)
    assert [(k, tuple(v.shape)) for k, v in fm.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in tm.state_dict().items()
    ]
    assert fm._flat_weights_names == tm._flat_weights_names
    assert [[tuple(p.shape) for p in w] for w in fm.all_weights] == [
        [tuple(p.shape) for p in w] for w in tm.all_weights
    ]
    assert repr(fm) == repr(tm)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in fm.state_dict().items()})
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(fm.state_dict()[k].numpy(), v.numpy())
    fm.flatten_parameters()


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_reset_parameters_redraws_in_range(mode):
    fm = getattr(fg.nn, mode)(3, 16)
    before = [p.numpy().copy() for p in fm.parameters()]
    fm.reset_parameters()
    bound = 1 / math.sqrt(16)
    for p, old in zip(fm.parameters(), before):
        assert isinstance(p, fg.nn.Parameter)
        assert np.abs(p.numpy()).max() <= bound
        assert not np.array_equal(p.numpy(), old)


@pytest.mark.parametrize("lib", ["torch", "fg"])
def test_cell_zero_hidden_size(lib):
    m = torch if lib == "torch" else fg
    x, hx = m.randn(3, 10), m.randn(3, 0)
    for cell in (
        m.nn.RNNCell(10, 0, nonlinearity="relu"),
        m.nn.RNNCell(10, 0, nonlinearity="tanh"),
        m.nn.GRUCell(10, 0),
    ):
        assert tuple(cell(x, hx).shape) == (3, 0)
    h, c = m.nn.LSTMCell(10, 0)(x, (hx, hx))
    assert tuple(h.shape) == tuple(c.shape) == (3, 0)


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_rnn_args_check(lib, mode):
    m = torch if lib == "torch" else fg
    good_in, good_h = (6, 4, 3), (2, 4, 5)

    def hidden(shape, which=0):
        if mode != "LSTM":
            return m.randn(*shape)
        return (
            (m.randn(*shape), m.randn(*good_h))
            if which == 0
            else (m.randn(*good_h), m.randn(*shape))
        )

    model = getattr(m.nn, mode)(3, 5, 2)
    bad = [
        ((6, 7, 3), good_h),  # input batch
        (good_in, (2, 7, 5)),  # hidden batch
        ((6, 4, 7), good_h),  # input size
        (good_in, (2, 4, 7)),  # hidden size
        (good_in, (7, 4, 5)),  # layers * directions
    ]
    for inp, hs in bad:
        for which in (0, 1) if mode == "LSTM" else (0,):
            with pytest.raises(RuntimeError):
                model(m.randn(*inp), hidden(hs, which))


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_state_dimensions_must_match_input(lib, mode):
    m = torch if lib == "torch" else fg
    model = getattr(m.nn, mode)(3, 5, 2)

    def hx(*shape):
        return (m.zeros(*shape), m.zeros(*shape)) if mode == "LSTM" else m.zeros(*shape)

    with pytest.raises(RuntimeError, match="3-D"):
        model(m.zeros(6, 3), hx(2, 1, 5))
    with pytest.raises(RuntimeError, match="2-D"):
        model(m.zeros(6, 1, 3), hx(2, 5))
    with pytest.raises(ValueError, match="4D|4-D"):
        model(m.zeros(6, 1, 3, 1))
    with pytest.raises(RuntimeError, match="sequence length"):
        model(m.zeros(0, 4, 3))


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_input_dtype_must_match_weights(lib, mode):
    m = torch if lib == "torch" else fg
    model = getattr(m.nn, mode)(3, 5)
    with pytest.raises(ValueError, match="dtype"):
        model(m.zeros(6, 4, 3, dtype=m.float64))
    with pytest.raises(ValueError, match="dropout"):
        getattr(m.nn, mode)(3, 5, 2, dropout="0.5")


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("mode", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_state_shape_errors(lib, mode):
    m = torch if lib == "torch" else fg
    cell = getattr(m.nn, mode)(3, 5)

    def hx(*shape):
        return (m.zeros(*shape), m.zeros(*shape)) if mode == "LSTMCell" else m.zeros(*shape)

    for x, h in [
        ((3,), (1, 5)),  # unbatched input, batched state
        ((1, 3), (5,)),  # batched input, unbatched state
        ((1, 3), (1, 1, 5)),  # 3-D state
        ((4, 3), (2, 5)),  # batch sizes differ
        ((4, 3), (4, 7)),  # hidden size differs
    ]:
        with pytest.raises((RuntimeError, ValueError)):
            cell(m.zeros(*x), hx(*h))
    with pytest.raises(ValueError):
        cell(m.zeros(4, 3, 3))
    with pytest.raises(RuntimeError):
        cell(m.zeros(4, 7))


@pytest.mark.parametrize("lib", ["torch", "fg"])
def test_pack_padded_sequence_length_count_error(lib):
    m = torch if lib == "torch" else fg
    with pytest.raises(RuntimeError, match="len\\(lengths\\)"):
        m.nn.utils.rnn.pack_padded_sequence(m.zeros(3, 2, 3), [3, 2, 1])


@pytest.mark.parametrize("lib", ["torch", "fg"])
@pytest.mark.parametrize("p", [0.0, 0.276, 0.5, 1.0])
@pytest.mark.parametrize("train", [True, False])
def test_rnn_dropout(lib, p, train):
    m = torch if lib == "torch" else fg
    rnn = m.nn.RNN(10, 1000, 2, bias=False, dropout=p, nonlinearity="relu")
    with m.no_grad():
        for w in rnn.parameters():
            w.fill_(1.0)
    rnn.train(train)
    out, hy = rnn(m.ones(1, 1, 10))
    out = out.detach().numpy() if lib == "torch" else out.numpy()
    hy = hy.detach().numpy() if lib == "torch" else hy.numpy()
    np.testing.assert_allclose(out[0, 0], hy[1, 0], rtol=1e-6)
    if not train or p == 0:
        np.testing.assert_allclose(out, 10000.0, rtol=1e-6)
    elif p == 1:
        np.testing.assert_array_equal(out, 0.0)
    else:
        # the second layer sums the first's 1000 outputs of 10, each kept and scaled by 1/(1-p)
        kept = out[0, 0, 0] * (1 - p) / 10
        assert abs(kept - round(kept)) < 1e-2
        assert np.all(out == out[0, 0, 0])


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_double_backward_matches_torch(mode):
    torch.manual_seed(5)
    cell = mode.endswith("Cell")
    tm, fm = _pair(mode, 3, 4) if cell else _pair(mode, 3, 4, 2, bidirectional=True)
    x = torch.randn(*((2, 3) if cell else (5, 2, 3)), dtype=torch.float64, requires_grad=True)
    xf = _fg(x, True)

    def first(m, x):
        o = m(x)
        return o[0] if isinstance(o, tuple) else o

    gt = torch.autograd.grad((first(tm, x) ** 2).sum(), [x, *tm.parameters()], create_graph=True)
    gf = fg.autograd.grad((first(fm, xf) ** 2).sum(), [xf, *fm.parameters()], create_graph=True)
    ggt = torch.autograd.grad(sum(g.sin().sum() for g in gt), [x, *tm.parameters()])
    ggf = fg.autograd.grad(sum(g.sin().sum() for g in gf), [xf, *fm.parameters()])
    for a, b in zip(ggt, ggf):
        _close(a, b, "second-order gradient")


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_empty_batch(mode):
    for m in (torch, fg):
        rnn = getattr(m.nn, mode)(input_size=3, hidden_size=4)
        out = rnn(m.zeros(5, 0, 3))[0]
        assert tuple(out.shape) == (5, 0, 4)
        out.sum().backward()


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_variable_sequence_matches_each_sequence_alone(mode):
    torch.manual_seed(6)
    tm, fm = _pair(mode, 3, 4, 2, bidirectional=True)
    lengths = [4, 3, 1]
    seqs = [torch.randn(n, 3, dtype=torch.float64) for n in lengths]
    out, _ = fm(frnn.pack_sequence([_fg(s) for s in seqs]))
    padded, _ = frnn.pad_packed_sequence(out)
    for i, s in enumerate(seqs):
        alone = tm(s.unsqueeze(1))[0][:, 0]
        _close(alone, padded[: lengths[i], i], f"sequence {i}")


@pytest.mark.parametrize("train", [True, False])
def test_optimizer_steps_match_torch(train):
    torch.manual_seed(7)
    tm, fm = _pair("LSTM", 3, 4, 2, bidirectional=True, proj_size=2)
    tm.train(train)
    fm.train(train)
    to = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    fo = fg.optim.SGD(fm.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    for _ in range(3):
        to.zero_grad()
        tm(x)[0].pow(2).sum().backward()
        to.step()
        fo.zero_grad()
        fm(_fg(x))[0].pow(2).sum().backward()
        fo.step()
    for (n, a), b in zip(tm.named_parameters(), fm.parameters()):
        _close(a, b, n)


def test_packed_sequence_given_only_sorted_indices_unsorts():
    from torch.nn.utils import rnn as trnn

    x = np.random.default_rng(8).standard_normal((4, 3, 2))
    tp = trnn.pack_padded_sequence(torch.tensor(x), [2, 4, 1], enforce_sorted=False)
    fp = frnn.pack_padded_sequence(fg.tensor(x), [2, 4, 1], enforce_sorted=False)
    t2 = trnn.PackedSequence(tp.data, tp.batch_sizes, tp.sorted_indices)
    f2 = frnn.PackedSequence(fp.data, fp.batch_sizes, fp.sorted_indices)
    _close(t2.unsorted_indices, f2.unsorted_indices, "unsorted_indices")
    _close(trnn.pad_packed_sequence(t2)[0], frnn.pad_packed_sequence(f2)[0], "padded")
    tm, fm = _pair("GRU", 2, 3)
    _close(tm(t2)[1], fm(f2)[1], "h_n in the batch's order")
