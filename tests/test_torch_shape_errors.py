"""The exception classes of shape, dim and argument errors match PyTorch's, so that
``except RuntimeError`` / ``assertRaises(RuntimeError)`` (and ``IndexError``, ``TypeError``)
catch what ferrograd raises. Each case runs on torch and on ferrograd: both must raise the
class torch raises. ferrograd's errors stay ``ValueError`` / ``TypeError`` subclasses too
(``ShapeError``, ``DTypeError``), so older code that catches those still does."""

import ferrograd as fg
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _x(lib):
    return lib.zeros(5, 6, 7, 8)


# (name, function of the library, the class torch raises)
CASES = [
    ("chunk_zero", lambda L: L.zeros(4, 7).chunk(0), RuntimeError),
    ("flatten_start_after_end", lambda L: L.zeros(5, 5, 5, 5).flatten(2, 0), RuntimeError),
    ("expand_new_leading_minus_one", lambda L: L.zeros(5).expand(-1, -1), RuntimeError),
    ("unfold_negative_size", lambda L: L.arange(1.0, 8).unfold(0, -1, 1), RuntimeError),
    ("unfold_negative_step", lambda L: L.arange(1.0, 8).unfold(0, 1, -1), RuntimeError),
    ("tensor_split_zero_sections", lambda L: L.tensor_split(L.zeros(10), 0), RuntimeError),
    ("tensor_split_0d_input", lambda L: L.tensor_split(L.tensor(1.0), 10), RuntimeError),
    (
        "tensor_split_float_tensor",
        lambda L: L.tensor_split(L.zeros(10), L.tensor(1.1)),
        RuntimeError,
    ),
    (
        "tensor_split_2d_indices",
        lambda L: L.tensor_split(L.zeros(10), L.zeros(2, 2, dtype=L.int64)),
        RuntimeError,
    ),
    ("mT_of_1d", lambda L: L.zeros(2).mT, RuntimeError),
    ("mH_of_1d", lambda L: L.zeros(2).mH, RuntimeError),
    ("H_of_1d", lambda L: L.zeros(2).H, RuntimeError),
    ("H_of_3d", lambda L: L.zeros(2, 3, 4).H, RuntimeError),
    ("t_of_3d", lambda L: L.zeros(2, 2, 2).t(), RuntimeError),
    ("adjoint_of_1d", lambda L: L.zeros(2).adjoint(), RuntimeError),
    ("movedim_repeated_destination", lambda L: L.movedim(_x(L), (0, 1), (1, 1)), RuntimeError),
    ("movedim_repeated_source", lambda L: L.movedim(_x(L), (0, 0), (0, 1)), RuntimeError),
    ("movedim_length_mismatch", lambda L: L.movedim(_x(L), (1, 0), (0,)), RuntimeError),
    ("clamp_no_bounds", lambda L: L.zeros(3).clamp(), RuntimeError),
    ("rot90_same_dims", lambda L: L.zeros(2, 2, 2).rot90(1, [1, 1]), RuntimeError),
    ("rot90_one_dim", lambda L: L.zeros(2, 2, 2).rot90(1, [1]), RuntimeError),
    ("broadcast_shapes_float", lambda L: L.broadcast_shapes(1.1), RuntimeError),
    (
        "take_along_dim_float_index",
        lambda L: L.take_along_dim(L.zeros(2, 3), L.zeros(2, 3), dim=0),
        RuntimeError,
    ),
    (
        "index_fill_complex_value",
        lambda L: L.zeros(2, 2).index_fill_(1, L.tensor([0]), 1 + 1j),
        RuntimeError,
    ),
    ("del_item", lambda L: L.zeros(3).__delitem__(0), TypeError),
    ("argmax_of_empty", lambda L: L.zeros(0).argmax(), IndexError),
    ("max_over_empty_dim", lambda L: L.zeros(0, 3).max(0), IndexError),
    ("median_over_empty_dim", lambda L: L.zeros(0, 3).median(0), IndexError),
    ("nanmedian_over_empty_dim", lambda L: L.zeros(0, 3).nanmedian(0), IndexError),
    ("mode_over_empty_dim", lambda L: L.zeros(0, 3).mode(0), IndexError),
    ("narrow_out_of_range", lambda L: L.zeros(3).narrow(0, 2, 5), RuntimeError),
    ("flip_repeated_dim", lambda L: L.zeros(2, 2).flip(0, 1, 1), RuntimeError),
    ("sum_repeated_dim", lambda L: L.zeros(2, 2).sum((0, 0)), RuntimeError),
    ("zeros_negative_size", lambda L: L.zeros(-1), RuntimeError),
    ("tile_negative", lambda L: L.zeros(2, 2).tile(-1), RuntimeError),
    ("trace_of_bool", lambda L: L.eye(3).bool().trace(), NotImplementedError),
    (
        "index_copy_negative_index",
        lambda L: L.zeros(5).index_copy_(0, L.tensor([-1]), L.ones(1)),
        IndexError,
    ),
    (
        "index_copy_index_too_big",
        lambda L: L.zeros(5).index_copy(0, L.tensor([5]), L.ones(1)),
        IndexError,
    ),
    # the sweep of shape / argument checks (torch raises RuntimeError for each)
    ("arange_zero_step", lambda L: L.arange(0, 1, 0), RuntimeError),
    ("arange_against_step", lambda L: L.arange(0, 1, -1), RuntimeError),
    ("linspace_negative_steps", lambda L: L.linspace(0, 1, -1), RuntimeError),
    ("eye_negative", lambda L: L.eye(-1), RuntimeError),
    ("randint_empty_range", lambda L: L.randint(5, 3, (2,)), RuntimeError),
    ("randperm_negative", lambda L: L.randperm(-1), RuntimeError),
    ("split_sizes_do_not_sum", lambda L: L.split(L.zeros(4, 3), [1, 1], 0), RuntimeError),
    ("repeat_too_few", lambda L: L.zeros(4, 3).repeat(2), RuntimeError),
    ("roll_shifts_dims_mismatch", lambda L: L.roll(L.zeros(4, 3), (1, 2), (0,)), RuntimeError),
    ("topk_k_too_big", lambda L: L.zeros(4, 3).topk(5), RuntimeError),
    ("einsum_too_few_operands", lambda L: L.einsum("ij,jk", L.zeros(2, 2)), RuntimeError),
    ("einsum_repeated_output", lambda L: L.einsum("ij->ii", L.zeros(2, 2)), RuntimeError),
    ("meshgrid_bad_indexing", lambda L: L.meshgrid(L.zeros(2), indexing="ab"), RuntimeError),
    ("div_bad_rounding_mode", lambda L: L.div(L.ones(2), 1, rounding_mode="x"), RuntimeError),
    ("quantile_q_out_of_range", lambda L: L.quantile(L.zeros(3), 2.0), RuntimeError),
    (
        "nanquantile_bad_interpolation",
        lambda L: L.nanquantile(L.zeros(3), 0.5, interpolation="x"),
        RuntimeError,
    ),
    ("diff_negative_n", lambda L: L.diff(L.zeros(3), n=-1), RuntimeError),
    (
        "tensordot_dims_too_big",
        lambda L: L.tensordot(L.zeros(2, 2), L.zeros(2, 2), dims=5),
        RuntimeError,
    ),
    (
        "searchsorted_bad_side",
        lambda L: L.searchsorted(L.zeros(3), L.zeros(2), side="x"),
        RuntimeError,
    ),
    ("bincount_negative", lambda L: L.bincount(L.tensor([-1])), RuntimeError),
    ("histc_zero_bins", lambda L: L.histc(L.zeros(3), bins=0), RuntimeError),
    ("polygamma_negative_n", lambda L: L.polygamma(-1, L.zeros(2)), RuntimeError),
    ("diag_embed_same_dims", lambda L: L.diag_embed(L.zeros(2, 2), 0, 1, 1), RuntimeError),
    ("hsplit_uneven", lambda L: L.hsplit(L.zeros(4, 3), 2), RuntimeError),
    ("vander_negative_n", lambda L: L.vander(L.zeros(3), N=-1), RuntimeError),
    ("combinations_negative_r", lambda L: L.combinations(L.zeros(3), r=-1), RuntimeError),
    ("repeat_interleave_negative", lambda L: L.repeat_interleave(L.tensor([-1])), RuntimeError),
    ("logspace_negative_steps", lambda L: L.logspace(0, 1, -1), RuntimeError),
    (
        "scatter_reduce_bad_reduce",
        lambda L: L.zeros(2).scatter_reduce(0, L.tensor([0]), L.ones(1), "x"),
        RuntimeError,
    ),
    ("hann_window_negative", lambda L: L.hann_window(-1), RuntimeError),
    ("eigh_bad_uplo", lambda L: L.linalg.eigh(L.eye(2), UPLO="x"), RuntimeError),
    ("multi_dot_one_tensor", lambda L: L.linalg.multi_dot([L.eye(2)]), RuntimeError),
    ("matrix_norm_same_dims", lambda L: L.linalg.matrix_norm(L.eye(2), dim=(0, 0)), RuntimeError),
    (
        "index_reduce_sum",
        lambda L: L.ones(3, 2).index_reduce(0, L.tensor([0, 2]), L.ones(2, 2), "sum"),
        RuntimeError,
    ),
    (
        "index_reduce_count_mismatch",
        lambda L: L.ones(3, 2).index_reduce(0, L.tensor([0, 1]), L.ones(3, 2), "prod"),
        RuntimeError,
    ),
    (
        "index_reduce_out_of_range",
        lambda L: L.ones(3, 2).index_reduce(0, L.tensor([0, 3]), L.ones(2, 2), "prod"),
        IndexError,
    ),
    ("imag_of_real", lambda L: L.zeros(2).imag, TypeError),
    ("view_dtype_uneven_last_dim", lambda L: L.zeros(3).view(L.float64), RuntimeError),
    ("view_dtype_0d_other_size", lambda L: L.tensor(1.0).view(L.float64), RuntimeError),
    ("view_dtype_strided_last_dim", lambda L: L.zeros(4, 2).t().view(L.int8), RuntimeError),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name, fn, cls", CASES, ids=[c[0] for c in CASES])
def test_raises_torch_class(torch, name, fn, cls):
    with pytest.raises(cls):
        fn(torch)
    with pytest.raises(cls):
        fn(fg)


# ferrograd's older classes still catch the new errors
OLD_CLASSES = [
    ("chunk_zero", lambda: fg.zeros(4, 7).chunk(0), ValueError),
    ("tensor_split_zero_sections", lambda: fg.tensor_split(fg.zeros(10), 0), ValueError),
    ("mT_of_1d", lambda: fg.zeros(2).mT, ValueError),
    ("movedim_length_mismatch", lambda: fg.movedim(_x(fg), (1, 0), (0,)), ValueError),
    ("clamp_no_bounds", lambda: fg.zeros(3).clamp(), ValueError),
    ("rot90_same_dims", lambda: fg.zeros(2, 2, 2).rot90(1, [1, 1]), ValueError),
    ("broadcast_shapes_float", lambda: fg.broadcast_shapes(1.1), TypeError),
    (
        "take_along_dim_float_index",
        lambda: fg.take_along_dim(fg.zeros(2, 3), fg.zeros(2, 3), dim=0),
        TypeError,
    ),
    (
        "index_fill_complex_value",
        lambda: fg.zeros(2, 2).index_fill_(1, fg.tensor([0]), 1 + 1j),
        TypeError,
    ),
    ("argmax_of_empty", lambda: fg.zeros(0).argmax(), ValueError),
    ("median_over_empty_dim", lambda: fg.zeros(0, 3).median(0), ValueError),
    ("narrow_out_of_range", lambda: fg.zeros(3).narrow(0, 2, 5), IndexError),
    ("arange_zero_step", lambda: fg.arange(0, 1, 0), ValueError),
    ("tensor_split_float_tensor", lambda: fg.tensor_split(fg.zeros(10), fg.tensor(1.1)), TypeError),
]


@pytest.mark.parametrize("name, fn, cls", OLD_CLASSES, ids=[c[0] for c in OLD_CLASSES])
def test_older_classes_still_catch(name, fn, cls):
    with pytest.raises(cls):
        fn()


def test_dual_classes():
    from ferrograd.nn._errors import IndexRuntimeError, IndexValueError

    assert issubclass(fg.ShapeError, ValueError) and issubclass(fg.ShapeError, RuntimeError)
    assert issubclass(fg.DTypeError, TypeError) and issubclass(fg.DTypeError, RuntimeError)
    assert issubclass(IndexRuntimeError, IndexError) and issubclass(IndexRuntimeError, RuntimeError)
    for base in (IndexError, ValueError, RuntimeError, fg.ShapeError):
        assert issubclass(IndexValueError, base)


def test_movedim_valid_still_works(torch):
    a = np.arange(5 * 6 * 7 * 8, dtype=np.float64).reshape(5, 6, 7, 8)
    for src, dst in [((0, 1), (2, 3)), ((3, 0), (0, 1)), (-1, 0), ((1,), (-1,))]:
        t = torch.movedim(torch.tensor(a), src, dst)
        f = fg.movedim(fg.tensor(a), src, dst)
        assert tuple(f.shape) == tuple(t.shape)
        np.testing.assert_array_equal(f.numpy(), t.numpy())
