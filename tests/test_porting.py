"""What real PyTorch programs use besides ops and layers (found by porting pytorch/examples'
mnist, vae, regression, dcgan, reinforce, word_language_model and the tutorials): each test
is a line such a program runs, with PyTorch's result."""

from __future__ import annotations

import subprocess
import sys
import warnings

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest
import torch


def test_a_one_element_integer_tensor_is_a_python_index():
    classes = ["zero", "one", "two"]
    pred = fg.tensor([[0.1, 0.7, 0.2]])
    assert classes[pred[0].argmax(0)] == "one"  # the Quickstart's line
    assert list(range(fg.tensor(3))) == [0, 1, 2]
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        classes[fg.tensor(1.0)]
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        classes[fg.tensor([1, 2])]


def test_format_specs_apply_to_zero_dim_tensors_as_numbers():
    loss = fg.tensor(1.23456)
    assert f"{loss:.4f}" == f"{torch.tensor(1.23456):.4f}" == "1.2346"
    assert f"{fg.tensor(-0.5):+.2f} x^{2} " == "-0.50 x^2 "
    assert f"{fg.tensor(7)}" == "7"
    with pytest.raises(TypeError):
        f"{fg.ones(2):.2f}"


def test_parameters_is_a_generator_and_a_list():
    m = fg.nn.Sequential(fg.nn.Linear(2, 3), fg.nn.Linear(3, 1))
    first = next(m.parameters())
    assert first is m[0].weight  # word_language_model's init_hidden idiom
    ps = m.parameters()
    assert len(ps) == 4 and len(list(ps)) == 4 and len(list(ps)) == 4
    it = m.parameters()
    assert [next(it) for _ in range(4)] == list(m.parameters())
    with pytest.raises(StopIteration):
        next(it)
    bn = fg.nn.BatchNorm1d(3)
    assert next(bn.buffers()).shape == (3,)


def test_tensor_device_is_a_device_object():
    x = fg.ones(2, device="cpu")
    assert x.device.type == "cpu" and x.device.index is None
    assert x.device == "cpu" and x.device == fg.device("cpu")
    assert repr(x.device) == repr(torch.ones(2).device)
    assert x.is_cpu and not x.is_cuda
    assert fg.zeros(1, device=x.device).device == "cpu"


def test_backends_and_accelerator_answer_as_on_a_machine_without_those_backends():
    fg.backends.cudnn.benchmark = True
    fg.backends.cudnn.deterministic = True
    assert fg.backends.cudnn.is_available() is False
    assert fg.backends.mps.is_available() is False
    from ferrograd.backends import cudnn

    assert cudnn.benchmark is True
    cudnn.benchmark = False
    assert fg.accelerator.is_available() == fg.cuda.is_available()
    acc = fg.accelerator.current_accelerator()
    assert (acc is None) == (not fg.cuda.is_available())
    if acc is not None:
        assert acc.type == "cuda"


def test_typed_tensor_constructors_follow_pytorch():
    a = fg.FloatTensor([1, 2])
    assert a.dtype == fg.float32 and a.tolist() == [1.0, 2.0]
    z = fg.LongTensor(2, 3)
    assert z.dtype == fg.int64 and z.shape == (2, 3)
    assert fg.FloatTensor().shape == (0,)
    x = fg.tensor([1.5, 2.5])
    assert x.type(fg.DoubleTensor).dtype == fg.float64
    assert x.type(fg.LongTensor).tolist() == [1, 2]
    assert isinstance(x, fg.FloatTensor) and not isinstance(x, fg.DoubleTensor)
    assert fg.nn.Linear(2, 2).type(fg.DoubleTensor).weight.dtype == fg.float64


def test_bare_no_grad_and_inference_mode_decorators():
    x = fg.ones(2, requires_grad=True)

    @fg.no_grad
    def f(t):
        return t * 2

    @fg.inference_mode
    def g(t):
        return t * 2

    @fg.enable_grad
    def h(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    with fg.no_grad():
        assert h(x).requires_grad
    assert (x * 2).requires_grad


def test_a_cast_of_a_dropped_leaf_still_backpropagates():
    """``w = torch.randn(3, requires_grad=True).double()`` in a fresh process (no other
    tensor requires grad): the leaf is gone, but the computed tensor still records."""
    code = (
        "import ferrograd as fg\n"
        "w = fg.randn(3, requires_grad=True).double()\n"
        "assert w.requires_grad and not w.is_leaf\n"
        "v = fg.ones(3, dtype=fg.float64, requires_grad=True)\n"
        "(w * w * v).sum().backward()\n"
        "assert abs(v.grad.numpy() - w.detach().numpy() ** 2).max() < 1e-12\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_checkpoint_reruns_with_the_same_dropout_mask():
    fg.manual_seed(0)
    x = fg.randn(2000, requires_grad=True)
    y = fg.checkpoint(lambda h: F.dropout(h, 0.5, training=True) * 3, x)
    after_forward = fg.random.get_rng_state()
    y.sum().backward()
    kept = y.detach().numpy() != 0
    # the gradient is 3 / (1 - p) exactly where the forward kept the element, 0 elsewhere
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 6.0, 0.0))
    # and the rerun left the stream where the forward had
    assert fg.random.get_rng_state() == after_forward
    from ferrograd.utils.checkpoint import checkpoint

    x.grad = None
    y = checkpoint(lambda h: F.dropout(h, 0.5, training=True), x, use_reentrant=False)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy() != 0, y.detach().numpy() != 0)


def test_pointwise_losses_broadcast_with_a_warning_like_torch():
    pairs = [(np.zeros((1, 1)), np.array([1.0])), (np.ones((3, 1)), np.arange(4.0))]
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        for a, b in pairs:
            with pytest.warns(UserWarning, match="target size"):
                ours = getattr(F, name)(fg.tensor(a), fg.tensor(b))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = getattr(torch.nn.functional, name)(torch.tensor(a), torch.tensor(b))
            assert abs(ours.item() - theirs.item()) < 1e-12
    with pytest.raises(fg.ShapeError, match="do not broadcast"):
        F.mse_loss(fg.zeros(2, 3), fg.zeros(4))
    with pytest.raises(ValueError):
        F.binary_cross_entropy(fg.full((2, 1), 0.5), fg.ones(2))


def test_legacy_size_average_and_reduce_arguments():
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    for kw in ({"size_average": False}, {"reduce": False}, {"size_average": True}):
        with pytest.warns(UserWarning, match="deprecated"):
            ours = F.mse_loss(fg.tensor(a), fg.tensor(b), **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = torch.nn.functional.mse_loss(torch.tensor(a), torch.tensor(b), **kw)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    with pytest.warns(UserWarning):
        m = fg.nn.CrossEntropyLoss(size_average=False)
    assert m.reduction == "sum"


def test_anomaly_detection_raises_on_a_nan_gradient():
    x = fg.tensor([0.0, 4.0], requires_grad=True)
    with fg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="NaN"):
            (x.sqrt() * 0).sum().backward()
        x.grad = None
        (x * 2).sum().backward()  # a finite gradient passes
    assert not fg.autograd.is_anomaly_enabled()
    x.grad = None
    (x.sqrt() * 0).sum().backward()  # off again: the NaN reaches .grad, as in PyTorch
    assert np.isnan(x.grad.numpy()[0])


def test_samplers_and_data_parallel_follow_pytorch():
    from ferrograd.utils.data import WeightedRandomSampler
    from ferrograd.utils.data.distributed import DistributedSampler
    from torch.utils.data.distributed import DistributedSampler as TorchDS

    for drop_last in (False, True):
        for n in (10, 12):
            ours = [
                list(DistributedSampler(range(n), 3, r, False, drop_last=drop_last))
                for r in range(3)
            ]
            theirs = [list(TorchDS(range(n), 3, r, False, drop_last=drop_last)) for r in range(3)]
            assert ours == theirs
    s = DistributedSampler(range(10), 2, 0, shuffle=True)
    s.set_epoch(1)
    e1 = list(s)
    s.set_epoch(2)
    assert sorted(e1 + list(DistributedSampler(range(10), 2, 1, shuffle=True, seed=0))) != []
    assert e1 != list(s)
    w = WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=fg.Generator().manual_seed(0))
    counts = np.bincount(list(w), minlength=3)
    assert counts[0] == 0 and abs(counts[2] / counts[1] - 3) < 0.4
    dp = fg.nn.DataParallel(fg.nn.Linear(2, 2))
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    assert dp(fg.ones(1, 2)).shape == (1, 2)


def test_thread_settings_and_other_process_level_names():
    assert fg.get_num_threads() >= 1
    code = "import ferrograd as fg\nfg.set_num_threads(1)\nprint(fg.get_num_threads())\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    with pytest.raises(ValueError):
        fg.set_num_threads(0)
    fg.use_deterministic_algorithms(True)
    assert fg.are_deterministic_algorithms_enabled()
    fg.use_deterministic_algorithms(False)
    m = fg.nn.Linear(2, 2)
    assert fg.compile(m) is m
    assert fg.compile()(m) is m
    assert fg.manual_seed(3) is fg.default_generator
    t = fg.tensor([1.0, 2.0], device="cpu")
    assert t.apply_(lambda v: v * 10).tolist() == [10.0, 20.0]
    assert t.map_(fg.tensor([1.0, 1.0]), lambda a, b: a + b).tolist() == [11.0, 21.0]
    assert t.numpy(force=True).tolist() == [11.0, 21.0]
    v = fg.autograd.Variable(fg.ones(2), requires_grad=True)
    assert v.requires_grad and v.is_leaf
    fg.nn.LSTM(2, 3).flatten_parameters()


def test_cuda_manual_seed_reseeds_only_cuda_streams():
    fg.manual_seed(4)
    cpu_draw = fg.rand(3, device="cpu").numpy()
    fg.manual_seed(4)
    fg.cuda.manual_seed(99)
    assert np.array_equal(fg.rand(3, device="cpu").numpy(), cpu_draw)
    if fg.cuda.is_available():
        a = fg.rand(3, device="cuda").numpy()
        fg.cuda.manual_seed_all(99)
        assert np.array_equal(fg.rand(3, device="cuda").numpy(), a)
        assert fg.cuda.memory_allocated() >= 0


def test_load_reads_files_written_by_torch_save(tmp_path):
    from collections import OrderedDict

    sd = OrderedDict(
        w=torch.randn(2, 3, dtype=torch.float64),
        b=torch.arange(3),
        t=torch.randn(4, 5).t(),  # a strided view: saved with its storage
        h=torch.randn(3).to(torch.bfloat16),
        f16=torch.randn(2).half(),
        i8=torch.tensor([1, -2], dtype=torch.int8),
        i16=torch.tensor([300, -2], dtype=torch.int16),
        p=torch.nn.Parameter(torch.ones(2)),
    )
    path = tmp_path / "ckpt.pt"
    torch.save({"model": sd, "epoch": 3, "lr": 0.1, "shape": torch.Size([2, 3])}, path)
    out = fg.load(path)
    assert out["epoch"] == 3 and out["lr"] == 0.1 and tuple(out["shape"]) == (2, 3)
    for k, v in sd.items():
        got = out["model"][k]
        want = v.detach().float() if v.dtype == torch.bfloat16 else v.detach()
        assert got.dtype.name == str(v.dtype).replace("torch.", "")
        assert np.array_equal(got.astype("float64").numpy(), want.double().numpy()), k
    assert isinstance(out["model"]["p"], fg.nn.Parameter)
    # a state dict saved by torch loads into the same ferrograd module
    lin = torch.nn.Linear(3, 2)
    torch.save(lin.state_dict(), path)
    mine = fg.nn.Linear(3, 2)
    mine.load_state_dict(fg.load(path))
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(
        mine(fg.tensor(x)).detach().numpy(),
        lin(torch.tensor(x)).detach().numpy(),
        rtol=1e-6,
        atol=1e-6,  # (float32 sums in another order; an output can be near 0)
    )
    # a whole torch module cannot be rebuilt without torch: refused with a clear message
    torch.save(lin, path)
    import pickle

    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        fg.load(path)
    # a corrupt zip is a ValueError
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="load"):
        fg.load(path)


def test_save_keeps_arrays_and_pickles_other_objects_for_weights_only_false(tmp_path):
    import argparse
    import pickle

    path = tmp_path / "all.pt"
    model = fg.nn.Linear(2, 2)
    obj = {
        "array": np.arange(6.0).reshape(2, 3),
        "ints": np.array([1, 2], dtype=np.int32),
        "model": model,
        "args": argparse.Namespace(lr=0.1, epochs=2),
    }
    fg.save(obj, path)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        fg.load(path)
    out = fg.load(path, weights_only=False)
    assert isinstance(out["array"], np.ndarray) and np.array_equal(out["array"], obj["array"])
    assert out["ints"].dtype == np.int32
    assert out["args"].lr == 0.1
    x = fg.ones(1, 2)
    assert np.array_equal(out["model"](x).detach().numpy(), model(x).detach().numpy())
    # arrays alone stay loadable with the default weights_only=True
    fg.save({"a": np.ones(3)}, path)
    assert np.array_equal(fg.load(path)["a"], np.ones(3))


def test_one_argument_where_and_argwhere_are_nonzero():
    a = np.array([[1.0, -2.0, 3.0], [0.0, 5.0, -6.0]])
    ours = fg.where(fg.tensor(a) > 0)
    theirs = torch.where(torch.tensor(a) > 0)
    assert len(ours) == 2
    for o, t in zip(ours, theirs):
        assert o.tolist() == t.tolist()
    assert fg.argwhere(fg.tensor(a)).tolist() == torch.argwhere(torch.tensor(a)).tolist()
    with pytest.raises(TypeError, match="both"):
        fg.where(fg.tensor(a) > 0, fg.tensor(a))


# ------------------------------------------------- second round: nanoGPT, minGPT, tutorials


def test_random_sampler_with_replacement_is_lazy():
    from ferrograd.utils.data import RandomSampler

    s = RandomSampler(list(range(5)), replacement=True, num_samples=int(1e10))
    it = iter(s)
    draws = [next(it) for _ in range(3000)]
    assert len(s) == int(1e10) and set(draws) == set(range(5))


def test_half_parameters_train_with_adamw_weight_decay():
    w = np.random.default_rng(0).normal(size=(2, 3))
    for dtype in ("bfloat16", "float16"):
        p = fg.nn.Parameter(fg.tensor(w).astype(dtype))
        p.grad = fg.ones(2, 3, dtype=dtype)
        fg.optim.AdamW([p], lr=1e-2).step()
        tp = torch.nn.Parameter(torch.tensor(w).to(getattr(torch, dtype)))
        tp.grad = torch.ones(2, 3, dtype=getattr(torch, dtype))
        torch.optim.AdamW([tp], lr=1e-2).step()
        assert p.dtype == dtype
        np.testing.assert_allclose(
            p.float().detach().numpy(), tp.float().detach().numpy(), atol=1e-2
        )
        # in place with a float64 scalar tensor: computed in float32, rounded once (PyTorch's)
        q = fg.tensor([1.0, 3.0, 7.0]).astype(dtype)
        q *= fg.tensor(0.123456789, dtype=fg.float64)
        tq = torch.tensor([1.0, 3.0, 7.0]).to(getattr(torch, dtype))
        tq *= torch.tensor(0.123456789, dtype=torch.float64)
        assert q.float().tolist() == tq.float().tolist()


def test_legacy_tensor_constructor_sizes_and_data():
    assert fg.Tensor(4, 3).shape == (4, 3) and fg.Tensor(4, 3).dtype == fg.float32
    assert fg.Tensor().shape == (0,)
    assert fg.nn.Parameter(fg.Tensor(3, 2)).shape == (3, 2)
    assert fg.Tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    assert fg.Tensor([1, 2], fg.float64).dtype == fg.float64  # MegEngine's (data, dtype)
    # one size is PyTorch's too: an old-style layer's bias
    for lib in (fg, torch):
        b = lib.nn.Parameter(lib.Tensor(5))
        assert tuple(b.shape) == (5,) and b.dtype == lib.float32
    assert fg.Tensor(np.int64(3)).shape == (3,)
    # with a dtype (which PyTorch's constructor does not take) one number is MegEngine's data
    t = fg.Tensor(3, dtype="int32")
    assert t.shape == () and t.dtype == fg.int32 and t.item() == 3
    with pytest.raises(TypeError):
        torch.Tensor(3, dtype=torch.int32)


def test_sequential_slices_keep_child_names():
    from collections import OrderedDict

    def build(lib):
        return lib.nn.Sequential(
            OrderedDict(conv=lib.nn.Linear(2, 2), act=lib.nn.ReLU(), out=lib.nn.Linear(2, 1))
        )

    assert list(build(fg)[:2].state_dict()) == list(build(torch)[:2].state_dict())
    assert [n for n, _ in build(fg)[1:].named_children()] == ["act", "out"]


def test_range_keys_and_squeeze_of_a_longer_axis_follow_torch():
    a = np.arange(12.0).reshape(3, 4)
    y = [1, 0, 3]
    assert fg.tensor(a)[range(3), fg.tensor(y)].tolist() == a[range(3), y].tolist()
    x = fg.tensor(a, requires_grad=True)
    x[range(3), fg.tensor(y)].sum().backward()
    want = np.zeros_like(a)
    want[range(3), y] = 1
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert fg.ones(2, 1, 3).squeeze(0).shape == torch.ones(2, 1, 3).squeeze(0).shape
    assert fg.ones(2, 1, 3).squeeze((0, 1)).shape == torch.ones(2, 1, 3).squeeze((0, 1)).shape


def test_loss_backward_inside_a_trace_equals_eager():
    x = fg.randn(5, 3, dtype=fg.float64)
    y = fg.tensor([0, 1, 1, 0, 1])
    results = []
    for traced in (False, True):
        fg.manual_seed(0)
        m = fg.nn.Sequential(fg.nn.Linear(3, 8), fg.nn.Tanh(), fg.nn.Linear(8, 2)).double()
        opt = fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y, m=m, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        f = fg.trace(step) if traced else step
        losses = [f(x, y).item() for _ in range(4)]
        results.append((losses, [p.detach().numpy().copy() for p in m.parameters()]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)


def test_strict_load_state_dict_raises_runtime_error_as_torch():
    m = fg.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="Missing key"):
        m.load_state_dict({"weight": fg.zeros(2, 2)})
    with pytest.raises(KeyError):
        m.load_state_dict({"weight": fg.zeros(2, 2)})


@pytest.mark.parametrize("largest", [True, False])
def test_topk_and_argmax_equal_torch_on_large_rows(largest):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(6, 5000)).astype(np.float32)
    a[2, 17] = np.nan
    for k in (1, 7, 200):
        ours = fg.topk(fg.tensor(a), k, dim=1, largest=largest)
        theirs = torch.topk(torch.tensor(a), k, dim=1, largest=largest)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    t = fg.tensor(a)
    for fn in ("argmax", "argmin"):
        for dim in (0, 1):
            assert (
                getattr(fg, fn)(t, dim).tolist()
                == getattr(torch, fn)(torch.tensor(a), dim).tolist()
            )
        assert (
            getattr(fg, fn)(t.t(), 0).tolist()
            == getattr(torch, fn)(torch.tensor(a).t(), 0).tolist()
        )
    ties = fg.tensor([[2.0, 5.0, 5.0], [1.0, 1.0, 0.0]])
    assert fg.argmax(ties, 1).tolist() == [1, 0] and fg.argmin(ties, 1).tolist() == [0, 2]
    x = fg.tensor(a[:2, :50], requires_grad=True)
    fg.topk(x, 3, dim=1).values.sum().backward()
    assert x.grad.numpy().sum() == 6


def test_megengine_script_spellings():
    import ferrograd.functional as MF
    import ferrograd.module as M
    import ferrograd.optimizer as optim
    from ferrograd.jit import trace

    fg.manual_seed(0)
    m = M.Sequential(M.Linear(4, 8), M.ReLU(), M.Linear(8, 3))
    gm = fg.GradManager().attach(m.parameters())
    opt = optim.SGD(m.parameters(), lr=0.1)
    x, y = fg.randn(6, 4), fg.tensor([0, 1, 2, 0, 1, 2])

    @trace(symbolic=True)
    def step(x, y):
        with gm:
            loss = MF.nn.cross_entropy(m(x), y, axis=1, label_smooth=0.1)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    losses = [step(x, y).item() for _ in range(3)]
    assert losses[2] < losses[0]
    assert all(p.grad is None for p in m.parameters())
    logits = m(x).detach()
    tl, ty = torch.tensor(logits.numpy()), torch.tensor(y.numpy())
    np.testing.assert_allclose(
        MF.nn.cross_entropy(logits, y, label_smooth=0.2).item(),
        torch.nn.functional.cross_entropy(tl, ty, label_smoothing=0.2).item(),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        MF.nn.cross_entropy(fg.softmax(logits, 1), y, with_logits=False).item(),
        torch.nn.functional.cross_entropy(tl, ty).item(),
        rtol=1e-5,
    )
    np.testing.assert_allclose(  # classes on the last axis
        MF.nn.cross_entropy(logits[None].transpose(1, 2), y[None], axis=1).item(),
        MF.nn.cross_entropy(logits[None], y[None], axis=2).item(),
        rtol=1e-6,
    )
    acc1, acc3 = MF.topk_accuracy(logits, y, topk=(1, 3))
    assert acc3.item() == 1.0
    assert abs(acc1.item() - (logits.numpy().argmax(1) == y.numpy()).mean()) < 1e-6
    assert MF.logsoftmax(logits, axis=1).shape == logits.shape
    # MegEngine's meanings in its namespace; the package's names keep PyTorch's, axis= and
    # dim= being spellings of one argument
    v = fg.tensor([[0.0, 1.0, 2.0]])
    assert abs(MF.var(v, axis=1).item() - np.var([0, 1, 2])) < 1e-6
    assert abs(MF.std(v, axis=1).item() - np.std([0, 1, 2])) < 1e-6
    assert abs(fg.var(v, axis=1).item() - 1.0) < 1e-6 and abs(fg.var(v, dim=1).item() - 1.0) < 1e-6
    assert MF.topk(fg.tensor([3.0, 1.0, 2.0]), 2)[0].tolist() == [1.0, 2.0]
    assert fg.topk(fg.tensor([3.0, 1.0, 2.0]), 2, descending=False).values.tolist() == [1.0, 2.0]
    assert [p.tolist() for p in MF.split(fg.arange(7), 3, axis=0)] == [
        a.tolist() for a in np.array_split(np.arange(7), 3)
    ]
    assert [p.tolist() for p in MF.split(fg.arange(7), [2, 5], axis=0)] == [
        a.tolist() for a in np.split(np.arange(7), [2, 5])
    ]
    assert [p.tolist() for p in fg.split(fg.arange(7), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [p.tolist() for p in fg.split(fg.arange(7), 3, axis=0)] == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_equals_torch_with_gradients(padding_mode, mode, align_corners):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 5, 7))
    g = rng.uniform(-1.6, 1.6, size=(2, 4, 6, 2))  # reaches well outside the image
    fx, fgr = fg.tensor(x, requires_grad=True), fg.tensor(g, requires_grad=True)
    tx, tgr = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    ours = F.grid_sample(fx, fgr, mode, padding_mode, align_corners)
    theirs = torch.nn.functional.grid_sample(tx, tgr, mode, padding_mode, align_corners)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=1e-12)
    w = rng.normal(size=theirs.shape)
    (ours * fg.tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    if mode == "bilinear":
        np.testing.assert_allclose(fgr.grad.numpy(), tgr.grad.numpy(), atol=1e-10)


# ---------------------------------------- third round: GPT-2, DDPM, WGAN-GP, PPO, SimCLR


def test_all_targets_ignored_gives_nan_loss_and_zero_gradients_as_torch():
    for ls in (0.0, 0.1):
        for w in (None, [1.0, 2.0, 3.0]):
            x = fg.ones(2, 3, requires_grad=True)
            tx = torch.ones(2, 3, requires_grad=True)
            loss = F.cross_entropy(
                x, fg.tensor([-100, -100]), None if w is None else fg.tensor(w), label_smoothing=ls
            )
            tloss = torch.nn.functional.cross_entropy(
                tx,
                torch.tensor([-100, -100]),
                None if w is None else torch.tensor(w),
                label_smoothing=ls,
            )
            loss.backward()
            tloss.backward()
            assert np.isnan(loss.item()) and np.isnan(tloss.item())
            np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())  # zeros, not NaN
    # one counted target still gives the usual mean
    x = fg.tensor([[1.0, 2.0, 0.5], [0.0, 1.0, 3.0]], requires_grad=True)
    loss = F.cross_entropy(x, fg.tensor([2, -100]))
    assert (
        abs(
            loss.item()
            - torch.nn.functional.cross_entropy(
                torch.tensor(x.detach().numpy()), torch.tensor([2, -100])
            ).item()
        )
        < 1e-6
    )


def test_a_list_of_one_element_tensors_is_a_vector_as_torch():
    vals = [fg.ones(1) * i for i in range(3)]
    v = fg.tensor(vals)
    assert v.shape == (3,) and v.tolist() == [0.0, 1.0, 2.0]
    assert fg.tensor([fg.ones(1, dtype=fg.float64)] * 2).dtype == fg.float64
    assert fg.tensor([fg.ones(2), fg.ones(2)]).shape == (2, 2)


def test_legacy_tensor_of_float_data_is_float32():
    assert fg.Tensor(np.random.default_rng(0).normal(size=(2, 3))).dtype == fg.float32
    assert fg.Tensor([0.5, 1.5]).dtype == fg.float32
    assert fg.Tensor([1, 2]).dtype == fg.int64  # MegEngine keeps integer data integer


def test_max_with_dim_sends_the_gradient_to_the_returned_index_as_torch():
    a = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 0.0]])
    for name in ("max", "min"):
        x, tx = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        getattr(x, name)(1)[0].sum().backward()
        getattr(tx, name)(1)[0].sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    x = fg.tensor(a, requires_grad=True)
    fg.amax(x, 1).sum().backward()  # amax shares ties out evenly, as PyTorch's
    np.testing.assert_array_equal(x.grad.numpy(), [[0.5, 0, 0.5], [0.5, 0.5, 0]])
    v = fg.tensor(3.0).max(0)
    assert v.values.item() == 3.0 and v.indices.item() == 0


def test_integer_powers_stay_integer_as_torch():
    t, tt = fg.arange(5), torch.arange(5)
    assert (t**2).dtype == fg.int64 and (t**2).tolist() == (tt**2).tolist()
    assert t.pow(3).tolist() == tt.pow(3).tolist() and (t**0).tolist() == [1] * 5
    big = fg.tensor([3], dtype=fg.int32) ** 41  # wraps around as torch's int32 does
    assert big.tolist() == (torch.tensor([3], dtype=torch.int32) ** 41).tolist()
    assert (t**0.5).dtype == fg.float32
    y = fg.arange(10.0)
    assert y[fg.arange(3) ** 2].tolist() == [0.0, 1.0, 4.0]
    with pytest.raises(ValueError, match="negative"):
        t**-1


def test_torch_style_autograd_function_with_ctx_and_apply():
    def make(lib):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, i, scale=2.0):
                r = i.exp() * scale
                ctx.save_for_backward(r)
                return r

            @staticmethod
            def backward(ctx, g):
                (r,) = ctx.saved_tensors
                assert ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]
                return g * r, None

        class Clip(lib.autograd.Function):
            @staticmethod
            def forward(x, lo):
                return x.clamp(min=lo)

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0])
                ctx.lo = inputs[1]

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * (x > ctx.lo).to(g.dtype), None

        return Exp, Clip

    a = np.array([0.5, -1.0, 2.0])
    out = {}
    for lib in (fg, torch):
        exp, clip = make(lib)
        x = lib.tensor(a, requires_grad=True)
        y = (exp.apply(x, 3.0) * clip.apply(x, 0.0)).sum()
        y.backward()
        out[lib.__name__] = (y.item(), x.grad.numpy().copy())
    assert abs(out["ferrograd"][0] - out["torch"][0]) < 1e-12
    np.testing.assert_allclose(out["ferrograd"][1], out["torch"][1], rtol=1e-12)
    # with a GradManager, inside fg.trace
    exp, _ = make(fg)
    w = fg.tensor(a)
    gm = fg.GradManager().attach([w])

    @fg.trace
    def step():
        with gm:
            loss = exp.apply(w, 3.0).sum()
            gm.backward(loss)
        return loss

    step()
    np.testing.assert_allclose(w.grad.numpy(), 3.0 * np.exp(a), rtol=1e-12)


def test_small_pytorch_spellings_of_the_third_round():
    x = fg.randn(2, 3)
    assert F.softmax(x, dim=-1, dtype=fg.float64).dtype == fg.float64
    assert x.log_softmax(-1, dtype=fg.float64).dtype == fg.float64
    assert fg.cat([fg.ones(2), fg.ones(2, dtype=fg.float64)]).dtype == fg.float64
    a = fg.zeros(3, 2)
    a[0] = fg.ones(1, 2)  # leading length-1 axes dropped, as PyTorch
    assert a.tolist() == [[1, 1], [0, 0], [0, 0]]
    assert x.new(2, 2).shape == (2, 2) and x.new([1, 2]).dtype == x.dtype
    xr = fg.randn(3, requires_grad=True)
    (g,) = fg.autograd.grad((xr * 2).sum(), xr, only_inputs=True)
    assert g.tolist() == [2.0, 2.0, 2.0]
    assert fg.index_select(fg.arange(5.0), 0, fg.tensor([1, 3], dtype=fg.int32)).tolist() == [1, 3]
    mask = fg.zeros(2, 3, dtype=fg.bool).scatter(1, fg.tensor([[0], [2]]), True)
    want = torch.zeros(2, 3, dtype=torch.bool).scatter(1, torch.tensor([[0], [2]]), True)
    assert mask.tolist() == want.tolist()


@pytest.mark.parametrize(
    "kw",
    [
        {"max_norm": 1.0},
        {"max_norm": 2.0, "norm_type": 1.0},
        {"scale_grad_by_freq": True},
        {"padding_idx": 2, "scale_grad_by_freq": True, "max_norm": 1.5},
    ],
)
def test_embedding_max_norm_and_scale_grad_by_freq_as_torch(kw):
    w0 = np.random.default_rng(0).normal(size=(5, 3)) * 3
    idx = np.array([[0, 2, 2], [4, 0, 1]])
    ours = fg.nn.Embedding(5, 3, **kw).double()
    theirs = torch.nn.Embedding(5, 3, **kw).double()
    ours.weight = fg.nn.Parameter(fg.tensor(w0))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w0))
    g = np.random.default_rng(1).normal(size=(2, 3, 3))
    a, b = ours(fg.tensor(idx)), theirs(torch.tensor(idx))
    (a * fg.tensor(g)).sum().backward()
    (b * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(
        ours.weight.detach().numpy(), theirs.weight.detach().numpy(), atol=1e-12
    )
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (2, 1), "same"])
def test_conv_padding_modes_equal_torch(mode, padding):
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 6))
    ours = fg.nn.Conv2d(3, 4, 3, padding=padding, padding_mode=mode).double()
    theirs = torch.nn.Conv2d(3, 4, 3, padding=padding, padding_mode=mode).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, b = ours(fx), theirs(tx)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="padding_mode"):
        fg.nn.Conv2d(3, 4, 3, padding_mode="mirror")


@pytest.mark.parametrize(
    "kw",
    [
        {"size": (4, 3), "mode": "area"},
        {"scale_factor": 0.5, "mode": "area"},
        {"size": (11, 9), "mode": "nearest-exact"},
        {"scale_factor": 1.7, "mode": "nearest-exact"},
        {"scale_factor": 1.7, "mode": "nearest", "recompute_scale_factor": True},
        {
            "scale_factor": 1.5,
            "mode": "bilinear",
            "recompute_scale_factor": True,
            "align_corners": False,
        },
    ],
)
def test_interpolate_area_and_nearest_exact_equal_torch(kw):
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 6))
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, b = F.interpolate(fx, **kw), torch.nn.functional.interpolate(tx, **kw)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    w = np.random.default_rng(1).normal(size=b.shape)
    (a * fg.tensor(w)).sum().backward()
    (b * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("ema", [False, True])
def test_averaged_model_and_update_bn_equal_torch(ema):
    from ferrograd.optim import swa_utils as fsu
    from torch.optim import swa_utils as tsu

    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 1))

    ours, theirs = make(fg).double(), make(torch).double()
    for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        with torch.no_grad():
            b.copy_(torch.tensor(a.detach().numpy()))
    fa = fsu.AveragedModel(ours, multi_avg_fn=fsu.get_ema_multi_avg_fn(0.9) if ema else None)
    ta = tsu.AveragedModel(theirs, multi_avg_fn=tsu.get_ema_multi_avg_fn(0.9) if ema else None)
    rng = np.random.default_rng(0)
    for _ in range(4):
        for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
            d = rng.normal(size=a.shape)
            with fg.no_grad():
                a.add_(fg.tensor(d))
            with torch.no_grad():
                b.add_(torch.tensor(d))
        fa.update_parameters(ours)
        ta.update_parameters(theirs)
    for a, b in zip(fa.parameters(), ta.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    assert int(fa.n_averaged.item()) == 4
    x = rng.normal(size=(8, 3))
    fsu.update_bn([fg.tensor(x[:4]), fg.tensor(x[4:])], fa)
    tsu.update_bn([torch.tensor(x[:4]), torch.tensor(x[4:])], ta)
    np.testing.assert_allclose(
        fa.module[1].running_var.numpy(), ta.module[1].running_var.numpy(), atol=1e-12
    )
    np.testing.assert_allclose(
        fa(fg.tensor(x)).detach().numpy(), ta(torch.tensor(x)).detach().numpy(), atol=1e-12
    )


def test_conv_transpose_output_size_and_foreach_ops():
    x = np.random.default_rng(0).normal(size=(1, 3, 5, 5))
    ours = fg.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    theirs = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    for size in [(9, 9), (10, 10), (1, 2, 10, 9)]:
        a, b = ours(fg.tensor(x), output_size=size), theirs(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="output size"):
        ours(fg.tensor(x), output_size=(12, 12))
    # torch._foreach_* (EMA code)
    mine = [fg.ones(2), fg.ones(3)]
    ref = [torch.ones(2), torch.ones(3)]
    other = [[3.0, 3.0], [5.0, 5.0, 5.0]]
    for lib, ts in ((fg, mine), (torch, ref)):
        lib._foreach_mul_(ts, 0.5)
        lib._foreach_add_(ts, [lib.tensor(o) for o in other], alpha=2)
        lib._foreach_lerp_(ts, [lib.tensor(o) for o in other], 0.25)
    for a, b in zip(mine, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_load_calls_a_map_location_function_as_pytorch_does(tmp_path):
    path = tmp_path / "ckpt.pt"
    w = fg.ones(2)
    fg.save({"w": w}, path)
    saved = str(w.device).split(":")[0]
    seen = []

    def keep(storage, loc):  # the storage it gets was read onto the CPU
        seen.append(loc)
        return storage

    for fn, where in (
        (keep, "cpu"),
        (lambda storage, loc: storage.cpu(), "cpu"),
        (lambda storage, loc: None, saved),  # None: where it was saved
        (lambda s: "cpu", "cpu"),
    ):
        out = fg.load(path, map_location=fn)
        assert out["w"].device.type == where
        np.testing.assert_array_equal(out["w"].cpu().numpy(), [1.0, 1.0])
    assert [s.split(":")[0] for s in seen] == [saved]


def test_device_probes_and_cuda_typed_tensors_of_pytorch_scripts():
    # scripts probe torch.xpu / torch.mps before picking a device
    assert fg.xpu.is_available() is False and fg.xpu.device_count() == 0
    assert fg.mps.is_available() is False
    assert fg.nn.parallel.data_parallel(fg.nn.Identity(), fg.ones(2, 3)).shape == (2, 3)
    lin = fg.nn.Linear(2, 3)
    out = fg.nn.parallel.data_parallel(lin, (fg.ones(4, 2),))
    np.testing.assert_array_equal(out.detach().numpy(), lin(fg.ones(4, 2)).detach().numpy())
    # the old dcgan's isinstance(x.data, torch.cuda.FloatTensor): false for CPU tensors
    assert not isinstance(fg.ones(2, device="cpu"), fg.cuda.FloatTensor)
    assert isinstance(fg.ones(2, device="cpu"), fg.FloatTensor)
    if fg.cuda.is_available():
        t = fg.cuda.FloatTensor(3)
        assert t.device.startswith("cuda") and t.shape == (3,)
        assert isinstance(t, fg.cuda.FloatTensor) and not isinstance(t, fg.cuda.LongTensor)
