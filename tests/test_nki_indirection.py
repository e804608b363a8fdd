"""Tensor indirection (NkiTensor.indirect, NeuronCore-v4): gathers and scatters of columns chosen by a uint16
index tile, against torch's own indexing and hand-laid indices, on the Vector, Scalar and Tensor engines;
the cost model leaves the staging out; each misuse refused by name."""
from __future__ import annotations

import pytest
import torch

import nki_indirection_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"


def _randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _u16(values):
    return torch.tensor(values, dtype=torch.int32).to(torch.uint16)


def test_the_tutorials_gather_equals_torch_indexing():
    data = _randn(128, 64)
    index = torch.randint(0, 64, (1, 32), generator=torch.Generator().manual_seed(1), dtype=torch.int32)
    index[0, 3] = index[0, 17]  # a repeated column reads twice
    got = k.gather_columns_as_the_tutorial(data.to(N), index.to(torch.uint16).to(N)).cpu()
    assert torch.equal(got, data[:, index[0].long()])


@pytest.mark.parametrize("engine", ["vector", "scalar"])
def test_each_group_of_16_partitions_reads_its_own_index_rows(engine):
    # 32 partitions: group 0 (partitions 0-15) takes columns 7, 6, ..., 0 from index rows 0-7; group 1 takes
    # 0, 2, 4, ..., 14 from rows 16-23; rows 8-15 and 24-31 are not read (8 columns).
    data = torch.arange(32 * 16, dtype=torch.float32).reshape(32, 16)
    rows = [[7 - r] for r in range(8)] + [[60000]] * 8 + [[2 * r] for r in range(8)] + [[60000]] * 8
    got = k.gather_columns(data.to(N), _u16(rows).to(N), 8, engine).cpu()
    expected = torch.cat([data[:16, [7, 6, 5, 4, 3, 2, 1, 0]], data[16:, [0, 2, 4, 6, 8, 10, 12, 14]]])
    assert torch.equal(got, expected)


def test_offsets_past_sixteen_columns_continue_in_the_next_index_column():
    # 20 columns of one group: 0-15 down index column 0, 16-19 down the first four rows of column 1.
    data = _randn(16, 40, seed=2)
    first, second = list(range(39, 23, -1)), [1, 3, 5, 7]
    rows = [[first[r], second[r] if r < 4 else 0] for r in range(16)]
    got = k.gather_columns(data.to(N), _u16(rows).to(N), 20, "vector").cpu()
    assert torch.equal(got, data[:, first + second])


def test_scatter_writes_the_indexed_columns_and_keeps_the_rest():
    values = torch.tensor([[10.0 * p + i for i in range(4)] for p in range(16)])
    rows = [[6], [1], [3], [0]] + [[0]] * 12
    got = k.scatter_columns(values.to(N), _u16(rows).to(N), 8, -1.0).cpu()
    expected = torch.full((16, 8), -1.0)
    expected[:, [6, 1, 3, 0]] = values
    assert torch.equal(got, expected)


def test_scatter_of_a_repeated_offset_keeps_the_later_column():
    values = torch.tensor([[1.0, 2.0, 3.0]] * 16)
    rows = [[2], [5], [2]] + [[0]] * 13
    got = k.scatter_columns(values.to(N), _u16(rows).to(N), 6, 0.0).cpu()
    assert torch.equal(got, torch.tensor([[0.0, 0.0, 3.0, 0.0, 0.0, 2.0]] * 16))


def test_gathered_columns_feed_the_vector_and_scalar_engines():
    a, b = _randn(16, 24, seed=3), _randn(16, 6, seed=4)
    columns = [23, 0, 5, 5, 11, 2]
    rows = [[columns[r]] if r < 6 else [0] for r in range(16)]
    added, sums = k.gathered_arithmetic(a.to(N), b.to(N), _u16(rows).to(N), 6)
    picked = a[:, columns]
    assert torch.equal(added.cpu(), picked + b)
    torch.testing.assert_close(sums.cpu(), torch.stack([picked.sum(1), picked.exp().sum(1), (picked * 2 + 1).sum(1)], 1))


def test_the_tensor_engine_gathers_and_scatters_in_groups_of_32():
    # 32 contraction partitions: with the Tensor engine's groups of 32, column i of the moving tile comes
    # from index row i (rows 16-31 included), where a Vector engine group of 16 would reuse rows 0-15.
    stationary, moving = _randn(32, 16, dtype=torch.bfloat16, seed=5), _randn(32, 48, dtype=torch.bfloat16, seed=6)
    moving_columns = [47 - 2 * i for i in range(16)]
    moving_rows = [[moving_columns[r]] if r < 16 else [0] for r in range(32)]
    dst_columns = [3 * i + 1 for i in range(16)]
    got = k.matmul_of_gathered_columns(stationary.to(N), moving.to(N), _u16(moving_rows).to(N),
                                       _u16([[c] for c in dst_columns]).to(N), 16, 50).cpu()
    expected = torch.zeros(16, 50)
    expected[:, dst_columns] = stationary.float().t() @ moving.float()[:, moving_columns]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_an_offset_past_the_data_is_an_error_naming_the_kernel_and_line():
    rows = [[16]] + [[0]] * 15  # 16 columns: offset 16 is one past
    with pytest.raises(IndexError, match=r"gather_columns', line \d+: tensor indirection: offset 16 \(index row 0, "
                                         r"column 0: column 0 of partition 0\) is past the 16 columns"):
        k.gather_columns(_randn(16, 16).to(N), _u16(rows).to(N), 4, "vector")


def test_the_staging_costs_nothing_in_the_prediction():
    from torch_neuronx.nki import cost_model
    from torch_neuronx.nki.kernel import PROGRAMS

    k.gather_columns(_randn(128, 64).to(N), torch.zeros(128, 2, dtype=torch.uint16).to(N), 32, "vector")
    program = next(p for p in reversed(PROGRAMS) if p.encoded["kernel"] == "gather_columns")
    predicted = cost_model.predict(program.encoded, 4)
    assert predicted.instructions["vector"] == 1  # the tensor_copy, not its gather
    # One Vector instruction of 32 elements per partition: 64 cycles' minimum at the engine's clock.
    assert predicted.busy_seconds["vector"] == pytest.approx(
        cost_model.ENGINE_MIN_CYCLES / (cost_model.RATES[4].vector_ghz * 1e9))


@pytest.mark.parametrize("case, message", [
    ("store", "dma_copy does not take an .indirect() view"),
    ("memset", "memset does not take an .indirect() view"),
    ("data2", "tensor_tensor: its input 1 cannot be an .indirect() view"),
    ("gpsimd_copy", "the GpSimd engine takes no .indirect() view"),
    ("int32_index", "the index must be a [partitions, K] uint16 SBUF tile"),
    ("hbm_data", "gathers columns of a [partitions, free] SBUF or PSUM view"),
    ("fp32_matmul", "the Tensor engine gathers fp16, bf16 or fp8 columns, not float32"),
    ("too_few_index_columns", "num_elem 17 needs 2 index columns"),
])
def test_each_misuse_is_refused_by_name(case, message):
    data, offsets = _randn(32, 8).to(N), torch.zeros(32, 1, dtype=torch.uint16).to(N)
    with pytest.raises(NkiError, match="misuse") as raised:
        k.misuse(data, offsets, case)
    assert message in str(raised.value)


def test_trn2_has_no_tensor_indirection():
    with pytest.raises(NkiError, match=r"tensor indirection is a NeuronCore-v4 \(trn3\) feature; this kernel runs "
                                       r"on a NeuronCore-v3"):
        k.gather_on_trn2(_randn(16, 8).to(N), torch.zeros(16, 1, dtype=torch.uint16).to(N))


def test_numpy_arrays_run_the_same_gather():
    import numpy as np
    data = np.arange(16 * 10, dtype=np.float32).reshape(16, 10)
    rows = np.array([[9], [0], [4]] + [[0]] * 13, dtype=np.uint16)
    got = k.gather_columns(data, rows, 3, "vector")
    assert np.array_equal(got, data[:, [9, 0, 4]])
