"""MegEngine 1.x behaviour of the MegEngine namespaces (ferrograd.functional, .module,
.optimizer), with the package-level PyTorch behaviour checked unchanged where they differ."""

import math

import ferrograd as fg
import ferrograd.functional as F
import ferrograd.module as M
import ferrograd.optimizer as O
import numpy as np
import pytest


def _bn_reference(xs, momentum, axes):
    rm = np.zeros(xs[0].shape[1], np.float64)
    rv = np.ones(xs[0].shape[1], np.float64)
    for x in xs:
        n = np.prod([x.shape[a] for a in axes])
        mean = x.mean(axis=axes)
        var = x.var(axis=axes) * n / (n - 1)
        rm = momentum * rm + (1 - momentum) * mean
        rv = momentum * rv + (1 - momentum) * var
    return rm, rv


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (3, 4, 5)), ("BatchNorm2d", (3, 4, 2, 3))])
def test_module_batchnorm_megengine_momentum(cls, shape):
    rng = np.random.default_rng(0)
    xs = [rng.normal(2.0, 1.0, shape).astype(np.float32) for _ in range(3)]
    bn = getattr(M, cls)(4)
    assert bn.momentum == 0.9
    for x in xs:
        y = bn(fg.tensor(x)).numpy()
    axes = tuple(d for d in range(len(shape)) if d != 1)
    rm, rv = _bn_reference(xs, 0.9, axes)
    assert bn.running_mean.shape == (1, 4, 1, 1)
    np.testing.assert_allclose(bn.running_mean.numpy().reshape(-1), rm, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy().reshape(-1), rv, rtol=1e-5)
    cs = (1, 4) + (1,) * (len(shape) - 2)
    want = (xs[-1] - xs[-1].mean(axes).reshape(cs)) / np.sqrt(xs[-1].var(axes).reshape(cs) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    # eval: the running statistics normalise and stay put
    bn.eval()
    y = bn(fg.tensor(xs[0])).numpy()
    want = (xs[0] - rm.reshape(cs)) / np.sqrt(rv.reshape(cs) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy().reshape(-1), rm, rtol=1e-5)
    assert set(bn.state_dict()) == set(fg.nn.BatchNorm2d(4).state_dict())


def test_package_batchnorm_keeps_torch_momentum():
    x = np.array([[0.0, 2.0], [2.0, 6.0]], np.float32)
    bn = fg.nn.BatchNorm1d(2)
    assert bn.momentum == 0.1
    bn(fg.tensor(x))
    # PyTorch: running = 0.9 * 0 + 0.1 * batch_mean
    np.testing.assert_allclose(bn.running_mean.numpy(), [0.1, 0.4], rtol=1e-6)
    assert bn.running_mean.shape == (2,)


def test_module_batchnorm_freeze():
    bn = M.BatchNorm2d(3, freeze=True)
    bn.running_mean[...] = fg.ones((1, 3, 1, 1))
    bn.running_var[...] = 4.0 * fg.ones((1, 3, 1, 1))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    y = bn(fg.tensor(x)).numpy()  # training mode, yet the running stats normalise
    np.testing.assert_allclose(y, (x - 1.0) / np.sqrt(4.0 + 1e-5), rtol=1e-6)
    np.testing.assert_allclose(bn.running_mean.numpy().reshape(-1), [1, 1, 1])
    with pytest.raises(ValueError):
        M.BatchNorm2d(3, freeze=True, track_running_stats=False)


def test_module_batchnorm_track_stats_toggled_off_keeps_running_stats():
    bn = M.BatchNorm2d(2)
    bn.track_running_stats = False
    bn(fg.tensor(np.random.rand(4, 2, 3, 3).astype(np.float32)))
    np.testing.assert_array_equal(bn.running_mean.numpy().reshape(-1), [0, 0])
    np.testing.assert_array_equal(bn.running_var.numpy().reshape(-1), [1, 1])


def test_sync_batchnorm_megengine_momentum():
    x = np.array([[1.0, 0.0], [3.0, 4.0]], np.float32)
    bn = M.SyncBatchNorm(2)
    bn(fg.tensor(x))
    # 0.9 * 0 + 0.1 * mean; 0.9 * 1 + 0.1 * unbiased var
    np.testing.assert_allclose(bn.running_mean.numpy().reshape(-1), [0.2, 0.2], rtol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy().reshape(-1), [1.1, 1.7], rtol=1e-6)


def test_functional_batch_norm_momentum():
    x = fg.tensor(np.array([[1.0, 2.0], [3.0, 6.0]], np.float32))
    rm = fg.zeros((2,))
    rv = fg.ones((2,))
    y = F.nn.batch_norm(x, rm, rv, training=True, momentum=0.9)
    np.testing.assert_allclose(rm.numpy(), [0.2, 0.4], rtol=1e-6)
    np.testing.assert_allclose(rv.numpy(), [0.9 + 0.1 * 2.0, 0.9 + 0.1 * 8.0], rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), [[-1, -1], [1, 1]], atol=1e-4)
    assert F.batch_norm is F.nn.batch_norm
    _, m, v = F.nn.batch_norm(x, rm, rv, training=True, inplace=False)
    assert m is not None and v is not None
    # eval uses the running statistics
    y = F.nn.batch_norm(x, fg.ones((2,)), fg.full((2,), 4.0), training=False, eps=0.0)
    np.testing.assert_allclose(y.numpy(), [[0, 0.5], [1, 2.5]], rtol=1e-6)


def test_binary_cross_entropy_with_logits_default():
    out = F.nn.binary_cross_entropy(fg.tensor([0.0, 2.0]), fg.tensor([1.0, 0.0])).numpy()
    want = np.mean([np.log(2.0), np.log1p(np.exp(2.0))])
    np.testing.assert_allclose(out, want, rtol=1e-5)
    p = F.nn.binary_cross_entropy(
        fg.tensor([0.25]), fg.tensor([1.0]), with_logits=False, reduction="sum"
    )
    np.testing.assert_allclose(p.numpy(), -np.log(0.25), rtol=1e-6)


def test_avg_pool2d_excludes_padding_by_default():
    x = fg.ones((1, 1, 2, 2))
    out = F.avg_pool2d(x, 2, stride=2, padding=1).numpy()
    np.testing.assert_allclose(out, np.ones((1, 1, 2, 2)))
    out = F.nn.avg_pool2d(x, 2, stride=2, padding=1, mode="average").numpy()
    np.testing.assert_allclose(out, np.full((1, 1, 2, 2), 0.25))
    np.testing.assert_allclose(M.AvgPool2d(2, 2, 1)(x).numpy(), np.ones((1, 1, 2, 2)))
    # PyTorch's default counts the padding
    np.testing.assert_allclose(fg.nn.AvgPool2d(2, 2, 1)(x).numpy(), np.full((1, 1, 2, 2), 0.25))


@pytest.mark.parametrize("ndim,axis", [(1, 0), (2, 1), (3, 0), (4, 1)])
def test_softmax_default_axis(ndim, axis):
    x = np.random.default_rng(1).normal(size=(2,) * ndim).astype(np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(
        F.softmax(fg.tensor(x)).numpy(), e / e.sum(axis=axis, keepdims=True), rtol=1e-5
    )
    np.testing.assert_allclose(
        M.Softmax()(fg.tensor(x)).numpy(), e / e.sum(axis=axis, keepdims=True), rtol=1e-5
    )


def test_interpolate_default_bilinear():
    x = fg.tensor(np.array([[[[1.0, 2.0]]]], np.float32))
    out = F.nn.interpolate(x, size=(1, 4)).numpy().reshape(-1)
    np.testing.assert_allclose(out, [1.0, 1.25, 1.75, 2.0])
    assert F.vision.interpolate is F.nn.interpolate
    with pytest.raises(ValueError):
        F.nn.interpolate(x, size=(1, 4), mode="nearest", align_corners=True)


def test_round_half_away_from_zero():
    out = F.round(fg.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997])).numpy()
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, -1.0, -3.0, 0.0])
    np.testing.assert_array_equal(fg.round(fg.tensor([0.5, 2.5])).numpy(), [0.0, 2.0])


def test_repeat_is_numpy_repeat():
    x = np.array([[1, 2], [3, 4]], np.int32)
    np.testing.assert_array_equal(F.repeat(fg.tensor(x), 2).numpy(), np.repeat(x, 2))
    np.testing.assert_array_equal(
        F.repeat(inp=fg.tensor(x), repeats=3, axis=1).numpy(), np.repeat(x, 3, axis=1)
    )
    np.testing.assert_array_equal(F.tile(inp=fg.tensor(x), reps=(1, 2)).numpy(), np.tile(x, (1, 2)))


def test_norm_and_normalize():
    x = fg.tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    np.testing.assert_allclose(F.norm(x, axis=-1).numpy(), [14**0.5, 77**0.5], rtol=1e-6)
    np.testing.assert_allclose(F.norm(x, ord=1, axis=0).numpy(), [5, 7, 9], rtol=1e-6)
    v = fg.tensor([3.0, -4.0])
    assert F.norm(v, ord=math.inf).item() == 4.0
    np.testing.assert_allclose(F.normalize(v).numpy(), [0.6, -0.8], rtol=1e-6)
    np.testing.assert_allclose(
        F.normalize(x, axis=1).numpy()[0], np.array([1, 2, 3]) / 14**0.5, rtol=1e-6
    )
    with pytest.raises(TypeError):
        F.norm(x)  # MegEngine: axis is required unless the input is a vector
    assert F.nn.normalize is F.normalize


def test_split():
    x = fg.tensor(np.arange(5.0, dtype=np.float32))
    assert [p.tolist() for p in F.split(x, 2)] == [[0, 1, 2], [3, 4]]
    assert [p.tolist() for p in F.split(x, [1, 3])] == [[0], [1, 2], [3, 4]]
    with pytest.raises(ValueError):
        F.split(x, 6)
    with pytest.raises(ValueError, match="Invalid nsplits_or_secions"):
        F.split(x, [3, 2])


def test_arange():
    a = F.arange(5)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2, 3, 4])
    np.testing.assert_allclose(
        F.arange(fg.tensor(1), fg.tensor(2.0), 0.25).numpy(), [1, 1.25, 1.5, 1.75]
    )
    assert F.arange(3, dtype="int32").dtype == np.int32
    assert fg.arange(5).dtype == np.int64


def test_missing_names_present():
    assert fg.Parameter is fg.nn.Parameter
    for name in [
        "conv1d", "conv2d", "conv_transpose2d", "gelu", "leaky_relu", "linear", "layer_norm",
        "group_norm", "instance_norm", "logsigmoid", "relu6", "prelu", "pixel_shuffle",
        "adaptive_avg_pool2d", "adaptive_max_pool2d", "embedding", "local_response_norm",
        "hswish", "hsigmoid", "matinv", "cond_take", "non_zero", "nonzero", "copy",
        "indexing_one_hot", "floor_div", "mod",
    ]:  # fmt: skip
        assert callable(getattr(F, name)), name
    for name in ["hinge_loss", "square_loss", "l1_loss"]:
        assert callable(getattr(F.nn, name)), name
    from ferrograd.module import init

    assert init is M.init


def test_elemwise_helpers():
    x = fg.tensor([-4.0, -1.0, 0.0, 1.0, 4.0])
    np.testing.assert_allclose(F.hsigmoid(x).numpy(), [0, 1 / 3, 0.5, 2 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(F.hswish(x).numpy(), [0, -1 / 3, 0, 2 / 3, 4], rtol=1e-6)
    np.testing.assert_allclose(F.relu6(fg.tensor([-1.0, 3.0, 8.0])).numpy(), [0, 3, 6])
    np.testing.assert_allclose(F.prelu(x, 0.5).numpy(), [-2, -0.5, 0, 1, 4])
    np.testing.assert_array_equal(F.floor_div(fg.tensor([-5, 7]), 2).numpy(), [-3, 3])
    # int mod is Python's (sign of the divisor), float mod C's fmod (sign of the dividend)
    np.testing.assert_array_equal(F.mod(fg.tensor([-5, 5]), 3).numpy(), [1, 2])
    np.testing.assert_allclose(F.mod(fg.tensor([-5.0, 5.0]), 3.0).numpy(), [-2.0, 2.0])
    np.testing.assert_allclose(F.clip(x, lower=-1.0, upper=1.0).numpy(), [-1, -1, 0, 1, 1])
    np.testing.assert_allclose(F.clip(x, upper=0.0).numpy(), [-4, -1, 0, 0, 0])


def test_tensor_functions():
    m = fg.tensor(np.array([[2.0, 0.0], [0.0, 4.0]], np.float32))
    np.testing.assert_allclose(F.matinv(m).numpy(), [[0.5, 0], [0, 0.25]])
    x = fg.tensor(np.array([[1.0, -2.0], [3.0, -4.0]], np.float32))
    vals, idx = F.cond_take(x > 0, x)
    assert vals.tolist() == [1.0, 3.0] and idx.tolist() == [0, 2] and idx.dtype == np.int32
    assert F.non_zero(x > 0).tolist() == [[0, 0], [1, 0]]
    rows, cols = F.non_zero(x > 0, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 0]
    src = fg.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    assert F.indexing_one_hot(src, fg.tensor([2, 0]), 1).tolist() == [3.0, 4.0]
    assert F.indexing_one_hot(src, fg.tensor([2, 0]), 1, keepdims=True).shape == (2, 1)
    assert F.copy(src).tolist() == src.tolist()
    assert F.flatten(fg.ones((2, 3, 4)), start_axis=1).shape == (2, 12)
    assert F.diag(fg.tensor([1.0, 2.0]), k=1).tolist() == [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    assert F.zeros(shape=(2, 3)).shape == (2, 3) and F.ones(fg.tensor([2, 3])).shape == (2, 3)
    assert F.full(np.array([2]), 1.5).tolist() == [1.5, 1.5]
    assert F.eye([2, 3]).shape == (2, 3)
    assert F.broadcast_to(fg.ones((1, 3)), fg.tensor([2, 3])).shape == (2, 3)
    assert F.broadcast_to(fg.ones((1, 3)), (4, None)).shape == (4, 3)
    assert F.reshape(fg.ones((6,)), np.array([2, -1], np.int32)).shape == (2, 3)
    assert F.expand_dims(fg.ones((2, 3)), (0, -1)).shape == (1, 2, 3, 1)
    a = fg.tensor(np.array([[1, 5], [7, 3]], np.float32))
    # one axis after the other (last first): the argmax over axis 0 of the row argmaxes [1, 0]
    assert F.argmax(a, axis=(-1, -2)).item() == 0
    assert F.argmin(a, axis=-1).tolist() == [0, 1]
    vals, idx = F.sort(fg.tensor([3.0, 1.0, 2.0]), True)
    assert vals.tolist() == [3.0, 2.0, 1.0] and idx.tolist() == [0, 2, 1]
    assert F.argsort(fg.tensor([3.0, 1.0, 2.0]), descending=True).tolist() == [0, 2, 1]
    assert F.sum(a, axis=(-1, 0)).item() == 16.0
    with pytest.raises(AssertionError):
        F.sum(a, axis=(-1, 1))


def test_int_reductions_promote_to_float32():
    x = fg.tensor(np.array([1, 2, 3, 4], np.int32))
    assert F.mean(x).dtype == np.float32 and F.mean(x).item() == 2.5
    np.testing.assert_allclose(F.var(x).item(), 1.25)
    np.testing.assert_allclose(F.std(x).item(), 1.25**0.5, rtol=1e-6)


def test_cross_entropy_int32_labels():
    logits = fg.tensor(np.array([[2.0, 0.0], [0.0, 2.0]], np.float32))
    label = fg.tensor(np.array([0, 1], np.int32))
    want = np.log1p(np.exp(-2.0))
    np.testing.assert_allclose(F.nn.cross_entropy(logits, label).item(), want, rtol=1e-5)


def test_pad_megengine_widths():
    src = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    for mode in ["constant", "edge", "reflect"]:
        got = F.nn.pad(fg.tensor(src), ((1, 2), (2, 1)), mode.upper()).numpy()
        np.testing.assert_array_equal(got, np.pad(src, ((1, 2), (2, 1)), mode))
    got = F.nn.pad(fg.tensor(src), ((0, 0), (1, 1)), constant_value=7.0).numpy()
    np.testing.assert_array_equal(got, np.pad(src, ((0, 0), (1, 1)), constant_values=7.0))


def test_losses():
    pred = fg.tensor(np.array([[0.5, -2.0], [1.0, 0.0]], np.float32))
    label = fg.tensor(np.array([[1.0, -1.0], [-1.0, 1.0]], np.float32))
    # per row: relu(1 - pred * label) summed over axis 1 -> [0.5, 3.0]
    np.testing.assert_allclose(F.nn.hinge_loss(pred, label).item(), 1.75)
    np.testing.assert_allclose(F.nn.hinge_loss(pred, label, "L2").item(), (0.25 + 5.0) / 2)
    np.testing.assert_allclose(F.nn.l1_loss(pred, label).item(), (0.5 + 1 + 2 + 1) / 4)
    np.testing.assert_allclose(F.nn.square_loss(pred, label).item(), (0.25 + 1 + 4 + 1) / 4)


def test_megengine_signatures_of_nn_functions():
    x = fg.tensor(np.arange(8.0, dtype=np.float32).reshape(1, 2, 2, 2))
    y = F.layer_norm(x, (2, 2), False)
    flat = np.arange(8.0).reshape(2, 4)
    want = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.numpy().reshape(2, 4), want, rtol=1e-4)
    np.testing.assert_allclose(F.instance_norm(x, False).numpy(), y.numpy(), rtol=1e-5)
    assert F.dropout(x, 0.5, training=False) is x
    w = fg.ones((1, 2, 1, 1))
    np.testing.assert_allclose(
        F.conv2d(x, fg.ones((1, 2, 1, 1)), bias=w[:, :1]).numpy().reshape(-1), [5, 7, 9, 11]
    )
    # MegEngine's LRN: k + alpha * (window sum), alpha not divided by the window
    v = fg.tensor(np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1, 1))
    out = F.local_response_norm(v, kernel_size=3, k=1.0, alpha=0.5, beta=1.0).numpy().reshape(-1)
    sums = np.array([1 + 4, 1 + 4 + 9, 4 + 9])
    np.testing.assert_allclose(out, np.array([1.0, 2.0, 3.0]) / (1 + 0.5 * sums), rtol=1e-6)


def test_vision_flip_rot90_nms():
    img = fg.tensor(np.arange(4.0, dtype=np.float32).reshape(1, 2, 2, 1))
    np.testing.assert_array_equal(
        F.vision.flip(img, vertical=True, horizontal=False).numpy()[0, :, :, 0], [[2, 3], [0, 1]]
    )
    np.testing.assert_array_equal(F.vision.rot90(img).numpy()[0, :, :, 0], [[2, 0], [3, 1]])
    boxes = fg.tensor(np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], np.float32))
    keep = F.vision.nms(boxes, fg.tensor([0.9, 0.8, 0.7]), iou_thresh=0.5)
    assert keep.tolist() == [0, 2]


def test_module_classes():
    assert M.Dropout(drop_prob=0.3).drop_prob == 0.3
    x = fg.ones((4, 3))
    assert M.Dropout(0.5).eval()(x) is x
    inorm = M.InstanceNorm(2, affine=False)
    x = fg.tensor(np.arange(8.0, dtype=np.float32).reshape(1, 2, 2, 2))
    np.testing.assert_allclose(inorm(x).numpy(), F.instance_norm(x, False).numpy())
    e = M.Elemwise("fuse_add_relu")
    assert e(fg.tensor([-3.0, 1.0]), fg.tensor([1.0, 1.0])).tolist() == [0.0, 2.0]
    p = M.PReLU(2)
    assert p.weight.shape == (1, 2, 1, 1)
    assert M.LayerNorm(4, affine=False).weight is None


def test_module_init():
    w = fg.zeros((2, 3))
    M.init.fill_(w, 5.0)
    np.testing.assert_array_equal(w.numpy(), np.full((2, 3), 5.0))
    assert M.init.calculate_fan_in_and_fan_out(fg.zeros((8, 3))) == (3, 8)
    assert M.init.calculate_fan_in_and_fan_out(fg.zeros((3, 2, 5, 7))) == (70, 105)
    assert M.init.calculate_correct_fan(fg.zeros((3, 2, 5)), "fan_out") == 15
    with pytest.raises(ValueError):
        M.init.calculate_fan_in_and_fan_out(fg.zeros((3,)))


def test_optimizer_clip_and_multistep():
    a = fg.nn.Parameter(fg.tensor([3.0, 4.0]))
    a.grad = fg.tensor([3.0, 4.0])
    norm = O.clip_grad_norm([a], max_norm=1.0)
    assert abs(norm.item() - 5.0) < 1e-6
    np.testing.assert_allclose(a.grad.numpy(), np.array([3.0, 4.0]) / (5.0 + 1e-6), rtol=1e-6)
    a.grad = fg.tensor([-3.0, 4.0])
    O.clip_grad_value(a, lower=-1.0, upper=2.0)
    assert a.grad.tolist() == [-1.0, 2.0]
    opt = O.SGD([a], lr=0.1)
    sched = O.MultiStepLR(opt, [2, 4], gamma=0.5)
    lrs = []
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    np.testing.assert_allclose(lrs, [0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    assert issubclass(O.MultiStepLR, O.LRScheduler)


def test_megengine_random_functions_are_seeded_and_shaped():
    from ferrograd import random as R

    R.seed(3)
    a = R.normal(1.0, 2.0, (2000,))
    R.seed(3)
    b = R.normal(1.0, 2.0, (2000,))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.dtype.name == "float32"
    assert abs(float(a.mean()) - 1.0) < 0.2 and abs(float(a.std()) - 2.0) < 0.2
    u = R.uniform(2.0, 3.0, (500,)).numpy()
    assert u.min() >= 2.0 and u.max() < 3.0
    assert R.gamma(2.0, 1.0, (3,)).shape == (3,) and R.beta(2.0, 3.0, (2,)).shape == (2,)
    assert sorted(R.permutation(5).numpy().tolist()) == [0, 1, 2, 3, 4]
    x = fg.arange(6.0).reshape(3, 2)
    R.shuffle(x)
    assert sorted(x.numpy()[:, 0].tolist()) == [0.0, 2.0, 4.0]
    assert isinstance(R.seed(), int)  # PyTorch's torch.random.seed(): a fresh seed


def test_grad_manager_backward_broadcasts_dy_and_takes_a_number():
    x = fg.tensor([1.0, -2.0, 3.0])
    gm = fg.GradManager().attach(x)
    with gm:
        gm.backward(F.relu(x), fg.tensor([3.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 3.0])
    x.grad = None
    with gm:
        gm.backward(x * 2, 0.5)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 1.0])
