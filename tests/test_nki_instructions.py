"""NKI instructions beyond the tutorials' (statistics, top-8 search, scalar_tensor_tensor, partition
reductions, affine_select), each against torch."""
from __future__ import annotations

import pytest
import torch

import nki_bad_kernels as bad  # noqa: E402
import nki_dma_kernels as dma  # noqa: E402
import nki_kernels as k  # noqa: E402
import nki.language as nl  # noqa: E402
from torch_neuronx.nki import NkiError

ALL_ONES = 0xFFFFFFFF


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_mod_takes_the_divisors_sign_and_fmod_the_dividends(dtype):
    """np.mod, np.remainder and nl.mod are floor remainders (b's sign, as numpy.mod and Python's %), np.fmod
    and nl.fmod truncated ones (a's sign, as C's fmod): operands of mixed signs tell them apart."""
    import numpy as np
    g = torch.Generator().manual_seed(5)
    a = torch.rand(128, 64, generator=g) * 40 - 20
    b = torch.rand(128, 64, generator=g) * 10 - 5
    if dtype == torch.int32:
        a, b = a.round(), b.round()
    b[b.abs() < 1] = 3.0
    a, b = a.to(dtype), b.to(dtype)
    floor, truncated = torch.remainder(a, b), torch.fmod(a, b)
    assert not torch.equal(floor, truncated)
    for op in (np.mod, np.remainder, nl.mod):
        torch.testing.assert_close(k.tensor_tensor_op(neuron(a), neuron(b), op).cpu(), floor, rtol=0, atol=1e-5)
    for op in (np.fmod, nl.fmod):
        torch.testing.assert_close(k.tensor_tensor_op(neuron(a), neuron(b), op).cpu(), truncated, rtol=0,
                                   atol=1e-5)
    both = k.remainders_beta(neuron(a), neuron(b)).cpu()
    torch.testing.assert_close(both[0], floor, rtol=0, atol=1e-5)
    torch.testing.assert_close(both[1], truncated, rtol=0, atol=1e-5)


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


@pytest.mark.parametrize("cols", [7, 512, 1300])
def test_bn_stats_and_bn_aggr_give_mean_and_population_variance(cols):
    torch.manual_seed(cols)
    x = torch.randn(96, cols) * 3 + 1.5
    out = k.mean_and_variance(neuron(x)).cpu()
    torch.testing.assert_close(out[:, 0], x.mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[:, 1], x.var(1, unbiased=False), rtol=1e-5, atol=1e-5)


def test_bn_stats_splits_even_and_odd_elements():
    x = torch.tensor([[1.0, 10.0, 3.0, 20.0, 5.0], [2.0, 4.0, 2.0, 4.0, 2.0]])  # even: 1, 3, 5; odd: 10, 20
    stats = k.bn_stats_raw(neuron(x)).cpu()
    # (count, mean, variance * count) of the even-indexed elements, then of the odd-indexed ones.
    assert stats.tolist() == [[3.0, 3.0, 8.0, 2.0, 15.0, 50.0], [3.0, 2.0, 0.0, 2.0, 4.0, 0.0]]
    out = k.mean_and_variance(neuron(x)).cpu()
    torch.testing.assert_close(out, torch.stack([x.mean(1), x.var(1, unbiased=False)], 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max8_and_find_index8_are_topk(dtype):
    torch.manual_seed(3)
    # Distinct integers in each row, exact in bf16 as in fp32: no ties for the order to depend on.
    x = torch.stack([torch.randperm(100) for _ in range(128)]).to(torch.float32).sub(50).to(dtype)
    values, indices = k.top8(neuron(x))
    expected = torch.topk(x.float(), 8, dim=1)
    assert torch.equal(values.cpu().float(), expected.values)
    assert indices.dtype == torch.uint32
    assert torch.equal(indices.cpu().to(torch.int64), expected.indices)


def test_beta_api_top8():
    x = torch.randn(16, 40)
    values, indices = k.top8_beta(neuron(x))
    expected = torch.topk(x, 8, dim=1)
    assert torch.equal(values.cpu(), expected.values)
    assert torch.equal(indices.cpu().to(torch.int64), expected.indices)


def test_find_index8_repeated_and_missing_values():
    data = torch.tensor([[5.0, 7.0, 5.0, 1.0, 5.0, 2.0, 3.0, 4.0, 9.0]])
    vals = torch.tensor([[5.0, 5.0, 7.0, 5.0, 5.0, 42.0, 9.0, 1.0]])
    out = k.find_index8(neuron(data), neuron(vals)).cpu().to(torch.int64)
    # Repeats of 5 take its successive occurrences (0, 2, 4), a fourth finds none; 42 is not there.
    assert out.tolist() == [[0, 2, 1, 4, ALL_ONES, ALL_ONES, 8, 3]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max8_and_match_replace8_find_the_top_24(dtype):
    torch.manual_seed(5)
    x = torch.stack([torch.randperm(300) for _ in range(128)]).to(torch.float32).sub(150).to(dtype)
    values, indices = k.top_k_rounds(neuron(x), 3)
    expected = torch.topk(x.float(), 24, dim=1)
    assert torch.equal(values.cpu().float(), expected.values)
    assert torch.equal(indices.cpu().to(torch.int64), expected.indices)


def test_match_replace8_pairs_repeated_values_from_the_last():
    # AWS's example: vals are taken from the last to the first, so the first 8 goes to the highest slot.
    data = torch.tensor([[1.0, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8], [5, 6, 7, 5, 6, 7, 5, 6, 7, 0, 0]])
    vals = torch.tensor([[3.0, 8, 8, 8, 8, 8, 8, 8], [5, 5, 5, 6, 7, 7, 0, 42]])
    replaced, indices = k.match_replace8(neuron(data), neuron(vals), -1.0)
    assert indices.cpu().to(torch.int64).tolist() == [[2, 10, 9, 8, 7, 6, 5, 4], [6, 3, 0, 1, 5, 2, 9, ALL_ONES]]
    expected = data.clone()
    expected[0, [2, 4, 5, 6, 7, 8, 9, 10]] = -1
    expected[1, [0, 3, 6, 1, 2, 5, 9]] = -1
    assert torch.equal(replaced.cpu(), expected)
    beta = k.match_replace8_beta(neuron(data), neuron(vals)).cpu()
    assert torch.equal(beta, torch.where(expected == -1, torch.zeros(()), data))


@pytest.mark.parametrize("predicate_dtype", [torch.uint8, torch.int16])
def test_select_reduce_against_torch_where(predicate_dtype):
    torch.manual_seed(6)
    x = torch.randn(128, 40)
    keep = (torch.rand(128, 40) > 0.5).to(predicate_dtype)
    keep[7] = 0  # a row of nothing but the fill value
    picked, best = k.select_reduce_number(neuron(x), neuron(keep))
    expected = torch.where(keep != 0, x, torch.tensor(-100.0))
    assert torch.equal(picked.cpu(), expected)
    assert torch.equal(best.cpu(), expected.amax(1, keepdim=True))
    fill = torch.randn(128, 1)
    beta = k.select_reduce_row_fill(neuron(x), neuron(keep), neuron(fill)).cpu()
    assert torch.equal(beta, torch.where(keep == 0, x, fill.expand(128, 40)))


def test_range_select_against_torch_where():
    torch.manual_seed(7)
    x = torch.randn(128, 48)
    low = torch.randint(0, 40, (128, 1)).float()
    high = low + torch.randint(0, 12, (128, 1)).float()  # an empty band where high == low
    picked, best = k.band_of_columns(neuron(x), neuron(low), neuron(high))
    index = torch.arange(48).float() + 4
    expected = torch.where((index >= low) & (index < high), x, torch.tensor(-30000.0))
    assert torch.equal(picked.cpu(), expected)
    assert torch.equal(best.cpu(), expected.amax(1, keepdim=True))
    row_end = torch.arange(128).float().remainder(48).unsqueeze(1)
    causal = k.causal_row_beta(neuron(x), neuron(row_end)).cpu()
    lowest = torch.finfo(torch.float32).min
    assert torch.equal(causal, torch.where(torch.arange(48).float() <= row_end, x, torch.tensor(lowest)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("offset, padding", [(0, -1), (1000, 99)])
def test_nonzero_with_count_on_each_gpsimd_cores_partition(dtype, offset, padding):
    torch.manual_seed(9)
    x = (torch.randn(128, 3, 40) * (torch.rand(128, 3, 40) > 0.6)).to(dtype)
    x[16] = 0  # nothing found: all padding, count 0
    x[32] = 1  # everything found
    x[48, 0, 5] = float("nan") if dtype == torch.float32 else 3  # NaN is nonzero
    x[64, 1] = -0.0  # and -0.0 is zero
    got = k.nonzero_positions(neuron(x), offset, padding).cpu()
    for p in range(128):
        if p % 16:
            assert torch.equal(got[p], torch.full((121,), 7, dtype=torch.int32)), p
            continue
        positions = torch.nonzero(x[p].reshape(-1) != 0).flatten().to(torch.int32) + offset
        expected = torch.full((121,), padding, dtype=torch.int32)
        expected[:positions.numel()] = positions
        expected[-1] = positions.numel()
        assert torch.equal(got[p], expected), p


def _segment_bounds_by_hand(ids: list) -> list:
    """[starts, ends] of each id's run of equal ids, ends one past; id 0 (padding): len(ids) and -1."""
    n, starts, ends = len(ids), [], []
    for i, value in enumerate(ids):
        if value == 0:
            starts.append(n), ends.append(-1)
            continue
        first, last = i, i
        while first > 0 and ids[first - 1] == value:
            first -= 1
        while last + 1 < n and ids[last + 1] == value:
            last += 1
        starts.append(first), ends.append(last + 1)
    return [starts, ends]


@pytest.mark.parametrize("ids_dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("out_dtype", [nl.float32, nl.int32])
def test_sequence_bounds_finds_each_segments_first_and_one_past_its_last(ids_dtype, out_dtype):
    # Runs of ids, padding (0) at both ends and in the middle, a run of one, a repeated id after another
    # (5, 7, 5: two segments), and a run that reaches the end.
    ids = [0, 0, 3, 3, 3, 1, 0, 5, 7, 5, 5, 2, 2, 2, 2, 9]
    got = k.segment_bounds(neuron(torch.tensor([ids], dtype=ids_dtype)), out_dtype).cpu()
    assert got.dtype == (torch.float32 if out_dtype == nl.float32 else torch.int32)
    assert got[0].tolist() == _segment_bounds_by_hand(ids)
    torch.manual_seed(12)  # longer: sorted random ids with zeros, as packed sequences are laid out
    many = torch.sort(torch.randint(0, 40, (1, 512))).values.to(ids_dtype)
    got = k.segment_bounds(neuron(many), out_dtype).cpu()
    assert got[0].tolist() == _segment_bounds_by_hand(many[0].tolist())
    beta = k.segment_bounds_beta(neuron(torch.tensor([ids], dtype=ids_dtype))).cpu()
    assert beta.dtype == ids_dtype and beta[0].tolist() == _segment_bounds_by_hand(ids)


def _local_gather_by_hand(data: torch.Tensor, index: torch.Tensor, per_index: int, valid: int) -> torch.Tensor:
    """AWS's description of local_gather: per core of 16 partitions, its indices partition first, each
    partition gathering runs of `per_index` elements of its own data."""
    partitions = data.shape[0]
    flat = data.reshape(partitions, -1)
    out = torch.empty(partitions, valid * per_index, dtype=data.dtype)
    for first in range(0, partitions, 16):
        core_indices = index[first:first + 16].reshape(16, -1).t().reshape(-1)[:valid]
        for p in range(first, first + 16):
            runs = [flat[p, int(i) * per_index:(int(i) + 1) * per_index] for i in core_indices]
            out[p] = torch.cat(runs)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("per_index, valid", [(1, None), (4, 50), (32, 3)])
def test_local_gather_gathers_within_each_gpsimd_core(dtype, per_index, valid):
    torch.manual_seed(per_index)
    data = (torch.randn(48, 40, 32) * 100).to(dtype)  # three cores; 1280 elements per partition
    runs = data[0].numel() // per_index
    index = torch.randint(0, runs, (48, 5), dtype=torch.int32)
    index[16:32] = torch.arange(16 * 5).reshape(5, 16).t() % runs  # a core whose indices count up
    got = k.gather_locally(neuron(data), neuron(index.to(torch.uint16)), per_index, valid).cpu()
    expected = _local_gather_by_hand(data, index, per_index, 80 if valid is None else valid)
    assert got.dtype == dtype and torch.equal(got, expected)
    beta = k.gather_locally_beta(neuron(data), neuron(index.to(torch.uint16)), per_index, valid).cpu()
    assert torch.equal(beta.reshape(expected.shape), expected)


def test_local_gather_costs_what_aws_estimates():
    from torch_neuronx.nki import cost_model
    from torch_neuronx.nki.kernel import PROGRAMS

    data, index = torch.randn(16, 64), torch.zeros(16, 2, dtype=torch.uint16)
    k.gather_locally(neuron(data), neuron(index), 4, 30)
    program = next(p for p in reversed(PROGRAMS) if p.encoded["kernel"] == "gather_locally")
    predicted = cost_model.predict(program.encoded, 3)
    # By hand, AWS's formula: 150 + 30 x 4 / C cycles, C = ((28 + 4 x 4) / (4 x 4)) / min(4 / 4, 4) = 2.75,
    # on the GpSimd engine's 1.2 GHz (NeuronCore-v3).
    assert predicted.instructions["gpsimd"] == 1
    assert predicted.busy_seconds["gpsimd"] == pytest.approx((150 + 120 / 2.75) / 1.2e9, rel=1e-9)


def test_local_gather_past_a_partitions_data_is_an_error():
    data = torch.randn(16, 12)
    index = torch.zeros(16, 1, dtype=torch.uint16)
    index[3, 0] = 3  # elements 12-15 of 12: past the data (undefined on the hardware)
    with pytest.raises(IndexError, match="local_gather: index 3 \\(index 3 of the core of partitions 0-15\\) reads "
                                         "elements 12-15, past the 12 of partition 0's data"):
        k.gather_locally(neuron(data), neuron(index), 4, None)


def test_nc_stream_shuffle_moves_partitions_within_each_quadrant():
    torch.manual_seed(10)
    x = torch.randn(128, 24)
    shuffle_mask = [31 - i for i in range(16)] + [255] * 8 + [0] * 8  # reversed, kept, one partition spread
    expected = x.clone()
    for q in range(4):
        for i, source in enumerate(shuffle_mask):
            if source != 255:
                expected[32 * q + i] = x[32 * q + source]
    assert torch.equal(k.shuffle_partitions(neuron(x), shuffle_mask).cpu(), expected)  # in place
    ints = torch.randint(-2**31, 2**31 - 1, (64, 5), dtype=torch.int32)  # moved as bits, not through fp32
    zeros = torch.zeros_like(ints)
    beta = k.shuffle_into_zeros_beta(neuron(ints), shuffle_mask).cpu()
    for q in range(2):
        for i, source in enumerate(shuffle_mask):
            want = ints[32 * q + source] if source != 255 else zeros[32 * q + i]
            assert torch.equal(beta[32 * q + i], want)


def test_column_nonzeros_through_transpose_nonzero_with_count_and_shuffle():
    torch.manual_seed(11)
    x = torch.randn(128, 8) * (torch.rand(128, 8) > torch.linspace(0.05, 0.95, 8))  # denser to sparser columns
    x[:, 3] = 0
    got = k.column_nonzeros(neuron(x)).cpu()
    for c in range(8):
        rows = torch.nonzero(x[:, c]).flatten().to(torch.int32)
        expected = torch.full((129,), -1, dtype=torch.int32)
        expected[:rows.numel()] = rows
        expected[-1] = rows.numel()
        assert torch.equal(got[c], expected), c


@pytest.mark.parametrize("dtype, bits", [(torch.float32, torch.int32), (torch.bfloat16, torch.int16),
                                         (torch.int32, torch.int32)])
def test_nc_n_gather_within_each_partition(dtype, bits):
    torch.manual_seed(13)
    # Random bit patterns, NaN payloads included: the instruction moves elements, it does not convert them.
    raw = torch.randint(torch.iinfo(bits).min, torch.iinfo(bits).max, (128, 4, 50), dtype=bits)
    data = raw.view(dtype)
    indices = torch.randint(0, 200, (128, 30), dtype=torch.int64)
    got = k.gather_in_partitions(neuron(data), neuron(indices.to(torch.uint32))).cpu()
    assert got.dtype == dtype
    assert torch.equal(got.view(bits), raw.reshape(128, -1).gather(1, indices))  # gathered as integers
    indices[5, 7] = 200  # one past the partition's data
    with pytest.raises(IndexError, match="nc_n_gather: index 200 \\(partition 5, position 7\\) is past the 200"):
        k.gather_in_partitions(neuron(data), neuron(indices.to(torch.uint32)))


def test_tensor_scalar_cumulative_against_a_python_loop():
    torch.manual_seed(8)
    x = torch.randn(128, 24)
    for op0, imm0, op1 in [(nl.multiply, 0.5, nl.add), (nl.add, 1.0, nl.maximum), (nl.subtract, 0.25, nl.subtract),
                           (nl.add, 0.0, nl.multiply)]:
        got = k.cumulative(neuron(x), op0, imm0, op1, 3).cpu()
        # AWS's pseudocode: reg = op1(op0(src[i], imm0), reg), carried across the three blocks
        step = {"multiply": lambda a, b: a * b, "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
                "maximum": torch.maximum}
        reg = torch.full((128,), {"add": 0.0, "maximum": float("-inf"), "subtract": 0.0, "multiply": 1.0}[op1.__name__])
        expected = torch.empty_like(x)
        for i in range(24):
            reg = step[op1.__name__](step[op0.__name__](x[:, i], torch.tensor(imm0)), reg)
            expected[:, i] = reg
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k.cumulative_from(neuron(x), 3.0).cpu(), 3.0 + torch.cumsum(2 * x, 1), rtol=1e-5,
                               atol=1e-5)


def test_scalar_tensor_tensor_both_ways_round():
    torch.manual_seed(4)
    x, residual, shift = torch.randn(128, 64), torch.randn(128, 64), torch.randn(128, 1)
    first, second = k.scaled_residual(neuron(x), neuron(residual), neuron(shift))
    torch.testing.assert_close(first.cpu(), x * 0.5 + residual, rtol=0, atol=0)
    torch.testing.assert_close(second.cpu(), (shift - x) - residual, rtol=0, atol=0)


@pytest.mark.parametrize("kernel, shape, message", [
    (bad.bn_stats_too_wide, (128, 600), "reads 600 elements per partition; it takes 1 to 512"),
    (bad.find_index8_into_floats, (128, 16), "dst must be uint32 or uint16"),
    (bad.match_replace8_with_four_vals, (128, 16), "vals holds 8 values per partition, not 4"),
    (bad.select_reduce_with_a_uint32_predicate, (128, 16), "it must be int8, uint8, int16 or uint16"),
    (bad.range_select_with_an_add, (128, 16), "must be comparisons"),
    (bad.nonzero_with_count_into_floats, (128, 16), "dst must be int32, not float32"),
    (bad.nonzero_with_count_without_the_count_slot, (128, 16), "one more element per partition than src"),
    (bad.nonzero_with_count_from_partition_8, (128, 16), "starts at partition 8"),
    (bad.sequence_bounds_over_two_partitions, (4, 16), "must span one partition, not 2 and 2"),
    (bad.sequence_bounds_without_the_ends, (4, 16), r"a start and an end per segment id \(32 elements\), not 16"),
    (bad.local_gather_with_int32_indices, (32, 16), "the indices must be uint16, not int32"),
    (bad.local_gather_three_elements_per_index, (32, 16), r"num_elem_per_idx must be one of \(1, 2, 4, 8, 16, 32\)"),
    (bad.local_gather_over_eight_partitions, (32, 16), "a multiple of 16 .one GpSimd core each., not 8, 8 and 8"),
    (bad.local_gather_into_a_short_dst, (32, 16), r"dst holds 32 elements per partition for 32 indices of 2"),
    (bad.shuffle_from_past_the_tile, (16, 4), "would copy src partition 20; src has 16"),
    (bad.shuffle_with_a_short_mask, (32, 4), "must be 32 partition numbers"),
    (bad.shuffle_into_another_dtype, (32, 4), "must have one dtype"),
    (bad.gather_with_int32_indices, (128, 16), "the indices must be uint32, not int32"),
    (bad.cumulative_division, (128, 16), "accumulates with add, subtract, multiply, maximum or minimum, not divide"),
    (bad.partition_reduce_into_two_partitions, (128, 16), "dst must be one partition with the data's free shape"),
    (bad.affine_select_from_psum, (128, 16), "reads and writes SBUF only"),
])
def test_instruction_limits(kernel, shape, message):
    with pytest.raises(NkiError, match=message):
        kernel(neuron(torch.randn(*shape)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("partitions", [128, 37])
def test_tensor_partition_reduce_sums_and_maxima_over_partitions(dtype, partitions):
    torch.manual_seed(partitions)
    # Quarter-integers: every partial sum exact in fp32 whatever the order, and each value exact in bf16.
    x = (torch.randint(-40, 40, (partitions, 96)).float() / 4).to(dtype)
    out = k.partition_sum_and_max(neuron(x)).cpu()
    assert out.dtype == dtype and out.shape == (2, 96)
    assert torch.equal(out[0].float(), x.float().sum(0).to(dtype).float())
    assert torch.equal(out[1], x.max(0).values)


def test_beta_api_tensor_partition_reduce():
    x = torch.randn(64, 10)
    torch.testing.assert_close(k.partition_sum_beta(neuron(x)).cpu(), x.sum(0, keepdim=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_affine_select_is_a_causal_mask(dtype):
    x = torch.randn(96, 130).to(dtype)
    keep = torch.arange(96)[:, None] >= torch.arange(130)[None, :]
    expected = torch.where(keep, x, torch.tensor(-9984.0, dtype=dtype))
    assert torch.equal(k.causal_mask(neuron(x)).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_beta_affine_select_takes_a_predicate(dtype):
    """The beta API's affine_select(pred, on_true_tile, on_false_value): the predicate a comparison of index
    expressions (a causal mask; several variables over an mgrid), against torch.where."""
    x = torch.randn(96, 130).to(dtype)
    keep = torch.arange(130)[None, :] <= torch.arange(96)[:, None]
    assert torch.equal(k.causal_mask_beta(neuron(x)).cpu(), torch.where(keep, x, torch.tensor(-9984.0, dtype=dtype)))
    y = torch.randn(40, 4, 8).to(dtype)
    p, a, b = torch.meshgrid(torch.arange(40), torch.arange(4), torch.arange(8), indexing="ij")
    for offset in (0, -7):
        keep = 2 * p - 8 * a + b + offset > 0
        assert torch.equal(k.affine_select_beta(neuron(y), offset).cpu(), torch.where(keep, y, torch.tensor(0.5, dtype=dtype)))


def test_beta_affine_select_predicate_errors():
    x = neuron(torch.randn(16, 8))
    with pytest.raises(NkiError, match="a comparison of several variables is a predicate for nisa.affine_select"):
        bad.predicate_as_mask(x)
    with pytest.raises(NkiError, match="cannot be combined with &"):
        bad.combined_predicates(x)


@pytest.mark.parametrize("offset, multiplier", [(0, 0), (-10, 2), (5, -1)])
def test_affine_select_over_two_free_axes(offset, multiplier):
    x = torch.randn(40, 4, 8)
    p, a, b = torch.meshgrid(torch.arange(40), torch.arange(4), torch.arange(8), indexing="ij")
    keep = offset + p * multiplier + 8 * a - b == 0
    got = k.affine_select_grid(neuron(x), offset, multiplier).cpu()
    assert torch.equal(got, torch.where(keep, x, torch.tensor(0.5)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exponential_gives_softmax_numerators_and_sums(dtype):
    """nisa.exponential (NeuronCore-v4): exp(x - row max) rounded once to dst's dtype, and the row sums of
    the rounded values through reduce_cmd, against torch in float64."""
    torch.manual_seed(0)
    x = (torch.randn(100, 300) * 4).to(dtype)
    numerators, sums = k.softmax_numerators(neuron(x))
    wide = x.double()
    expected = torch.exp(wide - wide.amax(1, keepdim=True))
    assert numerators.dtype == dtype
    torch.testing.assert_close(numerators.cpu(), expected.to(dtype), rtol=1e-5 if dtype == torch.float32 else 8e-3,
                               atol=1e-6)
    torch.testing.assert_close(sums.cpu().double(), numerators.cpu().double().sum(1, keepdim=True), rtol=1e-5,
                               atol=1e-5)


def test_exponential_load_reduce_starts_from_the_loaded_value():
    x = torch.randn(64, 40)
    got = k.exponential_sums_loaded(neuron(x), 0.5, 3.0).cpu()
    torch.testing.assert_close(got, 3.0 + torch.exp(x - 0.5).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_exponential_is_refused_before_neuroncore_v4():
    with pytest.raises(NkiError, match="NeuronCore-v4 instruction.*NeuronCore-v3"):
        bad.exponential_on_trn2(neuron(torch.randn(8, 8)))


def test_nonzero_with_count_is_refused_before_neuroncore_v3():
    with pytest.raises(NkiError, match="NeuronCore-v3 instruction.*NeuronCore-v2"):
        bad.nonzero_with_count_on_trn1(neuron(torch.randn(16, 8)))


def test_range_select_is_refused_before_neuroncore_v3():
    with pytest.raises(NkiError, match="NeuronCore-v3 instruction.*NeuronCore-v2"):
        bad.range_select_on_trn1(neuron(torch.randn(8, 8)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_tensor_copy_predicated_against_torch_where(dtype):
    g = torch.Generator().manual_seed(1)
    dst = (torch.randn(90, 33, generator=g) * 100).to(dtype)
    src = (torch.randn(90, 33, generator=g) * 100).to(dtype)
    predicate = (torch.rand(90, 33, generator=g) < 0.3).to(torch.uint8) * 7  # any nonzero value selects
    got = k.copy_where(neuron(dst), neuron(src), neuron(predicate)).cpu()
    assert torch.equal(got, torch.where(predicate != 0, src, dst))
    value = 2.5 if dtype.is_floating_point else 9
    got = k.fill_where_zero(neuron(dst), neuron(predicate), value).cpu()
    assert torch.equal(got, torch.where(predicate != 0, dst, torch.tensor(value, dtype=dtype)))


def test_tensor_copy_predicated_errors():
    with pytest.raises(NkiError, match="the predicate is float32; it must be uint8, uint16 or uint32"):
        bad.float_predicate(neuron(torch.randn(8, 8)))
    with pytest.raises(NkiError, match="a scalar src must be a Python int for a int32 dst"):
        bad.float_into_integers(neuron(torch.zeros(8, 8, dtype=torch.int32)), neuron(torch.ones(8, 8, dtype=torch.uint8)))


def test_an_instruction_that_does_not_exist_is_an_attribute_error():
    import nki.isa as nisa

    with pytest.raises(AttributeError, match="has no attribute 'no_such_instruction'"):
        nisa.no_such_instruction


def test_shared_identity_matrix_and_sigmoid_gelu():
    torch.manual_seed(12)
    x = torch.randn(128, 64)
    got = k.identity_and_sigmoid_gelu(neuron(x)).cpu()
    torch.testing.assert_close(got, x.t() * torch.sigmoid(1.702 * x.t()), rtol=1e-5, atol=1e-6)


def test_isa_constants_and_dtype_names_kernels_import():
    import nki
    from nki.isa import constants

    assert constants.dge_mode.hwdge == nki.isa.dge_mode.hwdge and constants.engine.scalar == nki.isa.engine.scalar
    assert isinstance(nl.int32, nki.dtype)


@pytest.mark.parametrize("count, in_sbuf", [(1, False), (3, True), (16, True)])
@pytest.mark.parametrize("out_dtype", [nl.float32, nl.bfloat16])
def test_dma_compute_sums_its_sources_in_fp32(count, in_sbuf, out_dtype):
    torch.manual_seed(count)
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.int32]
    sources = [(torch.randn(24, 40) * 50).to(dtypes[i % 4]) for i in range(count)]
    got = dma.summed_by_dma(out_dtype, in_sbuf, *[neuron(s) for s in sources]).cpu()
    # AWS: every source widened to fp32, summed in fp32, the sum cast once to dst's dtype
    expected = torch.zeros(24, 40)
    for s in sources:
        expected = expected + s.float()
    assert torch.equal(got, expected.to(got.dtype))


def test_dma_compute_may_write_one_of_its_sources():
    torch.manual_seed(30)
    a, b = torch.randn(16, 12), torch.randn(16 * 12)
    got = dma.accumulated_in_place_by_dma(neuron(a), neuron(b)).cpu()
    assert torch.equal(got, a + b.reshape(16, 12))


def test_dma_compute_read_modify_writes_through_a_vector_offset():
    torch.manual_seed(31)
    table, rows = torch.randn(10, 16), torch.randn(4, 16)
    ids = torch.tensor([7, 0, 3, 9], dtype=torch.int32)
    got = dma.scatter_added_by_dma_compute(neuron(table), neuron(rows), neuron(ids)).cpu()
    assert torch.equal(got, table.index_add(0, ids.long(), rows))
    base = torch.randn(4, 16)
    got = dma.gather_added_by_dma_compute(neuron(base), neuron(table), neuron(ids)).cpu()
    assert torch.equal(got, base + table[ids.long()])


@pytest.mark.parametrize("reduce_op, scales, count, message", [
    (nl.multiply, None, 2, "the DMA engines reduce with nl.add only"),
    (nl.add, [1.0, 2.0], 2, r"every scale must be 1.0"),
    (nl.add, None, 17, "17 sources; it takes 1 to 16"),
])
def test_dma_compute_refuses_what_the_dma_engines_lack(reduce_op, scales, count, message):
    with pytest.raises(NkiError, match=message):
        dma.dma_compute_with(neuron(torch.ones(4, 8)), reduce_op, scales, count)


def test_dma_compute_moves_every_source_in_the_cost_model():
    from torch_neuronx.nki import cost_model
    from torch_neuronx.nki.kernel import PROGRAMS

    dma.dma_compute_with(neuron(torch.ones(8, 96)), nl.add, None, 3)
    program = PROGRAMS[-1]
    assert program.encoded["kernel"] == "dma_compute_with"
    predicted = cost_model.predict(program.encoded, 3)
    # By hand: the sum moves 3 x 8 x 96 fp32 elements, then the store 8 x 96.
    assert predicted.dma_bytes == (3 + 1) * 8 * 96 * 4


@pytest.mark.parametrize("in_scratch_hbm", [False, True])
@pytest.mark.parametrize("dtype, as_dtype, torch_as", [
    (torch.bfloat16, nl.uint32, torch.uint32), (torch.float32, nl.bfloat16, torch.bfloat16),
    (torch.int32, nl.uint8, torch.uint8)])
def test_a_tile_read_as_another_dtype_gives_its_bytes(in_scratch_hbm, dtype, as_dtype, torch_as):
    torch.manual_seed(32)
    x = (torch.randn(16, 12) * 1000).to(dtype)
    words = x.shape[1] * x.element_size() // torch.tensor([], dtype=torch_as).element_size()
    got = dma.bits_of_tile(neuron(x), as_dtype, words, in_scratch_hbm).cpu()
    # compared as bytes: an fp32's low half read as bf16 may be a NaN
    assert got.dtype == torch_as and torch.equal(got.view(torch.uint8), x.view(torch.uint8))


def test_a_write_through_another_dtype_is_seen_by_the_tile():
    x = torch.randn(8, 6)
    expected = 2 * x
    expected[:, 3:] = 0  # bytes 12-23 of each partition zeroed as uint8
    assert torch.equal(dma.written_through_another_dtype(neuron(x)).cpu(), expected)


def test_bytes_that_do_not_split_into_the_dtype_are_refused():
    with pytest.raises(NkiError, match=r"its 6 bytes per partition from byte 0 do not split into whole uint32"):
        dma.odd_bytes_as_words(neuron(torch.ones(4, 3, dtype=torch.bfloat16)))
