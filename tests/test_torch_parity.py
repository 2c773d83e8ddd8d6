"""Cases where ferrograd disagreed with PyTorch (found by differential sweeps of the
functional API, nn layers and optimizers against torch); each runs both and compares."""

import itertools

import ferrograd as fg
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = fg.nn.functional
TF = torch.nn.functional


@pytest.mark.parametrize(
    ("size", "k", "p", "s", "d"),
    [
        c
        for c in itertools.product([(7, 7), (8, 8), (5, 9)], [2, 3], [0, 1, 2], [1, 2, 3], [1, 2])
        if (c[0][0] + 2 * c[2] - c[4] * (c[1] - 1) - 1) >= 0
        and (c[0][1] + 2 * c[2] - c[4] * (c[1] - 1) - 1) >= 0
    ],
)
def test_fold_matches_torch_for_any_padding_and_stride(size, k, p, s, d):
    h, w = size
    bh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    bw = (w + 2 * p - d * (k - 1) - 1) // s + 1
    a = np.random.default_rng(0).standard_normal((2, 2 * k * k, bh * bw))
    expect = TF.fold(torch.tensor(a, requires_grad=True), size, k, d, p, s)
    x = fg.tensor(a, requires_grad=True)
    got = F.fold(x, size, k, d, p, s)
    np.testing.assert_allclose(got.numpy(), expect.detach().numpy(), rtol=1e-12, atol=1e-12)


def _both(expr):
    out = []
    for lib in (torch, fg):
        b = lib.tensor([True, False])
        i = lib.tensor([3, -4])
        f = lib.tensor([1.5, -2.0])
        nan = float("nan")
        r = eval(expr, {"lib": lib, "b": b, "i": i, "f": f, "nan": nan})
        out.append((np.asarray(r.tolist()), str(r.dtype).replace("torch.", "")))
    return out


@pytest.mark.parametrize(
    "expr",
    [
        "lib.div(b, 2)",
        "b.div(2)",
        "lib.true_divide(b, 2)",
        "lib.xlogy(b, 2)",
        "lib.fmod(b, 2)",
        "lib.remainder(b, 2)",
        "lib.floor_divide(b, 2)",
        "b // 2",
        "b % 2",
        "b ** 2",
        "lib.pow(b, 2)",
        "2 ** b",
        "i ** b",
        "lib.square(b)",
        "lib.sign(b)",
        "lib.clamp(i, 0.5, 2.5)",
        "lib.clamp(i, max=2.5)",
        "lib.clamp(i, 0, 2)",
        "lib.copysign(f, f.double())",
        "lib.xlogy(f, lib.tensor(2.0, dtype=lib.float64))",
        "lib.hypot(f, f.double())",
        "i.int() // lib.tensor(2)",
        "lib.logaddexp(f, f.double())",
        "lib.fmax(lib.tensor([1.0, nan, nan]), lib.tensor([nan, 2.0, nan]))",
        "lib.fmin(lib.tensor([1.0, nan, nan]), lib.tensor([nan, 2.0, nan]))",
        "lib.fmax(lib.tensor([[1.0], [nan]]), lib.tensor([nan, 2.0]))",
        "lib.sign(lib.tensor([nan, -1.0, 0.0, 3.0]))",
    ],
)
def test_dtype_promotion_and_values_of_mixed_operands(expr):
    (tv, td), (fv, fd) = _both(expr)
    assert fd == td
    np.testing.assert_allclose(fv, tv, rtol=1e-6, equal_nan=True)


def test_sign_nan_gives_zero_and_abs_gradient_there_is_zero():
    x = fg.tensor([float("nan"), -2.0, 3.0], dtype=fg.float64, requires_grad=True)
    (g,) = fg.autograd.grad(x.abs().sum(), x)
    tx = torch.tensor([float("nan"), -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(tx.abs().sum(), tx)
    np.testing.assert_array_equal(g.numpy(), tg.numpy())


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_without_dim_takes_torchs_implicit_axis(shape, name):
    a = np.random.default_rng(0).standard_normal(shape)
    with pytest.warns(UserWarning), np.errstate(all="ignore"):
        got = getattr(F, name)(fg.tensor(a)).numpy()
    with pytest.warns(UserWarning):
        expect = getattr(TF, name)(torch.tensor(a)).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-12)
    module = fg.nn.Softmax if name == "softmax" else fg.nn.LogSoftmax
    tmodule = torch.nn.Softmax if name == "softmax" else torch.nn.LogSoftmax
    with pytest.warns(UserWarning):
        np.testing.assert_allclose(
            module()(fg.tensor(a)).numpy(), tmodule()(torch.tensor(a)).numpy(), rtol=1e-12
        )


def test_gaussian_nll_gradient_passes_through_the_clamp_of_var():
    x, t, v = np.array([[0.3], [1.2]]), np.array([[0.0], [1.0]]), np.array([[0.1], [1.0]])
    got = []
    for lib in (torch, fg):
        xs, vs = lib.tensor(x, requires_grad=True), lib.tensor(v, requires_grad=True)
        loss = lib.nn.functional.gaussian_nll_loss(xs, lib.tensor(t), vs, eps=0.5)
        loss.backward()
        got.append((loss.item(), np.asarray(vs.grad.tolist()), np.asarray(xs.grad.tolist())))
    for a, b in zip(got[0], got[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("CrossEntropyLoss", ["weight"]),
        ("NLLLoss", ["weight"]),
        ("BCELoss", ["weight"]),
        ("BCEWithLogitsLoss", ["weight", "pos_weight"]),
    ],
)
def test_loss_weights_are_buffers(name, keys):
    m = getattr(fg.nn, name)(**{k: fg.tensor([1.0, 2.0, 3.0]) for k in keys})
    tm = getattr(torch.nn, name)(**{k: torch.tensor([1.0, 2.0, 3.0]) for k in keys})
    assert list(m.state_dict()) == list(tm.state_dict()) == keys
    m = m.double()
    assert all(getattr(m, k).dtype == fg.float64 for k in keys)
    assert list(getattr(fg.nn, name)().state_dict()) == []


def test_transformer_initialises_matrices_xavier_uniform():
    fg.manual_seed(0)
    m = fg.nn.Transformer(64, 4, 1, 1, 128)
    w = m.encoder.layers[0].linear2.weight.numpy()
    bound = np.sqrt(6.0 / (64 + 128))
    assert np.abs(w).max() <= bound
    np.testing.assert_allclose(w.std(), bound / np.sqrt(3), rtol=0.05)


def _lrs(lib, name, last_epoch, steps=8, **kw):
    p = [lib.nn.Parameter(lib.zeros(2))]
    opt = lib.optim.SGD(p, lr=0.1)
    if last_epoch != -1:
        for g in opt.param_groups:
            g["initial_lr"] = 0.1
    sched = getattr(lib.optim.lr_scheduler, name)(opt, last_epoch=last_epoch, **kw)
    seq = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append(opt.param_groups[0]["lr"])
    return seq, sched


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("last_epoch", [-1, 7])
@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("ExponentialLR", {"gamma": 0.9}),
        ("CosineAnnealingLR", {"T_max": 10}),
        ("StepLR", {"step_size": 3}),
        ("MultiStepLR", {"milestones": [2, 5, 5]}),
        ("LinearLR", {}),
        ("PolynomialLR", {"total_iters": 12}),
        ("MultiplicativeLR", {"lr_lambda": lambda e: 0.95}),
        ("ConstantLR", {}),
    ],
)
def test_schedulers_made_with_last_epoch_match_torch(name, kw, last_epoch):
    expect, tsched = _lrs(torch, name, last_epoch, **kw)
    got, sched = _lrs(fg, name, last_epoch, **kw)
    np.testing.assert_allclose(got, expect, rtol=1e-12)
    assert set(sched.state_dict()) == set(tsched.state_dict())


@pytest.mark.filterwarnings("ignore")
def test_sequential_lr_resumes_from_its_state_dict():
    import io

    def run(lib, resume):
        sch = lib.optim.lr_scheduler

        def make(opt):
            return sch.SequentialLR(
                opt,
                [sch.LinearLR(opt, 0.1, total_iters=3), sch.ExponentialLR(opt, 0.9)],
                milestones=[3],
            )

        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
        s = make(opt)
        out = []
        for i in range(8):
            opt.step()
            s.step()
            out.append(opt.param_groups[0]["lr"])
            if resume and i == 3:
                sd, osd = s.state_dict(), opt.state_dict()
                if lib is fg:
                    f = io.BytesIO()
                    fg.save(sd, f)
                    f.seek(0)
                    sd = fg.load(f)
                opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(2))], lr=0.1)
                opt.load_state_dict(osd)
                s = make(opt)
                s.load_state_dict(sd)
        return out

    for resume in (False, True):
        np.testing.assert_allclose(run(fg, resume), run(torch, resume), rtol=1e-12)


@pytest.mark.filterwarnings("ignore")
def test_multistep_lr_state_dicts_load_across():
    p = [torch.nn.Parameter(torch.zeros(2))]
    o = torch.optim.SGD(p, lr=0.1)
    s = torch.optim.lr_scheduler.MultiStepLR(o, [2, 4, 4])
    q = [fg.nn.Parameter(fg.zeros(2))]
    o2 = fg.optim.SGD(q, lr=0.1)
    for _ in range(3):
        o.step()
        s.step()
    o2.load_state_dict(o.state_dict())
    s2 = fg.optim.lr_scheduler.MultiStepLR(o2, [1])
    s2.load_state_dict(s.state_dict())
    for _ in range(3):
        o.step()
        s.step()
        o2.step()
        s2.step()
        assert o2.param_groups[0]["lr"] == pytest.approx(o.param_groups[0]["lr"], rel=1e-12)
    s3 = torch.optim.lr_scheduler.MultiStepLR(o, [1])
    s3.load_state_dict(s2.state_dict())
    assert s3.milestones == s.milestones


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("SGD", {"lr": 0.1}),
        ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}),
        ("Adam", {"lr": 0.1}),
        ("AdamW", {"lr": 0.1, "amsgrad": True}),
        ("RMSprop", {"lr": 0.1, "momentum": 0.5}),
        ("Adagrad", {"lr": 0.1}),
        ("Adadelta", {}),
        ("NAdam", {}),
        ("RAdam", {}),
        ("Adamax", {}),
        ("Rprop", {}),
        ("ASGD", {}),
    ],
)
def test_optimizer_state_covers_stepped_parameters_only(name, kw):
    def run(lib):
        ps = [lib.nn.Parameter(lib.tensor(np.arange(3.0) + i, dtype=lib.float64)) for i in range(3)]
        opt = getattr(lib.optim, name)(ps, **kw)
        keys = []
        for s in range(4):
            for i, p in enumerate(ps):
                late = i == 2 and s < 2
                g = np.sin(np.arange(3.0) * (s + 1) + i)
                p.grad = None if late else lib.tensor(g, dtype=lib.float64)
            opt.step()
            sd = opt.state_dict()["state"]
            keys.append({k: sorted(v) for k, v in sd.items()})
        return [np.asarray(p.tolist()) for p in ps], keys

    (tp, tk), (fp, fk) = run(torch), run(fg)
    assert fk == tk
    for a, b in zip(tp, fp):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_sgd_resumes_from_torchs_state_dict_with_dampening():
    ps = [torch.nn.Parameter(torch.ones(3, dtype=torch.float64))]
    o = torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5)
    ps[0].grad = torch.ones(3, dtype=torch.float64)
    o.step()
    q = [fg.nn.Parameter(fg.tensor(ps[0].detach().numpy()))]
    o2 = fg.optim.SGD(q, lr=0.1, momentum=0.9, dampening=0.5)
    o2.load_state_dict(o.state_dict())
    q[0].grad = fg.ones(3, dtype=fg.float64)
    o.step()
    o2.step()
    np.testing.assert_allclose(q[0].numpy(), ps[0].detach().numpy(), rtol=1e-14)


def test_bce_gradient_stays_finite_at_saturated_probabilities():
    got = []
    for lib in (torch, fg):
        p = lib.tensor([1.0, 0.0, 1.0, 0.0, 0.3], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=lib.float64)
        loss = lib.nn.functional.binary_cross_entropy(p, y)
        loss.backward()
        x = lib.tensor([40.0, -200.0, 0.3], requires_grad=True)
        lib.nn.BCELoss()(lib.sigmoid(x), lib.tensor([0.0, 1.0, 1.0])).backward()
        got.append((loss.item(), np.asarray(p.grad.tolist()), np.asarray(x.grad.tolist())))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-12)
    # (PyTorch's float64 kernel takes its 1e-12 floor in float32: 4e-9 apart at p = 0, 1)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-8)
    np.testing.assert_allclose(got[1][2], got[0][2], rtol=1e-5, atol=1e-7)
    assert np.isfinite(got[1][1]).all()


@pytest.mark.parametrize("reps", [(2, 1), (1, 1), (1, 3), (2, 2, 1)])
def test_repeat_and_tile_make_new_memory(reps):
    a = fg.ones(1, 3)
    b = a.repeat(*reps)
    c = fg.tile(a, reps)
    a.add_(1.0)
    assert (b == 1.0).all().item() and (c == 1.0).all().item()
    b.div_(2.0)  # writable: not a broadcast view
    assert (b == 0.5).all().item()


def test_module_dtype_casts_keep_the_parameter_objects():
    fg.manual_seed(0)
    m = fg.nn.Linear(3, 1)
    w = m.weight
    opt = fg.optim.SGD(m.parameters(), lr=0.1)
    m(fg.ones(1, 3)).sum().backward()
    m.double()
    assert m.weight is w and w.dtype == fg.float64 and w.grad.dtype == fg.float64
    assert w.requires_grad and w.is_leaf
    x = fg.ones(4, 3, dtype=fg.float64)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ((m(x) - 1.0) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[2] < losses[1] < losses[0]


def test_cross_entropy_of_an_unbatched_input_is_0d_per_sample():
    x = fg.randn(5)
    assert F.cross_entropy(x, fg.tensor(2), reduction="none").shape == ()
    assert F.cross_entropy(x, fg.tensor(2)).shape == ()


def test_embedding_refuses_out_of_range_indices():
    w = fg.randn(3, 2)
    for bad in (-1, 3):
        with pytest.raises(IndexError, match="out of range"):
            F.embedding(fg.tensor([0, bad]), w)


def test_median_shares_the_gradient_between_ties():
    got = []
    for lib in (torch, fg):
        a = lib.tensor([1.0, 2.0, 2.0, 3.0, 2.0], dtype=lib.float64, requires_grad=True)
        m = a.median()
        m.backward()
        got.append((m.item(), np.asarray(a.grad.tolist())))
    assert got[1][0] == got[0][0]
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-15)


@pytest.mark.parametrize(
    "expr",
    [
        "x.squeeze(dim=0)",
        "lib.squeeze(x, dim=0)",
        "x.transpose(dim0=1, dim1=2)",
        "lib.transpose(x, dim0=1, dim1=2)",
        "x.permute(dims=(2, 1, 0))",
        "lib.permute(x, dims=(2, 1, 0))",
        "x.reshape(shape=(6,))",
        "lib.reshape(x, shape=(6,))",
        "lib.matmul(input=x[0], other=y[0].T)",
        "x.matmul(other=y[0].T)",
        "lib.mul(x, other=2)",
        "x.mul(other=2)",
        "lib.pow(x, exponent=2)",
        "x.pow(exponent=2)",
        "lib.zeros(size=(2,))",
        "lib.ones(size=(2, 1))",
        "lib.add(x, y, alpha=2)",
        "x.add(y, alpha=2)",
        "lib.sub(x, y, alpha=2)",
        "x.sub(y, alpha=2)",
        "lib.sum(x, dtype=lib.float32)",
        "lib.mean(x, 1, dtype=lib.float32)",
        "lib.round(x / 7, decimals=2)",
        "lib.logsumexp(lib.ones(2, 0), dim=1)",
        "x.expand(size=(2, 2, 3))",
        "lib.clone(x, memory_format=lib.contiguous_format)",
        "lib.randint(5, size=(3,)).shape[0] + 0 * lib.ones(1)",
    ],
)
def test_pytorch_keyword_spellings(expr):
    out = []
    for lib in (torch, fg):
        x = lib.tensor(np.arange(6.0).reshape(1, 2, 3))
        y = lib.tensor(np.ones((1, 2, 3)))
        r = eval(expr, {"lib": lib, "x": x, "y": y})
        out.append((np.asarray(r.tolist()), str(r.dtype).replace("torch.", "")))
    assert out[1][1] == out[0][1]
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "shape", "args"),
    [
        ("conv1d", (3, 10), ((4, 3, 3),)),
        ("conv2d", (3, 8, 8), ((4, 3, 3, 3),)),
        ("conv_transpose2d", (3, 5, 5), ((3, 2, 2, 2),)),
        ("max_pool2d", (3, 8, 8), (2,)),
        ("avg_pool1d", (3, 8), (2,)),
        ("adaptive_avg_pool2d", (3, 8, 8), (3,)),
        ("fold", (8, 12), ((4, 5), 2)),
    ],
)
def test_unbatched_inputs_to_convolutions_and_pools(name, shape, args):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    ws = [rng.standard_normal(s) if isinstance(s, tuple) and len(s) > 2 else s for s in args]
    got = getattr(F, name)(
        fg.tensor(a), *[fg.tensor(w) if isinstance(w, np.ndarray) else w for w in ws]
    )
    expect = getattr(TF, name)(
        torch.tensor(a), *[torch.tensor(w) if isinstance(w, np.ndarray) else w for w in ws]
    )
    np.testing.assert_allclose(got.numpy(), expect.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("floor_", ()),
        ("ceil_", ()),
        ("trunc_", ()),
        ("clamp_min_", (0.1,)),
        ("clamp_max_", (0.1,)),
        ("sin_", ()),
        ("square_", ()),
        ("reciprocal_", ()),
        ("cumsum_", (0,)),
        ("atan2_", ("y",)),
    ],
)
def test_inplace_spellings_write_the_result_and_differentiate(method, args):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    got = []
    for lib in (torch, fg):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b)
        z = x * 1.0
        r = getattr(z, method)(*[y if v == "y" else v for v in args])
        assert r is z
        (z * lib.tensor(b)).sum().backward()
        got.append((np.asarray(z.tolist()), np.asarray(x.grad.tolist())))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-12)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-12, atol=1e-15)


def test_inplace_view_spellings():
    x = fg.ones(2, 3)
    assert x.unsqueeze_(0) is x and x.shape == (1, 2, 3)
    assert x.squeeze_(0).shape == (2, 3)
    assert x.t_().shape == (3, 2)
    assert x.transpose_(0, 1).shape == (2, 3)


def test_whole_model_loads_with_safe_globals_only():
    import io
    import pickle

    m = fg.nn.Sequential(fg.nn.Linear(2, 3), fg.nn.ReLU())
    f = io.BytesIO()
    fg.save(m, f)
    f.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        fg.load(f)
    with fg.serialization.safe_globals([fg.nn.Sequential, fg.nn.Linear, fg.nn.ReLU]):
        f.seek(0)
        m2 = fg.load(f)
    np.testing.assert_array_equal(m2[0].weight.numpy(), m[0].weight.numpy())
    assert fg.serialization.get_safe_globals() == []


def test_module_paths_hub_and_device_helpers():
    import importlib

    assert importlib.import_module("ferrograd.nn.modules.linear").Linear is fg.nn.Linear
    from ferrograd.nn.modules.rnn import LSTM

    assert LSTM is fg.nn.LSTM
    assert fg.nn.modules.sparse.Embedding is fg.nn.Embedding
    assert list(fg.hub.tqdm(range(3))) == [0, 1, 2]
    x = fg.ones(2)
    assert not (x.is_xpu or x.is_mps or x.is_meta or x.is_sparse)
    with pytest.raises(ValueError, match="does not exist"):
        fg.cuda.set_device(7)
    with pytest.raises(RuntimeError, match="does not download"):
        fg.hub.load_state_dict_from_url("https://example.invalid/w.pth", model_dir="/nonexistent")


def test_inplace_comparisons_write_in_the_tensors_dtype():
    for lib in (torch, fg):
        y = lib.tensor([1.0, 2.0, 3.0])
        y.eq_(lib.tensor([1.0, 0.0, 3.0]))
        assert y.tolist() == [1.0, 0.0, 1.0] and str(y.dtype).endswith("float32")
        z = lib.tensor([-1.0, 2.0])
        z.lt_(0.0)
        assert z.tolist() == [1.0, 0.0]


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("ReLU", {"inplace": True}),
        ("ReLU", {}),
        ("LeakyReLU", {"negative_slope": 0.2, "inplace": True}),
        ("ReLU6", {"inplace": True}),
        ("SiLU", {"inplace": True}),
        ("ELU", {"inplace": True}),
        ("Hardswish", {"inplace": True}),
        ("Mish", {"inplace": True}),
        ("Upsample", {"scale_factor": 2}),
        ("Upsample", {"size": (4, 5), "mode": "bilinear"}),
    ],
)
def test_activation_and_upsample_reprs(name, kw):
    assert repr(getattr(fg.nn, name)(**kw)) == repr(getattr(torch.nn, name)(**kw))


def test_view_of_a_layout_that_needs_a_copy_raises_as_torch():
    x = fg.ones(2, 3)
    assert x.view(3, 2).shape == (3, 2)
    assert x[:, :2].view(2, 2, 1).shape == (2, 2, 1)
    with pytest.raises(RuntimeError, match="reshape"):
        x.t().view(-1)
    with pytest.raises(RuntimeError):
        torch.ones(2, 3).t().view(-1)
    assert x.t().reshape(-1).shape == (6,)


def test_contains():
    for lib in (torch, fg):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert x[0, 0] in x and 3 in x and 5 not in x


@pytest.mark.parametrize("dim", [0, 1])
def test_unique_along_a_dim(dim):
    a = np.array([[1, 2], [3, 4], [1, 2], [0, 9]])
    got = fg.unique(fg.tensor(a), dim=dim, return_inverse=True, return_counts=True)
    expect = torch.unique(torch.tensor(a), dim=dim, return_inverse=True, return_counts=True)
    for g, e in zip(got, expect):
        assert g.tolist() == e.tolist()


@pytest.mark.parametrize(
    "name", ["hann_window", "hamming_window", "bartlett_window", "blackman_window"]
)
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("n", [0, 1, 5, 8])
def test_window_functions(name, periodic, n):
    got = getattr(fg, name)(n, periodic, dtype=fg.float64).numpy()
    expect = getattr(torch, name)(n, periodic, dtype=torch.float64).numpy()
    np.testing.assert_allclose(got, expect, atol=1e-12)


def test_as_strided_sliding_windows_and_gradient():
    a = np.arange(12.0)
    x = fg.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y = x.as_strided((4, 4), (2, 1), 1)
    ty = tx.as_strided((4, 4), (2, 1), 1)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    w = np.random.default_rng(0).standard_normal((4, 4))
    (y * fg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_poisson_and_binomial_samples():
    fg.manual_seed(0)
    rates = fg.full((20000,), 3.0)
    s = fg.poisson(rates)
    assert abs(s.mean().item() - 3.0) < 0.1 and (s >= 0).all().item()
    b = fg.binomial(fg.full((20000,), 10.0), fg.full((20000,), 0.3))
    assert abs(b.mean().item() - 3.0) < 0.1 and (b <= 10).all().item()


def test_dropout2d_takes_inputs_as_pytorch_2_does():
    # (N, C, H, W): whole channels; (N, C, L) (3-D, with a warning): whole rows x[n, c];
    # (N, C) (2-D, deprecated): single elements, as PyTorch's feature dropout
    fg.manual_seed(0)
    y = F.dropout2d(fg.ones(16, 8, 3, 3), 0.5).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert (y.reshape(16, 8, 9).min(-1) == y.reshape(16, 8, 9).max(-1)).all()
    with pytest.warns(UserWarning, match=r"\(N, C, L\)"):
        y = F.dropout2d(fg.ones(16, 8, 5), 0.5).numpy()
    assert (y.min(-1) == y.max(-1)).all() and 0 < (y[:, :, 0] == 0).sum() < 128
    with pytest.warns(UserWarning, match="2-D input"):
        y = F.dropout2d(fg.ones(64, 8), 0.5).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert any(len(set(row)) == 2 for row in y)  # rows mix kept and dropped entries
    with pytest.warns(UserWarning):
        y = fg.nn.Dropout2d(0.5)(fg.ones(2, 3, 4)).numpy()
    assert (y.min(-1) == y.max(-1)).all()
    y = fg.nn.Dropout1d(0.5)(fg.ones(4, 6, 5)).numpy()
    assert (y.min(-1) == y.max(-1)).all()
    y = F.dropout3d(fg.ones(3, 4, 2, 2), 0.5).numpy()  # (C, D, H, W): whole channels
    assert (y.reshape(3, -1).min(-1) == y.reshape(3, -1).max(-1)).all()


def test_onnx_module_imports_and_export_says_it_cannot():
    from ferrograd import onnx

    with pytest.raises(NotImplementedError, match="ONNX"):
        onnx.export(fg.nn.Linear(2, 2), fg.ones(1, 2), "m.onnx")


def test_view_of_strided_layouts_matches_torch():
    """PyTorch's view rule: axes contiguous among themselves may be split or merged (a slice
    of the last axis split in two, nanoGPT's q/k/v heads); a view that needs a copy raises."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        nd = int(rng.integers(1, 5))
        shape = [int(rng.integers(1, 5)) for _ in range(nd)]
        doubled = [bool(rng.random() < 0.4) for _ in range(nd)]
        big = np.arange(int(np.prod([s * 2 if d else s for s, d in zip(shape, doubled)]))).astype(
            float
        )
        big = big.reshape([s * 2 if d else s for s, d in zip(shape, doubled)])
        sl = tuple(slice(None, None, 2) if d else slice(None) for d in doubled)
        perm = [int(p) for p in rng.permutation(nd)]
        t, f = torch.tensor(big)[sl].permute(*perm), fg.tensor(big)[sl].permute(*perm)
        numel, target = int(np.prod(shape)), []
        rest = numel
        while rest > 1 and len(target) < 4:
            d = int(rng.choice([k for k in range(1, rest + 1) if rest % k == 0]))
            target.append(d)
            rest //= d
        target = (target + [rest]) if rest > 1 else (target or [1])
        try:
            tv = t.view(*target)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="reshape"):
                f.view(*target)
            continue
        fv = f.view(*target)
        assert fv.data_ptr() == f.data_ptr()
        np.testing.assert_array_equal(fv.numpy(), tv.numpy())
    # nanoGPT: a slice of the last axis split into heads is a view
    x = fg.zeros(8, 64, 384)
    k = x.split(128, dim=2)[1]
    assert k.view(8, 64, 4, 32).data_ptr() == k.data_ptr()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([[0.0, 0.0, 0.0]], [[1.0, 2.0, 3.0]]),
        ([[1e-9, 0.0, 0.0]], [[1.0, 2.0, 3.0]]),
        ([[1.0, -2.0, 0.5], [0.3, 0.2, -0.1]], [[2.0, 1.0, 0.5]]),
    ],
)
def test_cosine_similarity_floors_each_norm_as_torch(a, b):
    got = []
    for lib in (torch, fg):
        x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(b, dtype=lib.float64, requires_grad=True)
        c = lib.nn.functional.cosine_similarity(x, y)
        (c * c).sum().backward()
        got.append(
            [np.asarray(c.tolist()), np.asarray(x.grad.tolist()), np.asarray(y.grad.tolist())]
        )
    for e, g in zip(*got):
        np.testing.assert_allclose(g, e, rtol=1e-10)


@pytest.mark.parametrize("default", ["float64", "float32"])
def test_ints_meeting_floats_take_the_default_dtype(default):
    # (denoising-diffusion's sinusoidal embedding: arange(n) * -scale under float64)
    cases = [
        lambda T: T.arange(4) * -0.5,
        lambda T: T.arange(4) / 2,
        lambda T: T.tensor([1, 2]) / T.tensor([2, 4]),
        lambda T: T.arange(4) + 1.5,
        lambda T: T.sqrt(T.arange(4)),
        lambda T: T.arange(4).sin(),
        lambda T: T.tensor([True, False]) * 0.25,
    ]
    old_t, old_f = torch.get_default_dtype(), fg.get_default_dtype()
    torch.set_default_dtype(getattr(torch, default))
    fg.set_default_dtype(default)
    try:
        for case in cases:
            want, got = case(torch), case(fg)
            assert got.dtype.name == str(want.dtype).replace("torch.", "")
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    finally:
        torch.set_default_dtype(old_t)
        fg.set_default_dtype(old_f)


def test_programs_may_set_attributes_on_tensors():
    # BERT-pytorch's positional table: `pe.require_grad = False`
    import copy

    for lib in (torch, fg):
        t = lib.zeros(2)
        t.require_grad = False
        t.tag = {"name": "pe"}
        c = copy.deepcopy(t)
        assert t.require_grad is False and c.tag == {"name": "pe"} and c.tag is not t.tag


def test_numpy_ufuncs_on_tensors_give_tensors():
    a = np.array([1.0, 2.0])
    cases = (
        lambda t: np.add(t, a),
        lambda t: np.exp(t),
        lambda t: np.multiply(np.float64(2.0), t),
        lambda t: np.maximum(t, a),
        lambda t: np.less(3.5, t),
        lambda t: np.hypot(t, a),
    )
    for case in cases:
        want = case(torch.tensor([3.0, 4.0], dtype=torch.float64))
        got = case(fg.tensor([3.0, 4.0], dtype="float64"))
        assert isinstance(got, fg.Tensor) and isinstance(want, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15)
    # on a tensor that requires grad, the ufuncs ferrograd has stay differentiable
    t = fg.tensor([3.0, 4.0], dtype="float64", requires_grad=True)
    (np.exp(t) * a + np.float64(2.0) * t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), np.exp([3.0, 4.0]) * a + 2.0)
    # one ferrograd does not have would lose the gradient: refused, as torch's numpy()
    assert np.hypot(t, a).requires_grad  # (ferrograd's hypot)
    # one ferrograd does not have would lose the gradient: refused, as torch's numpy()
    with pytest.raises(RuntimeError, match="spacing"):
        np.spacing(t)
    with fg.no_grad():
        assert not np.spacing(t).requires_grad


def test_positional_to_flags_memory_format_casts_and_legacy_empty_cat():
    for lib in (torch, fg):
        x = lib.ones(2, 3)
        assert x.to(lib.float64, False, True).dtype == lib.float64
        assert x.to("cpu", lib.float64, False).dtype == lib.float64
        y = x.to(lib.float32, False, True)  # copy=True copies
        y[0, 0] = 5.0
        assert x[0, 0].item() == 1.0
        assert x.float(memory_format=lib.preserve_format).dtype == lib.float32
        a = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        r = lib.cat([lib.tensor([], dtype=lib.float64), a, lib.tensor([], dtype=lib.float64)])
        assert tuple(r.shape) == (2, 3)
        (r * 2).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 2.0))
        s = lib.scalar_tensor(2.0, requires_grad=True)
        assert s.requires_grad and tuple(s.shape) == ()


def test_cdist_takes_compute_mode_positionally():
    a, b = np.random.default_rng(3).random((2, 3, 4)), np.random.default_rng(4).random((2, 5, 4))
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        want = torch.cdist(torch.tensor(a), torch.tensor(b), 2.0, mode).numpy()
        got = fg.cdist(fg.tensor(a), fg.tensor(b), 2.0, mode).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10)
    with pytest.raises(ValueError, match="compute_mode"):
        fg.cdist(fg.tensor(a), fg.tensor(b), 2.0, "fast")
