"""Programs of the pytorch/examples repository (word_language_model, dcgan, vae,
fast_neural_style, super_resolution, reinforcement_learning, time_sequence_prediction,
siamese_network, mnist_forward_forward, mnist_rnn, regression) ported by renaming ``torch`` to
``ferrograd``: compact float64 versions of their models and training loops, run on both
libraries from the same weights and inputs (outputs, losses, every gradient, the parameters
after a few optimizer steps, train and eval, eager and under ``fg.trace``), and the ferrograd
bugs the ports ran into.

Random draws the programs make (dropout in train mode, ``randn_like`` noise, ``Categorical``
samples, the negative labels of forward-forward) are taken out of the comparison: train mode
runs with dropout 0, the noise and the sampled actions are passed in. The reinforcement
learning programs normalise float32 returns (``torch.tensor`` of Python floats); PyTorch's
float32 ``mean`` of them is one ulp off the correctly rounded value (ferrograd's), so the
ports normalise them in float64."""

from __future__ import annotations

import math
import pickle
import warnings
from collections import deque, namedtuple
from typing import Any, Callable

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_public_programs_port import _close, _copy_weights, _np


@pytest.fixture(autouse=True)
def _host_default_device():
    prev = fg.get_default_device()
    fg.set_default_device("cpu")
    try:
        yield
    finally:
        fg.set_default_device(prev)


def _same_state(tag: str, tm: Any, fm: Any, grads: bool = True, **tol: float) -> None:
    fp = dict(fm.named_parameters())
    assert set(fp) == {k for k, _ in tm.named_parameters()}, tag
    for k, p in tm.named_parameters():
        _close(f"{tag}: parameter {k}", p, fp[k], **tol)
        if grads:
            _close(f"{tag}: gradient of {k}", p.grad, fp[k].grad, **tol)
    fb = dict(fm.named_buffers())
    for k, b in tm.named_buffers():
        _close(f"{tag}: buffer {k}", b, fb[k], **tol)


def _bound(step: Callable[..., Any], *first: Any) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return step(*first, *args)

    return run


def _train_alike(
    build: Callable[[Any, str], Any],
    make_opt: Callable[[Any, Any], Any],
    step: Callable[..., tuple],
    inputs: Callable[[Any, int], tuple],
    modes: tuple[str, ...] = ("train", "eval"),
    steps: int = 3,
    traced: bool = True,
    after: Callable[[Any], None] | None = None,
    **tol: float,
) -> None:
    """``build(lib, mode)`` the model for torch, eager ferrograd and traced ferrograd from the
    same weights; ``steps`` of ``step(lib, model, opt, *inputs(lib, i))`` -> tensors must
    agree, and so must every gradient and the parameters after them. ``after(opt)`` runs
    after each step, outside the traced function (a scheduler's step)."""
    for mode in modes:
        torch.manual_seed(0)
        tm = build(torch, mode)
        fm, pm = build(fg, mode), build(fg, mode)
        _copy_weights(tm, fm)
        _copy_weights(tm, pm)
        for m in (tm, fm, pm):
            getattr(m, mode)()
        topt, fopt, popt = make_opt(torch, tm), make_opt(fg, fm), make_opt(fg, pm)
        run = fg.trace(_bound(step, fg, pm, popt)) if traced else None
        for i in range(steps):
            want = step(torch, tm, topt, *inputs(torch, i))
            got = step(fg, fm, fopt, *inputs(fg, i))
            for j, (a, b) in enumerate(zip(want, got, strict=True)):
                _close(f"{mode} step {i}: output {j}", a, b, **tol)
            if run is not None:
                for j, (a, b) in enumerate(zip(want, run(*inputs(fg, i)), strict=True)):
                    _close(f"{mode} step {i}: traced output {j}", a, b, **tol)
            if after is not None:
                for opt in (topt, fopt, popt):
                    after(opt)
            if i == 0:
                _same_state(f"{mode} step 0", tm, fm, **tol)
        _same_state(f"{mode} after {steps} steps", tm, fm, **tol)
        if run is not None:
            _same_state(f"{mode} after {steps} traced steps", tm, pm, grads=False, **tol)


# ----------------------------------------------------------------------- word_language_model


def _rnn_model(lib: Any, rnn_type: str, dropout: float, tie_weights: bool) -> Any:
    """word_language_model's RNNModel: embedding, dropout, a 2-layer LSTM/GRU with dropout
    between layers, a decoder optionally tied to the embedding, log_softmax."""
    nn, F = lib.nn, lib.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ["LSTM", "GRU"]:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return RNNModel(rnn_type, 11, 6, 6, 2, dropout, tie_weights).double()


def _repackage_hidden(lib: Any, h: Any) -> Any:
    if isinstance(h, lib.Tensor):
        return h.detach()
    return tuple(_repackage_hidden(lib, v) for v in h)


def _batchify(lib: Any, data: Any, bsz: int) -> Any:
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def _get_batch(source: Any, i: int, bptt: int = 3) -> tuple[Any, Any]:
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].view(-1)


_CORPUS = np.random.default_rng(1).integers(0, 11, 2 * 10 + 1)


def _lm_train_step(
    lib: Any, model: Any, lr: Any, data: Any, targets: Any, hidden: Any
) -> tuple[Any, Any, Any]:
    """One batch of word_language_model's ``train()`` without an optimizer: detach the
    hidden state, forward, NLLLoss, backward, clip_grad_norm_, ``p.data.add_(p.grad, -lr)``."""
    criterion = lib.nn.NLLLoss()
    if isinstance(lr, float):
        model.zero_grad()
    else:
        lr.zero_grad()
    hidden = _repackage_hidden(lib, hidden)
    output, hidden = model(data, hidden)
    loss = criterion(output, targets)
    loss.backward()
    norm = lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    if isinstance(lr, float):
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    else:  # --use_optimizer
        lr.step()
    return output, loss, norm, hidden


@pytest.mark.parametrize(
    ("rnn_type", "tied", "adamw"),
    [
        ("LSTM", True, False),
        ("GRU", False, False),
        ("GRU", True, False),
        ("RNN_TANH", True, False),
        ("RNN_RELU", False, False),
        ("LSTM", True, True),
    ],
)
def test_word_language_model_rnn_trains_as_in_torch(rnn_type: str, tied: bool, adamw: bool) -> None:
    for mode, dropout in (("train", 0.0), ("eval", 0.5)):
        torch.manual_seed(0)
        tm = _rnn_model(torch, rnn_type, dropout, tied)
        fm, pm = (_rnn_model(fg, rnn_type, dropout, tied) for _ in range(2))
        for m in (fm, pm):
            _copy_weights(tm, m)
            assert (m.decoder.weight is m.encoder.weight) == tied
        for m in (tm, fm, pm):
            getattr(m, mode)()
        lrs = {
            key: lib.optim.AdamW(m.parameters(), lr=1e-2) if adamw else 20.0
            for key, lib, m in ((torch, torch, tm), (fg, fg, fm), ("p", fg, pm))
        }
        run = fg.trace(_bound(_lm_train_step, fg, pm, lrs["p"]))
        sources = {lib: _batchify(lib, lib.tensor(_CORPUS), 2) for lib in (torch, fg)}
        hidden = {torch: tm.init_hidden(2), fg: fm.init_hidden(2), "p": pm.init_hidden(2)}
        for batch, i in enumerate(range(0, sources[torch].size(0) - 1, 3)):
            want = _lm_train_step(
                torch, tm, lrs[torch], *_get_batch(sources[torch], i), hidden[torch]
            )
            got = _lm_train_step(fg, fm, lrs[fg], *_get_batch(sources[fg], i), hidden[fg])
            traced = run(*_get_batch(sources[fg], i), hidden["p"])
            hidden = {torch: want[-1], fg: got[-1], "p": traced[-1]}
            for other in (got, traced):
                for j in range(3):
                    _close(f"{mode} batch {batch}: output {j}", want[j], other[j])
                want_h = want[-1] if rnn_type == "LSTM" else (want[-1],)
                other_h = other[-1] if rnn_type == "LSTM" else (other[-1],)
                for a, b in zip(want_h, other_h, strict=True):
                    _close(f"{mode} batch {batch}: hidden", a, b)
            if batch == 0:
                _same_state(f"{mode} batch 0", tm, fm)
        assert batch >= 2
        _same_state(f"{mode} after the epoch", tm, fm)
        _same_state(f"{mode} after the traced epoch", tm, pm, grads=False)
        # evaluate(): no_grad, a running total of ``len(data) * criterion(...).item()``
        totals = []
        for lib, m in ((torch, tm), (fg, fm)):
            m.eval()
            total, h = 0.0, m.init_hidden(2)
            with lib.no_grad():
                for i in range(0, sources[lib].size(0) - 1, 3):
                    data, targets = _get_batch(sources[lib], i)
                    output, h = m(data, h)
                    h = _repackage_hidden(lib, h)
                    total += len(data) * lib.nn.NLLLoss()(output, targets).item()
            assert not output.requires_grad
            totals.append(total)
        assert totals[1] == pytest.approx(totals[0], rel=1e-10)


def _corpus_ids(lib: Any, lines: list[list[int]]) -> Any:
    """word_language_model's Corpus.tokenize: one int64 tensor per line, concatenated."""
    idss = []
    for ids in lines:
        idss.append(lib.tensor(ids).type(lib.int64))
    return lib.cat(idss)


def _safe_globals(lib: Any) -> list:
    nn = lib.nn
    return [
        nn.functional.relu,
        nn.modules.activation.MultiheadAttention,
        nn.modules.container.ModuleList,
        nn.modules.dropout.Dropout,
        nn.modules.linear.Linear,
        nn.modules.linear.NonDynamicallyQuantizableLinear,
        nn.modules.normalization.LayerNorm,
        nn.modules.sparse.Embedding,
        nn.modules.rnn.GRU,
        nn.modules.rnn.LSTM,
        nn.modules.rnn.RNN,
        nn.modules.transformer.TransformerEncoder,
        nn.modules.transformer.TransformerEncoderLayer,
    ]


def test_word_language_model_safe_globals_name_the_same_classes() -> None:
    # main.py and generate.py load whole-model checkpoints under
    # ``torch.serialization.safe_globals([...])`` naming these classes by their module paths;
    # ``nn.modules.linear.NonDynamicallyQuantizableLinear`` (MultiheadAttention's out_proj)
    # was missing
    names = [f"{c.__module__.split('.')[-1]}.{c.__name__}" for c in _safe_globals(fg)[1:]]
    assert names[4] == "attention.NonDynamicallyQuantizableLinear"
    for lib in (torch, fg):
        attn = lib.nn.MultiheadAttention(4, 2)
        assert type(attn.out_proj) is lib.nn.modules.linear.NonDynamicallyQuantizableLinear
        assert isinstance(attn.out_proj, lib.nn.Linear)
        assert (
            repr(attn)
            .splitlines()[1]
            .strip()
            .startswith("(out_proj): NonDynamicallyQuantizableLinear(in_features=4")
        )
    # a whole encoder saved and loaded back (weights_only) under those safe globals only
    import io

    x = np.random.default_rng(21).standard_normal((3, 2, 8))
    outs, encs = [], {}
    for lib in (torch, fg):
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        encs[lib] = lib.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).double()
    _copy_weights(encs[torch], encs[fg])
    for lib, enc in encs.items():
        buf = io.BytesIO()
        lib.save(enc, buf)
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError):
            lib.load(buf)
        buf.seek(0)
        with lib.serialization.safe_globals(_safe_globals(lib)):
            loaded = lib.load(buf)
        assert type(loaded.layers[1].self_attn.out_proj).__name__ == (
            "NonDynamicallyQuantizableLinear"
        )
        outs.append((enc(lib.tensor(x)), loaded(lib.tensor(x))))
    for a, b in zip(outs[0], outs[1], strict=True):
        _close("encoder output", a, b)
    _close("loaded encoder", outs[1][0], outs[1][1], rtol=0, atol=0)


def test_word_language_model_checkpoint_and_generate_as_in_torch() -> None:
    # main.py saves the best model's weights and reloads them; generate.py feeds each
    # sampled word back (``input.fill_(word_idx)`` for the RNN, ``cat`` for the Transformer)
    # under no_grad; the sampled word is the most likely one here (multinomial draws differ)
    import io

    ids = {lib: _corpus_ids(lib, [[1, 2, 3, 0], [4, 5, 0], [6, 2, 0]]) for lib in (torch, fg)}
    assert ids[fg].dtype == fg.int64
    _close("corpus ids", ids[torch], ids[fg])
    torch.manual_seed(0)
    models = {torch: (_rnn_model(torch, "LSTM", 0.5, True), _transformer_model(torch, 0.5))}
    models[fg] = (_rnn_model(fg, "LSTM", 0.5, True), _transformer_model(fg, 0.5))
    for tm, fm in zip(models[torch], models[fg], strict=True):
        buf = io.BytesIO()
        torch.save(tm.state_dict(), buf)
        buf.seek(0)
        fbuf = io.BytesIO()
        fg.save({k: fg.tensor(v.numpy()) for k, v in torch.load(buf).items()}, fbuf)
        fbuf.seek(0)
        fm.load_state_dict(fg.load(fbuf))
        _same_state("loaded", tm, fm, grads=False)
    models[fg][0].rnn.flatten_parameters()
    words = {}
    for lib in (torch, fg):
        rnn, transformer = models[lib]
        for m in (rnn, transformer):
            m.eval()
        hidden = rnn.init_hidden(1)
        inputs = [lib.tensor([[3]]), lib.tensor([[3]])]
        got = []
        with lib.no_grad():
            for _ in range(4):
                output, hidden = rnn(inputs[0], hidden)
                word_weights = output.squeeze().div(0.7).exp().cpu()
                assert 0 <= int(lib.multinomial(word_weights, 1)[0]) < 11
                word_idx = word_weights.argmax()
                inputs[0].fill_(word_idx)
                output = transformer(inputs[1], False)
                tword_weights = output[-1].squeeze().div(0.7).exp().cpu()
                tword_idx = lib.multinomial(tword_weights, 1)[0] * 0 + tword_weights.argmax()
                word_tensor = lib.Tensor([[tword_idx]]).long()
                inputs[1] = lib.cat([inputs[1], word_tensor], 0)
                got += [word_weights, int(word_idx), tword_weights]
        assert not word_weights.requires_grad
        got.append(inputs[1])
        words[lib] = got
    for j, (a, b) in enumerate(zip(words[torch], words[fg], strict=True)):
        _close(f"generated {j}", a, b)


def _transformer_model(lib: Any, dropout: float) -> Any:
    """word_language_model's TransformerModel: a subclass of nn.Transformer (whose decoder
    stack it replaces by a Linear), a float32 sinusoidal PositionalEncoding buffer built with
    strided slice assignment, and a causal mask ``log(tril(ones))``."""
    nn, F = lib.nn, lib.nn.functional

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len, dtype=lib.float).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(
                d_model=ninp,
                nhead=nhead,
                dim_feedforward=nhid,
                num_encoder_layers=nlayers,
                num_decoder_layers=1,
                dropout=dropout,
            )
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout, max_len=50)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return lib.log(lib.tril(lib.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    with pytest.warns(UserWarning) if lib is torch else _nullcontext():
        model = TransformerModel(11, 8, 2, 16, 2, dropout)
    return model.double()


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("has_mask", [True, False])
def test_word_language_model_transformer_trains_as_in_torch(has_mask: bool) -> None:
    source = _CORPUS[:13].reshape(-1, 1).repeat(2, 1)  # (seq, batch) after batchify

    def step(lib, model, opt, data, targets):
        opt.zero_grad()
        output = model(data, has_mask=has_mask)
        output = output.view(-1, 11)
        loss = lib.nn.NLLLoss()(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        return output, loss

    def inputs(lib, i):
        return _get_batch(lib.tensor(source), 3 * i, bptt=4)

    _train_alike(
        lambda lib, mode: _transformer_model(lib, 0.0 if mode == "train" else 0.5),
        lambda lib, m: lib.optim.AdamW(m.parameters(), lr=1e-2),
        step,
        inputs,
    )


def test_tensor_of_a_deque_of_python_floats_is_float32_as_torch() -> None:
    # reinforce builds its returns as ``torch.tensor(deque_of_floats)``: ferrograd read the
    # deque through numpy, as float64, where PyTorch reads any Python sequence as a list
    from collections import UserList

    for data in (deque([1.0, 2.5]), UserList([1.0, 2.5]), deque([1, 2]), deque([True])):
        want, got = torch.tensor(data), fg.tensor(data)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], data
        np.testing.assert_array_equal(_np(got), _np(want))
    t = fg.tensor(deque([fg.tensor(1.0, dtype=fg.float64), 2.0]))
    assert t.dtype == fg.float64


def test_generate_square_subsequent_mask_matches_torch() -> None:
    for sz in (1, 4):
        want = torch.nn.Transformer.generate_square_subsequent_mask(sz, dtype=torch.float64)
        got = fg.nn.Transformer.generate_square_subsequent_mask(sz, dtype=fg.float64)
        assert got.dtype == fg.float64
        np.testing.assert_array_equal(_np(got), _np(want))
        own = fg.log(fg.tril(fg.ones(sz, sz)))
        np.testing.assert_array_equal(_np(own), _np(want))


# ------------------------------------------------------------------------------------ dcgan


def _dcgan(lib: Any, nz: int = 4, ngf: int = 2, ndf: int = 2, nc: int = 1) -> tuple[Any, Any]:
    """dcgan's Generator (ConvTranspose2d/BatchNorm2d/ReLU(True) to a Tanh 64x64 image) and
    Discriminator (strided Conv2d/BatchNorm2d/LeakyReLU(0.2, inplace) to a Sigmoid), both
    initialised by ``weights_init`` keyed on ``m.__class__.__name__``."""
    nn = lib.nn

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            lib.nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            lib.nn.init.normal_(m.weight, 1.0, 0.02)
            lib.nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.ngpu = 1
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 8),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
                nn.Tanh(),
            )

        def forward(self, input):
            if (input.is_cuda or input.is_xpu) and self.ngpu > 1:
                raise AssertionError("one device here")
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.ngpu = 1
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 4),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 8),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            if (input.is_cuda or input.is_xpu) and self.ngpu > 1:
                raise AssertionError("one device here")
            output = self.main(input)
            return output.view(-1, 1).squeeze(1)

    net_g, net_d = Generator().double(), Discriminator().double()
    net_g.apply(weights_init)
    net_d.apply(weights_init)
    return net_g, net_d


def _dcgan_step(lib, net_g, net_d, opt_d, opt_g, real_cpu, noise):
    criterion = lib.nn.BCELoss()
    net_d.zero_grad()
    batch_size = real_cpu.size(0)
    label = lib.full((batch_size,), 1, dtype=real_cpu.dtype, device=real_cpu.device)
    output = net_d(real_cpu)
    err_d_real = criterion(output, label)
    err_d_real.backward()
    fake = net_g(noise)
    label.fill_(0)
    output = net_d(fake.detach())
    err_d_fake = criterion(output, label)
    err_d_fake.backward()
    err_d = err_d_real + err_d_fake
    opt_d.step()
    net_g.zero_grad()
    label.fill_(1)
    output = net_d(fake)
    err_g = criterion(output, label)
    err_g.backward()
    opt_g.step()
    return fake, output, err_d, err_g


def test_dcgan_weights_init_reaches_the_same_modules() -> None:
    fg.manual_seed(0)
    net_g, net_d = _dcgan(fg)
    for m in (*net_g.modules(), *net_d.modules()):
        name = m.__class__.__name__
        if "BatchNorm" in name:
            assert float(m.bias.abs().max()) == 0.0
            assert abs(float(m.weight.mean()) - 1.0) < 0.1 and float(m.weight.std()) > 0
        elif "Conv" in name:
            assert float(m.weight.abs().mean()) < 0.05 and float(m.weight.std()) > 0
    assert [m.__class__.__name__ for m in net_g.main][:3] == [
        "ConvTranspose2d",
        "BatchNorm2d",
        "ReLU",
    ]


def test_dcgan_adversarial_steps_train_as_in_torch() -> None:
    rng = np.random.default_rng(2)
    reals = np.tanh(rng.standard_normal((3, 2, 1, 64, 64)))
    noises = rng.standard_normal((3, 2, 4, 1, 1))
    for mode in ("train", "eval"):
        torch.manual_seed(0)
        nets = {torch: _dcgan(torch)}
        nets[fg], nets["p"] = _dcgan(fg), _dcgan(fg)
        opts = {}
        for key, (g, d) in nets.items():
            if key is not torch:
                _copy_weights(nets[torch][0], g)
                _copy_weights(nets[torch][1], d)
            for m in (g, d):
                getattr(m, mode)()
            lib = torch if key is torch else fg
            opts[key] = (
                lib.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999)),
                lib.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999)),
            )
        run = fg.trace(_bound(_dcgan_step, fg, *nets["p"], *opts["p"]))
        for i in range(3):
            want = _dcgan_step(
                torch, *nets[torch], *opts[torch], *map(torch.tensor, (reals[i], noises[i]))
            )
            got = _dcgan_step(fg, *nets[fg], *opts[fg], *map(fg.tensor, (reals[i], noises[i])))
            traced = run(*map(fg.tensor, (reals[i], noises[i])))
            for j, (a, b, c) in enumerate(zip(want, got, traced, strict=True)):
                _close(f"{mode} step {i}: output {j}", a, b)
                _close(f"{mode} step {i}: traced output {j}", a, c)
            if i == 0:
                for k in (0, 1):
                    _same_state(f"{mode} step 0 net {k}", nets[torch][k], nets[fg][k])
        for k in (0, 1):
            _same_state(f"{mode} net {k}", nets[torch][k], nets[fg][k])
            _same_state(f"{mode} traced net {k}", nets[torch][k], nets["p"][k], grads=False)


# -------------------------------------------------------------------------------------- vae


def _vae(lib: Any, mode: str = "train") -> Any:
    """vae's VAE (784-400-20 encoder to mean and log-variance, 20-400-784 sigmoid decoder);
    ``reparameterize`` takes the noise ``randn_like`` would draw as an argument."""
    nn, F = lib.nn, lib.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 400)
            self.fc21 = nn.Linear(400, 20)
            self.fc22 = nn.Linear(400, 20)
            self.fc3 = nn.Linear(20, 400)
            self.fc4 = nn.Linear(400, 784)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = lib.exp(0.5 * logvar)
            assert lib.randn_like(std).shape == eps.shape
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return lib.sigmoid(self.fc4(h3))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 784))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    return VAE().double()


def _vae_loss(lib, recon_x, x, mu, logvar):
    bce = lib.nn.functional.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def test_vae_trains_as_in_torch() -> None:
    rng = np.random.default_rng(3)
    data = rng.uniform(0, 1, (3, 4, 1, 28, 28))
    eps = rng.standard_normal((3, 4, 20))

    def step(lib, model, opt, data, eps):
        opt.zero_grad()
        recon_batch, mu, logvar = model(data, eps)
        loss = _vae_loss(lib, recon_batch, data, mu, logvar)
        loss.backward()
        opt.step()
        return recon_batch, mu, logvar, loss

    _train_alike(
        _vae,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3),
        step,
        lambda lib, i: (lib.tensor(data[i]), lib.tensor(eps[i])),
    )


# ------------------------------------------------------------------------ fast_neural_style


def _style_nets(lib: Any, mode: str = "train") -> Any:
    """fast_neural_style's TransformerNet at widths 4/8/16 with two residual blocks
    (ReflectionPad2d + Conv2d layers, InstanceNorm2d(affine=True), nearest ``interpolate``
    upsampling), next to a small frozen VGG-style feature net returning a namedtuple of
    four slices."""
    nn = lib.nn

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            return out + residual

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = lib.nn.functional.interpolate(
                    x_in, mode="nearest", scale_factor=self.upsample
                )
            return self.conv2d(self.reflection_pad(x_in))

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ConvLayer(3, 4, kernel_size=9, stride=1)
            self.in1 = nn.InstanceNorm2d(4, affine=True)
            self.conv2 = ConvLayer(4, 8, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(8, affine=True)
            self.conv3 = ConvLayer(8, 16, kernel_size=3, stride=2)
            self.in3 = nn.InstanceNorm2d(16, affine=True)
            self.res1 = ResidualBlock(16)
            self.res2 = ResidualBlock(16)
            self.deconv1 = UpsampleConvLayer(16, 8, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(8, affine=True)
            self.deconv2 = UpsampleConvLayer(8, 4, kernel_size=3, stride=1, upsample=2)
            self.in5 = nn.InstanceNorm2d(4, affine=True)
            self.deconv3 = ConvLayer(4, 3, kernel_size=9, stride=1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.relu(self.in3(self.conv3(y)))
            y = self.res1(y)
            y = self.res2(y)
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.relu(self.in5(self.deconv2(y)))
            return self.deconv3(y)

    class Vgg(nn.Module):
        def __init__(self, requires_grad=False):
            super().__init__()
            feats = [
                nn.Conv2d(3, 4, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(4, 4, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=2, stride=2),
                nn.Conv2d(4, 8, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=2, stride=2),
                nn.Conv2d(8, 8, 3, padding=1),
                nn.ReLU(inplace=True),
            ]
            self.slice1 = nn.Sequential()
            self.slice2 = nn.Sequential()
            self.slice3 = nn.Sequential()
            self.slice4 = nn.Sequential()
            for x in range(4):
                self.slice1.add_module(str(x), feats[x])
            for x in range(4, 5):
                self.slice2.add_module(str(x), feats[x])
            for x in range(5, 7):
                self.slice3.add_module(str(x), feats[x])
            for x in range(7, 10):
                self.slice4.add_module(str(x), feats[x])
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h_relu1_2 = h = self.slice1(X)
            h_relu2_2 = h = self.slice2(h)
            h_relu3_3 = h = self.slice3(h)
            h_relu4_3 = self.slice4(h)
            vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])
            return vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = TransformerNet()
            self.vgg = Vgg(requires_grad=False)

    return Both().double()


def _gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def _normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def test_fast_neural_style_trains_as_in_torch() -> None:
    rng = np.random.default_rng(4)
    images = rng.uniform(0, 255, (3, 2, 3, 16, 16))
    style_image = rng.uniform(0, 255, (1, 3, 16, 16))

    # content and style weights 1 and 1e3 (the program's defaults, 1e5 and 1e10, scale the
    # rounding noise in the zero gradient of the conv biases ahead of an InstanceNorm to where
    # Adam's first steps, g / (|g| + eps), turn it into visible updates)
    def step(lib, both, opt, x, style):
        transformer, vgg, mse_loss = both.transformer, both.vgg, lib.nn.MSELoss()
        style = style.repeat(2, 1, 1, 1)
        features_style = vgg(_normalize_batch(style))
        gram_style = [_gram_matrix(y) for y in features_style]
        n_batch = len(x)
        opt.zero_grad()
        y = transformer(x)
        y = _normalize_batch(y)
        x = _normalize_batch(x)
        features_y = vgg(y)
        features_x = vgg(x)
        content_loss = 1.0 * mse_loss(features_y.relu2_2, features_x.relu2_2)
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = _gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= 1e3
        total_loss = content_loss + style_loss
        total_loss.backward()
        opt.step()
        return y, content_loss, style_loss, total_loss

    _train_alike(
        _style_nets,
        lambda lib, m: lib.optim.Adam(m.transformer.parameters(), 1e-3),
        step,
        lambda lib, i: (lib.tensor(images[i]), lib.tensor(style_image)),
    )


# ----------------------------------------------------------------------- super_resolution


def _super_resolution(lib: Any, mode: str = "train", upscale_factor: int = 2) -> Any:
    """super_resolution's Net at widths 8/8/4: ReLU convs to ``r**2`` channels, PixelShuffle,
    ``init.orthogonal_`` with ``calculate_gain('relu')``."""
    nn, init = lib.nn, lib.nn.init

    class Net(nn.Module):
        def __init__(self, upscale_factor):
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 8, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(8, 8, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(8, 4, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(4, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            self._initialize_weights()

        def forward(self, x):
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            return self.pixel_shuffle(self.conv4(x))

        def _initialize_weights(self):
            init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
            init.orthogonal_(self.conv4.weight)

    return Net(upscale_factor).double()


def test_super_resolution_trains_as_in_torch() -> None:
    rng = np.random.default_rng(5)
    low, high = rng.uniform(0, 1, (3, 2, 1, 6, 6)), rng.uniform(0, 1, (3, 2, 1, 12, 12))

    def step(lib, model, opt, input, target):
        opt.zero_grad()
        out = model(input)
        loss = lib.nn.MSELoss()(out, target)
        loss.backward()
        opt.step()
        return out, loss

    _train_alike(
        _super_resolution,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-3),
        step,
        lambda lib, i: (lib.tensor(low[i]), lib.tensor(high[i])),
    )


def test_super_resolution_orthogonal_init_with_relu_gain() -> None:
    for name in ("relu", "linear", "tanh", "sigmoid", "conv2d"):
        assert fg.nn.init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    assert fg.nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(
        torch.nn.init.calculate_gain("leaky_relu", 0.2), rel=1e-15
    )
    fg.manual_seed(0)
    net = _super_resolution(fg)
    gain = math.sqrt(2.0)
    for conv, g in ((net.conv1, gain), (net.conv2, gain), (net.conv3, gain), (net.conv4, 1.0)):
        w = _np(conv.weight).reshape(conv.weight.shape[0], -1)
        rows, cols = w.shape
        gram = w @ w.T if rows <= cols else w.T @ w
        # (initialised in float32, before ``.double()``)
        np.testing.assert_allclose(gram, g * g * np.eye(min(rows, cols)), atol=1e-6)


# ------------------------------------------------------------------- reinforcement_learning


_STATES = np.random.default_rng(6).standard_normal((3, 5, 4))
_ACTIONS = np.random.default_rng(7).integers(0, 2, (3, 5))
_REWARDS = [[1.0, 1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0, 1.0]]
_EPS = float(np.finfo(np.float32).eps)


def _reinforce_policy(lib: Any, mode: str = "train") -> Any:
    """reinforce's Policy: Linear, Dropout(0.6) (0 in train mode here), ReLU, Linear, softmax;
    the episode's log-probabilities and rewards kept in lists on the module."""
    nn, F = lib.nn, lib.nn.functional

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 128)
            self.dropout = nn.Dropout(p=0.0 if mode == "train" else 0.6)
            self.affine2 = nn.Linear(128, 2)
            self.saved_log_probs = []
            self.rewards = []

        def forward(self, x):
            x = self.affine1(x)
            x = self.dropout(x)
            x = F.relu(x)
            action_scores = self.affine2(x)
            return F.softmax(action_scores, dim=1)

    return Policy().double()


def _reinforce_episode(lib, policy, optimizer, states, actions, rewards):
    Categorical = lib.distributions.Categorical
    for t in range(len(rewards)):
        state = states[t].double().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        sampled = m.sample()
        assert sampled.shape == (1,) and sampled.dtype == lib.int64
        action = actions[t : t + 1]  # the action the sampler drew in the recorded episode
        policy.saved_log_probs.append(m.log_prob(action))
        policy.rewards.append(rewards[t])
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + 0.99 * R
        returns.appendleft(R)
    returns = lib.tensor(returns)
    assert returns.dtype == lib.float32  # (Python floats, in a deque)
    returns = returns.double()  # (see the module docstring)
    returns = (returns - returns.mean()) / (returns.std() + _EPS)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = lib.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    logp = lib.cat(policy.saved_log_probs)
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return logp, returns, policy_loss


def test_reinforce_trains_as_in_torch() -> None:
    _train_alike(
        _reinforce_policy,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=1e-2),
        lambda lib, m, opt, s, a, i: _reinforce_episode(lib, m, opt, s, a, _REWARDS[i]),
        lambda lib, i: (lib.tensor(_STATES[i]), lib.tensor(_ACTIONS[i]), i),
    )


def _actor_critic(lib: Any, mode: str = "train") -> Any:
    """actor_critic's Policy: a shared Linear+ReLU trunk, a softmax action head and a value
    head; saved (log_prob, value) namedtuples."""
    nn, F = lib.nn, lib.nn.functional

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 128)
            self.action_head = nn.Linear(128, 2)
            self.value_head = nn.Linear(128, 1)
            self.saved_actions = []
            self.rewards = []

        def forward(self, x):
            x = F.relu(self.affine1(x))
            action_prob = F.softmax(self.action_head(x), dim=-1)
            state_values = self.value_head(x)
            return action_prob, state_values

    return Policy().double()


SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


def _actor_critic_episode(lib, model, optimizer, states, actions, rewards):
    F = lib.nn.functional
    for t in range(len(rewards)):
        state = states[t].double()
        probs, state_value = model(state)
        m = lib.distributions.Categorical(probs)
        assert m.sample().shape == ()
        action = actions[t]
        model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
        model.rewards.append(rewards[t])
    R = 0
    saved_actions = model.saved_actions
    policy_losses, value_losses, returns = [], [], []
    for r in model.rewards[::-1]:
        R = r + 0.99 * R
        returns.insert(0, R)
    returns = lib.tensor(returns)
    assert returns.dtype == lib.float32
    returns = returns.double()
    returns = (returns - returns.mean()) / (returns.std() + _EPS)
    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, lib.tensor([R])))
    optimizer.zero_grad()
    loss = lib.stack(policy_losses).sum() + lib.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    values = lib.cat([v for _, v in saved_actions])
    del model.rewards[:]
    del model.saved_actions[:]
    return values, returns, loss


def test_actor_critic_trains_as_in_torch() -> None:
    _train_alike(
        _actor_critic,
        lambda lib, m: lib.optim.Adam(m.parameters(), lr=3e-2),
        lambda lib, m, opt, s, a, i: _actor_critic_episode(lib, m, opt, s, a, _REWARDS[i]),
        lambda lib, i: (lib.tensor(_STATES[i]), lib.tensor(_ACTIONS[i]), i),
        modes=("train",),
        traced=False,
    )


def test_actor_critic_advantage_item_is_a_trace_error() -> None:
    # the advantage reads ``value.item()`` of a value computed in the step: not traceable
    model = _actor_critic(fg)
    opt = fg.optim.Adam(model.parameters(), lr=3e-2)
    run = fg.trace(lambda s, a: _actor_critic_episode(fg, model, opt, s, a, _REWARDS[0]))
    with pytest.raises(fg.TraceError, match="item"):
        run(fg.tensor(_STATES[0]), fg.tensor(_ACTIONS[0]))


# ----------------------------------------------------------------- time_sequence_prediction


def _sequence(lib: Any, mode: str = "train") -> Any:
    """time_sequence_prediction's Sequence: two LSTMCells over the input's time steps, a
    Linear read-out, then ``future`` steps fed back from the model's own output."""
    nn = lib.nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 51)
            self.lstm2 = nn.LSTMCell(51, 51)
            self.linear = nn.Linear(51, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = lib.zeros(input.size(0), 51, dtype=lib.double)
            c_t = lib.zeros(input.size(0), 51, dtype=lib.double)
            h_t2 = lib.zeros(input.size(0), 51, dtype=lib.double)
            c_t2 = lib.zeros(input.size(0), 51, dtype=lib.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return lib.cat(outputs, dim=1)

    seq = Sequence()
    seq.double()
    return seq


def _sine_data() -> np.ndarray:
    rng = np.random.RandomState(2)
    t, length, n = 20, 13, 6
    x = np.empty((n, length), "int64")
    x[:] = np.array(range(length)) + rng.randint(-4 * t, 4 * t, n).reshape(n, 1)
    return np.sin(x / 1.0 / t).astype("float64")


def _lbfgs_step(lib, seq, optimizer, input, target, test_input, test_target):
    criterion = lib.nn.MSELoss()
    losses = []

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        losses.append(loss.item())
        loss.backward()
        return loss

    optimizer.step(closure)
    with lib.no_grad():
        future = 5
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
    return lib.tensor(losses), pred, loss


def test_time_sequence_prediction_lbfgs_trains_as_in_torch() -> None:
    data = _sine_data()
    arrays = (data[3:, :-1], data[3:, 1:], data[:3, :-1], data[:3, 1:])
    _train_alike(
        _sequence,
        lambda lib, m: lib.optim.LBFGS(m.parameters(), lr=0.8, max_iter=4),
        _lbfgs_step,
        lambda lib, i: tuple(lib.from_numpy(a) for a in arrays),  # (strided views)
        modes=("train",),
        steps=2,
        traced=False,
        rtol=1e-7,
    )


def test_time_sequence_prediction_closure_reading_the_loss_is_a_trace_error() -> None:
    data = _sine_data()
    seq = _sequence(fg)
    opt = fg.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=2)
    run = fg.trace(lambda *a: _lbfgs_step(fg, seq, opt, *a))
    with pytest.raises(fg.TraceError):
        run(*(fg.tensor(a) for a in (data[3:, :-1], data[3:, 1:], data[:3, :-1], data[:3, 1:])))


# -------------------------------------------------------------------------- siamese_network


def _siamese(lib: Any, mode: str = "train") -> Any:
    """siamese_network's SiameseNetwork over a small stand-in for torchvision's resnet18 (a
    7x7 stride-2 stem, BatchNorm, max-pool, one BasicBlock, adaptive average pool, fc): the
    trunk is ``Sequential(*list(resnet.children())[:-1])``, Linear layers initialised by
    ``apply`` with ``xavier_uniform_`` and ``bias.data.fill_(0.01)``."""
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += x
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = nn.Sequential(BasicBlock(4))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(4, 10)

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.resnet = ResNet()
            self.resnet.conv1 = nn.Conv2d(
                1, 4, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False
            )
            self.fc_in_features = self.resnet.fc.in_features
            self.resnet = lib.nn.Sequential(*(list(self.resnet.children())[:-1]))
            self.fc = nn.Sequential(
                nn.Linear(self.fc_in_features * 2, 16),
                nn.ReLU(inplace=True),
                nn.Linear(16, 1),
            )
            self.sigmoid = nn.Sigmoid()
            self.resnet.apply(self.init_weights)
            self.fc.apply(self.init_weights)

        def init_weights(self, m):
            if isinstance(m, nn.Linear):
                lib.nn.init.xavier_uniform_(m.weight)
                m.bias.data.fill_(0.01)

        def forward_once(self, x):
            output = self.resnet(x)
            return output.view(output.size()[0], -1)

        def forward(self, input1, input2):
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)
            output = lib.cat((output1, output2), 1)
            output = self.fc(output)
            return self.sigmoid(output)

    return SiameseNetwork().double()


def test_siamese_network_trains_as_in_torch() -> None:
    rng = np.random.default_rng(8)
    im1, im2 = rng.uniform(0, 1, (2, 3, 4, 1, 16, 16))
    targets = rng.integers(0, 2, (3, 4)).astype(np.float64)
    fg.manual_seed(0)
    net = _siamese(fg)
    for m in net.fc:
        if isinstance(m, fg.nn.Linear):
            np.testing.assert_array_equal(_np(m.bias), np.float32(0.01))  # (built float32)
    assert [type(m).__name__ for m in net.resnet] == [
        "Conv2d",
        "BatchNorm2d",
        "ReLU",
        "MaxPool2d",
        "Sequential",
        "AdaptiveAvgPool2d",
    ]

    def make_opt(lib, m):
        opt = lib.optim.Adadelta(m.parameters(), lr=1.0)
        opt.scheduler = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        return opt

    def step(lib, model, opt, images_1, images_2, targets):
        criterion = lib.nn.BCELoss()
        opt.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        opt.step()
        return outputs, loss

    _train_alike(
        _siamese,
        make_opt,
        step,
        lambda lib, i: (lib.tensor(im1[i]), lib.tensor(im2[i]), lib.tensor(targets[i])),
        after=lambda opt: opt.scheduler.step(),
    )


# -------------------------------------------------------------------- mnist_forward_forward


def _forward_forward(lib: Any, dims: list[int], lr: float, epochs: int, device: Any = "cpu") -> Any:
    """mnist_forward_forward's Net: Layers that subclass nn.Linear (built with positional
    device/dtype), own an Adam each and override ``train`` with their local goodness loss."""
    nn = lib.nn

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = lib.nn.ReLU()
            self.opt = lib.optim.Adam(self.parameters(), lr=lr)
            self.threshold = 2.0
            self.num_epochs = epochs
            self.losses = []

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(lib.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg):
            for i in range(self.num_epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = lib.log1p(
                    lib.exp(lib.cat([-g_pos + self.threshold, g_neg - self.threshold]))
                ).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.losses.append(loss.detach())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    class Net(lib.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                # (the program's ``.to(device)``, here with the float64 of the comparison:
                # each Layer built its Adam before the move)
                self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device, lib.float64)]

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = _overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = lib.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for i, layer in enumerate(self.layers):
                h_pos, h_neg = layer.train(h_pos, h_neg)

    return Net(dims)


def _overlay_y_on_x(x, y, classes=10):
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


def test_mnist_forward_forward_trains_as_in_torch() -> None:
    rng = np.random.default_rng(9)
    xv, yv = rng.standard_normal((6, 30)), rng.integers(0, 10, 6)
    y_negv = (yv + rng.integers(1, 10, 6)) % 10
    nets, got = {}, {}
    for lib in (torch, fg):
        torch.manual_seed(0)
        nets[lib] = _forward_forward(lib, [30, 12, 8], 0.03, 3)
    for tl, fl in zip(nets[torch].layers, nets[fg].layers, strict=True):
        _copy_weights(tl, fl)
    for lib in (torch, fg):
        x, y, y_neg = lib.tensor(xv), lib.tensor(yv), lib.tensor(y_negv)
        x_pos = _overlay_y_on_x(x, y)
        x_neg = _overlay_y_on_x(x, y_neg)
        nets[lib].train(x_pos, x_neg)
        got[lib] = (x_pos, x_neg, nets[lib].predict(x), *nets[lib].layers[1].losses)
        got[lib] += tuple(p for layer in nets[lib].layers for p in (layer.weight, layer.bias))
        got[lib] += tuple(p.grad for layer in nets[lib].layers for p in (layer.weight, layer.bias))
    assert len(got[fg]) == 3 + 3 + 8
    for j, (a, b) in enumerate(zip(got[torch], got[fg], strict=True)):
        _close(f"forward-forward value {j}", a, b)
    # each Layer's train() (its epochs of Adam steps) under fg.trace, called twice
    fg.manual_seed(0)
    net = _forward_forward(fg, [30, 12, 8], 0.03, 3)
    for tl, fl in zip(nets[torch].layers, net.layers, strict=True):
        _copy_weights(tl, fl)
    for lib, n in ((torch, nets[torch]), (fg, net)):
        if lib is torch:
            for layer in n.layers:
                layer.opt.state.clear()
            torch.manual_seed(0)
            fresh = _forward_forward(torch, [30, 12, 8], 0.03, 3)
            for src, dst in zip(n.layers, fresh.layers, strict=True):
                dst.load_state_dict(src.state_dict())
            n = nets[torch] = fresh
        traced = [fg.trace(layer.train) if lib is fg else layer.train for layer in n.layers]
        x = lib.tensor(xv)
        h = _overlay_y_on_x(x, lib.tensor(yv)), _overlay_y_on_x(x, lib.tensor(y_negv))
        outs = []
        for _ in range(2):
            h_pos, h_neg = h
            for run in traced:
                h_pos, h_neg = run(h_pos, h_neg)
                outs += [h_pos, h_neg]
        got[lib] = outs + [p for layer in n.layers for p in (layer.weight, layer.bias)]
    for j, (a, b) in enumerate(zip(got[torch], got[fg], strict=True)):
        _close(f"traced forward-forward value {j}", a, b)


def test_vae_test_loop_as_in_torch() -> None:
    # vae's test(): eval, no_grad, summed loss, a comparison grid of inputs and reconstructions
    rng = np.random.default_rng(13)
    data, eps = rng.uniform(0, 1, (4, 1, 28, 28)), rng.standard_normal((4, 20))
    torch.manual_seed(0)
    tm, fm = _vae(torch), _vae(fg)
    _copy_weights(tm, fm)
    got = {}
    for lib, model in ((torch, tm), (fg, fm)):
        model.eval()
        test_loss = 0
        with lib.no_grad():
            x = lib.tensor(data)
            recon_batch, mu, logvar = model(x, lib.tensor(eps))
            test_loss += _vae_loss(lib, recon_batch, x, mu, logvar).item()
            n = min(x.size(0), 8)
            comparison = lib.cat([x[:n], recon_batch.view(4, 1, 28, 28)[:n]])
        assert comparison.shape == (8, 1, 28, 28) and not comparison.requires_grad
        got[lib] = comparison.cpu(), test_loss / len(data)
    _close("comparison", got[torch][0], got[fg][0])
    assert got[fg][1] == pytest.approx(got[torch][1], rel=1e-12)


def test_fast_neural_style_stylize_from_a_checkpoint_as_in_torch() -> None:
    # stylize(): load the saved state dict, drop the InstanceNorm running stats old
    # checkpoints carry, eval().cpu() chained, then clamp(0, 255) for the image
    import io
    import re

    rng = np.random.default_rng(14)
    content = rng.uniform(0, 255, (1, 3, 16, 16))
    torch.manual_seed(0)
    tm = _style_nets(torch).transformer
    sd = dict(tm.state_dict())
    sd["in1.running_mean"], sd["in1.running_var"] = torch.zeros(4), torch.ones(4)
    buf = io.BytesIO()
    fg.save({k: fg.tensor(v.numpy()) for k, v in sd.items()}, buf)
    got = {}
    for lib in (torch, fg):
        style_model = _style_nets(lib).transformer
        if lib is fg:
            buf.seek(0)
            state_dict = fg.load(buf)
        else:
            state_dict = dict(sd)
        for k in list(state_dict.keys()):
            if re.search(r"in\d+\.running_(mean|var)$", k):
                del state_dict[k]
        style_model.load_state_dict(state_dict)
        assert style_model.eval().cpu() is style_model
        with lib.no_grad():
            output = style_model(lib.tensor(content)).cpu()
        img = output[0].clone().clamp(0, 255).numpy()
        got[lib] = output, img.transpose(1, 2, 0).astype("uint8")
    _close("stylized", got[torch][0], got[fg][0])
    np.testing.assert_array_equal(got[fg][1], got[torch][1])


class _AppMatcher:
    """siamese_network's APP_MATCHER over a small stand-in for MNIST (uint8 images, int64
    targets): pairs from one class when the index is even, from two classes when odd; the
    choices Python's ``random`` makes are taken from a fixed list."""

    def __init__(self, lib: Any, images: np.ndarray, targets: np.ndarray, picks: list) -> None:
        self.lib, self.picks = lib, picks
        self.data = lib.tensor(images).unsqueeze(1).clone()
        np_arr = np.array(lib.tensor(targets).clone(), dtype=None, copy=None)
        self.grouped_examples = {}
        for i in range(3):
            self.grouped_examples[i] = np.where(np_arr == i)[0]

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, index: int) -> tuple:
        lib = self.lib
        selected_class, other_class, i1, i2 = self.picks[index]
        index_1 = self.grouped_examples[selected_class][i1]
        image_1 = self.data[index_1].clone().float()
        if index % 2 == 0:
            index_2 = self.grouped_examples[selected_class][i2]
            target = lib.tensor(1, dtype=lib.float)
        else:
            index_2 = self.grouped_examples[other_class][i2]
            target = lib.tensor(0, dtype=lib.float)
        image_2 = self.data[index_2].clone().float()
        return image_1, image_2, target


def test_siamese_network_data_and_test_loop_as_in_torch() -> None:
    rng = np.random.default_rng(15)
    images = rng.integers(0, 256, (9, 16, 16)).astype(np.uint8)
    targets = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    picks = [(int(c), int((c + 1) % 3), 0, 1 + int(c == 2)) for c in rng.integers(0, 3, 9)]
    torch.manual_seed(0)
    tm, fm = _siamese(torch), _siamese(fg)
    _copy_weights(tm, fm)
    got = {}
    for lib, model in ((torch, tm), (fg, fm)):
        for m in (tm, fm):
            m.eval()
        data = lib.utils.data
        dataset = type("APP_MATCHER", (_AppMatcher, data.Dataset), {})(lib, images, targets, picks)
        loader = data.DataLoader(dataset, batch_size=3, shuffle=False)
        criterion = lib.nn.BCELoss()
        test_loss, correct, outs = 0, 0, []
        with lib.no_grad():
            for images_1, images_2, batch_targets in loader:
                assert images_1.dtype == lib.float32 and batch_targets.dtype == lib.float32
                images_1, images_2 = images_1.double() / 255, images_2.double() / 255
                batch_targets = batch_targets.double()
                outputs = model(images_1, images_2).squeeze()
                test_loss += criterion(outputs, batch_targets).sum().item()
                pred = lib.where(outputs > 0.5, 1, 0)
                correct += pred.eq(batch_targets.view_as(pred)).sum().item()
                outs += [outputs, pred]
        got[lib] = outs, test_loss, correct
        # a last batch of one: ``squeeze()`` drops the batch dimension too
        with pytest.raises(ValueError, match="size|shape"):
            criterion(outputs[:1].squeeze(), batch_targets[:1])
    for j, (a, b) in enumerate(zip(got[torch][0], got[fg][0], strict=True)):
        _close(f"batch output {j}", a, b)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert got[fg][1] == pytest.approx(got[torch][1], rel=1e-12)
    assert got[fg][2] == got[torch][2]


def test_mnist_forward_forward_negative_labels_and_error_as_in_torch() -> None:
    # get_y_neg draws a wrong label per sample with randint from a tensor of the allowed
    # ones; the error is ``1.0 - predict(x).eq(y).float().mean().item()``
    rng = np.random.default_rng(16)
    xv, yv = rng.standard_normal((6, 30)), rng.integers(0, 10, 6)
    errors = []
    for lib in (torch, fg):
        y = lib.tensor(yv)
        y_neg = y.clone()
        for idx, y_samp in enumerate(y):
            allowed_indices = list(range(10))
            allowed_indices.remove(y_samp.item())
            y_neg[idx] = lib.tensor(allowed_indices)[
                lib.randint(len(allowed_indices), size=(1,))
            ].item()
        assert y_neg.dtype == lib.int64 and bool((y_neg != y).all())
        lib.manual_seed(0)
        net = _forward_forward(lib, [30, 12, 8], 0.03, 1)
        if lib is torch:
            tnet = net
        else:
            for tl, fl in zip(tnet.layers, net.layers, strict=True):
                _copy_weights(tl, fl)
        errors.append(1.0 - net.predict(lib.tensor(xv)).eq(y).float().mean().item())
    assert errors[1] == errors[0]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_forward_forward_layers_step_after_moving_to_their_device(device: str) -> None:
    # each Layer builds its Adam in __init__ and is moved by ``.to(device)`` afterwards: the
    # Adam state ferrograd made at construction stayed float32 (rounding every update of the
    # float64 weights) or on the old device ("cannot write a tensor on cuda:0 into one on
    # cpu"); PyTorch makes the state on the first step, from the moved parameter
    if device == "cuda" and not fg.cuda.is_available():
        pytest.skip("no CUDA device")
    lay = _forward_forward(fg, [5, 3], 0.03, 1).layers[0]
    assert lay.weight.dtype == fg.float64
    assert lay.opt.param_groups[0]["params"][0] is lay.weight
    rng = np.random.default_rng(17)
    xv = rng.standard_normal((2, 6, 30))
    nets = {}
    for lib, dev in ((torch, "cpu"), (fg, device)):
        torch.manual_seed(0)
        nets[lib] = _forward_forward(lib, [30, 12], 0.03, 2, device=dev)
    _copy_weights(nets[torch].layers[0], nets[fg].layers[0])
    for lib, dev in ((torch, "cpu"), (fg, device)):
        x = lib.tensor(xv, device=dev)
        nets[lib].train(x[0], x[1])
    tl, fl = nets[torch].layers[0], nets[fg].layers[0]
    assert fl.weight.device.type == device
    state = fl.opt.state[fl.weight]
    assert state["exp_avg"].dtype == fg.float64 and state["exp_avg"].device == fl.weight.device
    for k in ("weight", "bias"):
        _close(k, getattr(tl, k), getattr(fl, k).cpu())
        _close(
            f"Adam exp_avg_sq of {k}",
            tl.opt.state[getattr(tl, k)]["exp_avg_sq"],
            fl.opt.state[getattr(fl, k)]["exp_avg_sq"].cpu(),
        )
    for a, b in zip(tl.losses, fl.losses, strict=True):
        _close("loss", a, b.cpu())


def test_optimizers_made_before_double_keep_float64_moments() -> None:
    # the same for every optimizer with per-element state: build, then ``model.double()``
    xv = np.random.default_rng(18).standard_normal((4, 3))
    for name, kw in (
        ("SGD", {"lr": 0.1, "momentum": 0.9}),
        ("Adam", {"lr": 0.1}),
        ("AdamW", {"lr": 0.1, "amsgrad": True}),
        ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
        ("Adadelta", {"lr": 1.0}),
        ("Adamax", {"lr": 0.1}),
        ("NAdam", {"lr": 0.1}),
        ("RAdam", {"lr": 0.1}),
        ("Rprop", {"lr": 0.1}),
    ):
        got = {torch: torch.nn.Linear(3, 2)}
        got[fg] = fg.nn.Linear(3, 2)
        _copy_weights(got[torch], got[fg])
        for lib, m in got.items():
            opt = getattr(lib.optim, name)(m.parameters(), **kw)
            m.double()
            for _ in range(3):
                opt.zero_grad()
                m(lib.tensor(xv)).pow(2).sum().backward()
                opt.step()
        _same_state(name, got[torch], got[fg])
    # Adagrad makes its state at construction, in PyTorch too: it stays as made
    for lib in (torch, fg):
        m = lib.nn.Linear(3, 2)
        opt = lib.optim.Adagrad(m.parameters(), lr=0.1)
        m.double()
        m(lib.tensor(xv)).sum().backward()
        opt.step()
        assert opt.state[m.weight]["sum"].dtype == lib.float32


# ----------------------------------------------------------------------- mnist_rnn, regression


def _mnist_rnn(lib: Any, mode: str = "train") -> Any:
    """mnist_rnn's Net: a batch-first LSTM over the image's 28 rows (hidden 8 here), the last
    step through BatchNorm1d, Dropout2d (0 in train mode here), two Linear layers and
    log_softmax."""
    nn, F = lib.nn, lib.nn.functional
    p1, p2 = (0.0, 0.0) if mode == "train" else (0.25, 0.5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(input_size=28, hidden_size=8, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(8)
            self.dropout1 = nn.Dropout2d(p1)
            self.dropout2 = nn.Dropout2d(p2)
            self.fc1 = nn.Linear(8, 6)
            self.fc2 = nn.Linear(6, 10)

        def forward(self, input):
            input = input.reshape(-1, 28, 28)
            output, _hidden = self.rnn(input)
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = self.fc1(output)
            output = F.relu(output)
            output = self.dropout2(output)
            output = self.fc2(output)
            return F.log_softmax(output, dim=1)

    return Net().double()


def test_mnist_rnn_trains_and_tests_as_in_torch() -> None:
    rng = np.random.default_rng(19)
    data, target = rng.uniform(0, 1, (3, 4, 1, 28, 28)), rng.integers(0, 10, (3, 4))

    def make_opt(lib, m):
        opt = lib.optim.Adadelta(m.parameters(), lr=0.1)
        opt.scheduler = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        return opt

    def step(lib, model, optimizer, data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = lib.nn.functional.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return output, loss

    with pytest.warns(UserWarning, match="2-D input to dropout2d"):
        _train_alike(
            _mnist_rnn,
            make_opt,
            step,
            lambda lib, i: (lib.tensor(data[i]), lib.tensor(target[i])),
            after=lambda opt: opt.scheduler.step(),
        )
    # test(): summed nll_loss, argmax(keepdim) against target.view_as(pred)
    torch.manual_seed(0)
    tm, fm = _mnist_rnn(torch, "eval"), _mnist_rnn(fg, "eval")
    _copy_weights(tm, fm)
    got = []
    for lib, model in ((torch, tm), (fg, fm)):
        model.eval()
        test_loss, correct = 0, 0
        with lib.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "dropout2d: Received a 2-D input")
            for i in range(3):
                output = model(lib.tensor(data[i]))
                t = lib.tensor(target[i])
                test_loss += lib.nn.functional.nll_loss(output, t, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                assert pred.shape == (4, 1)
                correct += pred.eq(t.view_as(pred)).sum().item()
        got.append((test_loss, correct))
    assert got[1][0] == pytest.approx(got[0][0], rel=1e-12) and got[1][1] == got[0][1]


def test_regression_fits_as_in_torch() -> None:
    # regression: polynomial features by cat of powers, a target read with ``.item()``,
    # smooth_l1_loss, ``param.data.add_(-0.1 * param.grad)``, and a printout formatting 0-d
    # tensors with ``'{:+.2f}'.format(w)``
    POLY_DEGREE = 4
    rng = np.random.default_rng(20)
    w_target, b_target = rng.standard_normal((POLY_DEGREE, 1)) * 5, rng.standard_normal(1) * 5
    batches = rng.standard_normal((5, 32))

    def run(lib, fc):
        W_target, b = lib.tensor(w_target), lib.tensor(b_target)

        def make_features(x):
            x = x.unsqueeze(1)
            return lib.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)

        def poly_desc(W, b):
            result = "y = "
            for i, w in enumerate(W):
                result += "{:+.2f} x^{} ".format(w, i + 1)  # noqa: UP032
            result += "{:+.2f}".format(b[0])  # noqa: UP032
            return result

        losses = []
        for batch in batches:
            batch_x = make_features(lib.tensor(batch))
            batch_y = batch_x.mm(W_target) + b.item()
            fc.zero_grad()
            output = lib.nn.functional.smooth_l1_loss(fc(batch_x), batch_y)
            losses.append(output.item())
            output.backward()
            for param in fc.parameters():
                param.data.add_(-0.1 * param.grad)
        return losses, poly_desc(fc.weight.view(-1), fc.bias), fc

    torch.manual_seed(0)
    tfc = torch.nn.Linear(POLY_DEGREE, 1).double()
    ffc = fg.nn.Linear(POLY_DEGREE, 1).double()
    _copy_weights(tfc, ffc)
    want, got = run(torch, tfc), run(fg, ffc)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
    assert got[1] == want[1]
    _same_state("regression", want[2], got[2])


def test_traced_steps_of_an_optimizer_built_before_double_carry_their_state() -> None:
    # the first traced step remade the state of the moved parameters inside the trace, where
    # it did not carry over: every later call started Adam from zero moments and step 0
    xv = np.random.default_rng(22).standard_normal((5, 4))
    models = {torch: torch.nn.Linear(4, 3), fg: fg.nn.Linear(4, 3)}
    _copy_weights(models[torch], models[fg])
    opts = {lib: lib.optim.Adam(m.parameters(), lr=0.1) for lib, m in models.items()}
    for m in models.values():
        m.double()

    def train(lib, x):
        m, opt = models[lib], opts[lib]
        for _ in range(2):
            loss = m(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return m(x).detach()

    run = fg.trace(_bound(train, fg))
    for i in range(3):
        _close(f"call {i}", train(torch, torch.tensor(xv)), run(fg.tensor(xv)))
    state = opts[fg].state[models[fg].weight]
    assert state["exp_avg"].dtype == fg.float64 and int(state["step"]) == 6
    _same_state("traced", models[torch], models[fg], grads=False)


@pytest.mark.parametrize("stepped_before", [False, True])
def test_traced_steps_after_the_optimizer_state_is_cleared_carry_their_state(
    stepped_before: bool,
) -> None:
    # ``opt.state.clear()`` starts afresh on the next step (PyTorch): under fg.trace that
    # state was made inside the trace and did not carry over to its later calls
    xv = np.random.default_rng(23).standard_normal((5, 4))
    models = {torch: torch.nn.Linear(4, 3).double(), fg: fg.nn.Linear(4, 3).double()}
    _copy_weights(models[torch], models[fg])
    opts = {lib: lib.optim.Adam(m.parameters(), lr=0.1) for lib, m in models.items()}

    def step(lib, x):
        loss = models[lib](x).pow(2).mean()
        opts[lib].zero_grad()
        loss.backward()
        opts[lib].step()
        return loss.detach()

    if stepped_before:
        for lib in (torch, fg):
            step(lib, lib.tensor(xv))
    for opt in opts.values():
        opt.state.clear()
    run = fg.trace(_bound(step, fg))
    for i in range(3):
        _close(f"call {i}", step(torch, torch.tensor(xv)), run(fg.tensor(xv)))
    _same_state("traced", models[torch], models[fg], grads=False)
