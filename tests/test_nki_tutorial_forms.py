"""The forms AWS's published NKI tutorials write kernels in, on neuron, each against torch
(kernels in nki_tutorial_forms.py, our own)."""
from __future__ import annotations

import pytest
import torch

import nki_tutorial_forms as forms  # noqa: E402
from torch_neuronx.nki import NkiError


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def test_block_tiles_in_psum_and_sbuf_hold_one_product_each():
    torch.manual_seed(0)
    lhsT, rhs = torch.randn(128, 384), torch.randn(128, 512)
    out = forms.blocked_products(neuron(lhsT), neuron(rhs)).cpu()
    torch.testing.assert_close(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def test_block_tile_accumulates_through_indexed_blocks():
    torch.manual_seed(1)
    x = torch.randn(128 * 5, 96)
    want = sum(x[t * 128:(t + 1) * 128] for t in range(5))
    torch.testing.assert_close(forms.block_sums(neuron(x)).cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", [2, 3])
def test_reduction_over_non_trailing_free_axes(window):
    torch.manual_seed(window)
    x = torch.randn(16, 6 * window, 4 * window)
    want = torch.nn.functional.max_pool2d(x.unsqueeze(0), window).squeeze(0)
    assert torch.equal(forms.window_max(neuron(x), window).cpu(), want)


def test_spmd_grid_over_two_neuron_cores_covers_every_tile():
    torch.manual_seed(2)
    a, b = torch.randn(512, 1024), torch.randn(512, 1024)
    assert torch.equal(forms.add_on_two_cores(neuron(a), neuron(b)).cpu(), a + b)


def test_scan_continues_from_a_per_partition_initial_value():
    torch.manual_seed(3)
    decay, inputs = torch.rand(128, 96) * 0.9, torch.randn(128, 96)
    want, state = torch.empty_like(inputs), torch.zeros(128)
    for t in range(96):
        state = decay[:, t] * state + inputs[:, t]
        want[:, t] = state
    out = forms.chunked_decay_scan(neuron(decay), neuron(inputs), 32).cpu()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_one_partition_tile_broadcasts_to_every_partition():
    torch.manual_seed(4)
    x, row = torch.randn(128, 200), torch.randn(1, 200)
    assert torch.equal(forms.scale_rows_by_one_row(neuron(x), neuron(row)).cpu(), x * row)


def test_dma_casts_fp32_to_bf16_as_torch_rounds():
    torch.manual_seed(5)
    x = torch.randn(64, 300)
    out = forms.store_as_bf16(neuron(x)).cpu()
    assert out.dtype == torch.bfloat16 and torch.equal(out, x.to(torch.bfloat16))


def test_hand_placed_tiles_kept_order_and_tensor_scalar_reduce():
    torch.manual_seed(6)
    x = torch.randn(128, 256)
    out = forms.placed_softmax_sums(neuron(x)).cpu()
    torch.testing.assert_close(out[:, 0], torch.exp(x).sum(1), rtol=1e-4, atol=1e-4)


def test_shared_constant_identity_and_psum_accumulation_into_a_fresh_block():
    torch.manual_seed(7)
    x = torch.randn(128, 384)
    assert torch.equal(forms.transpose_by_identity(neuron(x)).cpu(), x.T)


def test_psum_blocks_live_one_at_a_time_fit_the_banks():
    torch.manual_seed(8)
    x = torch.randn(128, 512)
    want = 16 * (x[:, :128].T @ x)
    torch.testing.assert_close(forms.rotating_psum_blocks(neuron(x)).cpu(), want, rtol=1e-4, atol=1e-3)


def test_shared_constants_are_per_data_and_dtype():
    torch.manual_seed(9)
    x = torch.randn(64, 3)
    for weights in ([1.5, -2.0, 0.25], [3.0, 0.5, -1.0]):  # a second signature of constants, same kernel
        out = forms.scale_by_constant_row(neuron(x), tuple(weights)).cpu()
        assert torch.equal(out, x * torch.tensor(weights))


def test_numpy_bf16_arrays_in_and_out_through_ml_dtypes():
    np = pytest.importorskip("numpy")
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="python3-ml-dtypes is in the project's environment")
    x = (np.arange(128 * 8, dtype=np.float32).reshape(128, 8) / 7).astype(ml_dtypes.bfloat16)
    out = forms.block_sums(x)  # bf16 in, bf16 out, as AWS's simulator takes and gives them
    assert out.dtype == ml_dtypes.bfloat16
    assert np.array_equal(out.astype(np.float32), x.astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dma_transpose_2d_through_sbuf(dtype):
    torch.manual_seed(10)
    x = torch.randn(96, 128).to(dtype)
    assert torch.equal(forms.dma_transposed(neuron(x)).cpu(), x.T)


def test_dma_transpose_4d_permutes_3_1_2_0():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    assert torch.equal(forms.dma_transposed_4d(neuron(x)).cpu(), x.permute(3, 1, 2, 0))


def test_dma_transpose_refuses_other_axes():
    with pytest.raises(NkiError, match=r"axes \(0, 1\) for a 2-axis tile; supported: \(1, 0\)"):
        forms.dma_transposed_wrong_axes(neuron(torch.zeros(4, 8)))


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint32])
def test_indirect_dma_gathers_rows_by_an_index_tile(dtype):
    torch.manual_seed(11)
    table = torch.randn(50, 24)
    ids = torch.tensor([3, 0, 49, 3, 17, 8, 8, 31], dtype=dtype)
    out = forms.gather_rows(neuron(table), neuron(ids)).cpu()
    assert torch.equal(out, table[ids.long()])


def test_indirect_dma_scatters_rows_into_its_destination():
    torch.manual_seed(14)
    rows = torch.randn(5, 16)
    ids = torch.tensor([7, 0, 3, 9, 4], dtype=torch.int32)
    want = torch.zeros(10, 16)
    want[ids.long()] = rows
    assert torch.equal(forms.scatter_rows(neuron(rows), neuron(ids), 10).cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dma_read_modify_write_adds(dtype):
    # The sum is taken in fp32 and rounded once to dst's dtype: the same bits as torch's add.
    torch.manual_seed(21)
    a, b = torch.randn(128, 96).to(dtype), torch.randn(128, 96).to(dtype)
    assert torch.equal(forms.added_by_dma(neuron(a), neuron(b)).cpu(), a + b)
    # The cost model: a, b and out's tile moved once each, the adding DMA reading out before it writes.
    from torch_neuronx.nki.kernel import PROGRAMS
    from torch_neuronx.nki import cost_model
    program = next(p for p in reversed(PROGRAMS) if p.encoded["kernel"] == "added_by_dma")
    assert cost_model.predict(program.encoded, 3).dma_bytes == 4 * a.numel() * a.element_size()


def test_indirect_dma_scatter_adds_repeated_rows():
    torch.manual_seed(22)
    rows = torch.randn(6, 16)
    ids = torch.tensor([3, 0, 3, 7, 3, 0], dtype=torch.int32)
    want = torch.zeros(8, 16).index_add_(0, ids.long(), rows)
    torch.testing.assert_close(forms.scatter_added_rows(neuron(rows), neuron(ids), 8).cpu(), want,
                               rtol=1e-6, atol=1e-6)


def test_dma_read_modify_write_refuses_what_the_hardware_lacks():
    x = torch.ones(4, 8)
    with pytest.raises(NkiError, match="read-modify-write supports nl.add only"):
        forms.dma_with_rmw_op(neuron(x), forms.nl.multiply)
    with pytest.raises(NkiError, match="adds into float32, bfloat16 and float16 tensors"):
        forms.dma_with_rmw_op(neuron(torch.ones(4, 8, dtype=torch.int32)), forms.nl.add)
    assert torch.equal(forms.dma_with_rmw_op(neuron(x), forms.nl.add).cpu(), 2 * x)


def test_access_patterns_read_and_write_other_dtypes():
    # `.ap(dtype=...)` sees an HBM tensor's bytes as another dtype: torch's Tensor.view(dtype) is the reference.
    torch.manual_seed(23)
    x = torch.randn(4, 8)
    assert torch.equal(forms.read_as(neuron(x), forms.nl.bfloat16, 16).cpu(), x.view(torch.bfloat16))
    assert torch.equal(forms.read_as(neuron(x), forms.nl.int32, 8).cpu(), x.view(torch.int32))
    halves = torch.randn(4, 16).to(torch.bfloat16)
    assert torch.equal(forms.read_as(neuron(halves), forms.nl.float32, 8).cpu(), halves.view(torch.float32))
    assert torch.equal(forms.written_as(neuron(x)).cpu(), x.view(torch.bfloat16))
    # An SBUF tile read as int32, stored into an fp32 tensor: the DMA converts the integers.
    assert torch.equal(forms.tile_read_as(neuron(x)).cpu(), x.view(torch.int32).float())
    with pytest.raises(NkiError, match="do not split into whole float32 elements"):
        forms.read_as(neuron(torch.zeros(3, 3, dtype=torch.bfloat16)), forms.nl.float32, 1)


def test_side_reductions_carry_their_registers_across_instructions():
    torch.manual_seed(24)
    x = torch.randn(3 * 128, 512)
    want = x.exp().view(3, 128, 512).sum(dim=(0, 2)).unsqueeze(1)
    torch.testing.assert_close(forms.exp_sums_carried(neuron(x)).cpu(), want, rtol=1e-5, atol=1e-3)
    y = torch.randn(2 * 128, 512)
    want = (2 * y).view(2, 128, 512).amax(dim=(0, 2)).unsqueeze(1)
    assert torch.equal(forms.max_carried(neuron(y)).cpu(), want)
    # reduce before any reset reads registers nothing wrote: the NaN sentinel of a fresh tile.
    assert forms.carried_reduce_cmd(neuron(torch.zeros(128, 512))).cpu().isnan().all()


def test_indirect_dma_out_of_bounds_raises_or_skips():
    table = torch.arange(10 * 4, dtype=torch.float32).reshape(10, 4)
    ids = torch.tensor([2, 10, 5], dtype=torch.int32)  # 10 is one past the table
    with pytest.raises(IndexError, match=r"gather_rows', line \d+: indirect DMA: index 10 \(position 1\)"):
        forms.gather_rows(neuron(table), neuron(ids))
    out = forms.gather_rows(neuron(table), neuron(ids), True).cpu()
    assert torch.equal(out, torch.stack([table[2], torch.full((4,), -1.0), table[5]]))


def test_psum_blocks_placed_by_a_function():
    torch.manual_seed(13)
    x = torch.randn(128, 512)
    out = forms.psum_placed_by_function(neuron(x)).cpu()
    want = x[:, :128].T @ x
    for m in range(4):
        torch.testing.assert_close(out[m], want, rtol=1e-4, atol=1e-3)


def test_access_patterns_of_up_to_eight_axes():
    x = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    out = forms.columns_as_axes(neuron(x), 8).cpu()
    assert torch.equal(out.reshape(4, 16), x)
    with pytest.raises(NkiError, match="has 9 axes; an access pattern has at most 8"):
        forms.columns_as_axes(neuron(x), 9)


def test_loop_reduce_accumulates_into_its_destination_and_reshaped_returns():
    torch.manual_seed(12)
    lhsT, rhs = torch.randn(384, 64), torch.randn(384, 96)
    out = forms.products_reduced_over_blocks(neuron(lhsT), neuron(rhs)).cpu()
    assert out.shape == (64, 96)
    torch.testing.assert_close(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


def test_benchmark_reports_the_predicted_neuroncore_latency():
    from neuronxcc.nki import benchmark
    from torch_neuronx.nki import cost_model
    bench = benchmark(warmup=1, iters=3)(forms.block_sums.fn)
    x = torch.randn(128 * 3, 64)
    out = bench(x)
    torch.testing.assert_close(out, sum(x[t * 128:(t + 1) * 128] for t in range(3)), rtol=1e-6, atol=1e-6)
    program = bench.kernel.program_for(x)
    predicted_us = cost_model.predict(program.encoded, program.version).seconds * 1e6
    result = bench.benchmark_result
    assert result.nc_latency.get_latency_percentile(50) == result.nc_latency.get_latency_percentile(99) == predicted_us
    assert predicted_us > 0 and len(result.host_latency.samples) == 3


@pytest.mark.parametrize("kernel, message", [
    (forms.placed_past_sbuf, "past the 229376 bytes of a partition"),
    (forms.nine_psum_blocks, "need 9 banks"),
    (forms.gather_by_float_index, "vector_offset must be an SBUF tile of int32 or uint32"),
])
def test_tutorial_forms_keep_the_hardware_limits(kernel, message):
    with pytest.raises(NkiError, match=message):
        kernel(neuron(torch.zeros(128, 1024 if kernel is forms.placed_past_sbuf else 512)))


def test_load_transpose2d_transposes_as_it_loads():
    torch.manual_seed(30)
    x = torch.randn(96, 40)  # [F, P]: 40 partitions of 96
    assert torch.equal(forms.transposed_on_load(neuron(x)).cpu(), x.T)


def test_a_kernel_called_by_a_kernel_is_inlined():
    torch.manual_seed(31)
    x = torch.randn(8, 16)
    assert torch.equal(forms.doubled_by_an_inner_kernel(neuron(x)).cpu(), 2 * x)
    with pytest.raises(NkiError, match="launched on a grid from inside another kernel"):
        forms.inner_kernel_on_a_grid(neuron(x))


def test_numpy_reductions_name_alu_operators():
    torch.manual_seed(32)
    x = torch.randn(16, 48)
    assert torch.equal(forms.negated_row_max(neuron(x)).cpu(), -x.amax(dim=1, keepdim=True))
