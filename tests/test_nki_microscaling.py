"""Microscaling (OCP MX) on NeuronCore-v4: nisa.quantize_mx and nisa.nc_matmul_mx against references
written from AWS's descriptions (nki.isa.quantize_mx, nki.isa.nc_matmul_mx: groups of 8 partitions x 4
values share an E8M0 scale; four fp8 values pack into 32 bits, four fp4 into 16), and the rules the
hardware imposes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nki_mx_kernels as mx  # noqa: E402
import nki.language as nl  # noqa: E402
from torch_neuronx.nki import NkiError

FP8 = {nl.float8_e5m2_x4: torch.float8_e5m2, nl.float8_e4m3fn_x4: torch.float8_e4m3fn}
LARGEST = {nl.float8_e5m2_x4: (57344.0, 15), nl.float8_e4m3fn_x4: (448.0, 8), nl.float4_e2m1fn_x4: (6.0, 2)}
FP4_MAGNITUDES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def random_packed(partitions: int, columns: int, mx_dtype: str) -> torch.Tensor:
    """[partitions, columns] packed elements as uint32 (fp8) or uint16 (fp4), of random finite values."""
    if mx_dtype in FP8:
        largest = LARGEST[mx_dtype][0]
        values = ((torch.rand(partitions, 4 * columns) * 2 - 1) * largest).to(FP8[mx_dtype])
        return values.view(torch.uint8).view(torch.uint32)
    codes = torch.randint(0, 16, (partitions, 4 * columns), dtype=torch.uint8)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous().view(torch.uint16)


def unpacked(packed: torch.Tensor, mx_dtype: str) -> torch.Tensor:
    """[P, F] packed -> [P, F, 4] float64: value j of element f is byte j (fp8) or nibble j (fp4)."""
    partitions = packed.shape[0]
    if mx_dtype in FP8:
        return packed.view(torch.uint8).view(FP8[mx_dtype]).double().reshape(partitions, -1, 4)
    data = packed.view(torch.uint8)
    codes = torch.stack([data & 15, data >> 4], dim=-1).reshape(partitions, -1).long()
    signs = 1.0 - 2.0 * (codes >= 8).double()
    return (signs * FP4_MAGNITUDES[codes & 7]).reshape(partitions, -1, 4)


def scaled(packed: torch.Tensor, scales: torch.Tensor, mx_dtype: str) -> torch.Tensor:
    """Each value times 2^(scale - 127) of its group (8 partitions x 1 element)."""
    factors = torch.pow(2.0, scales.double() - 127).repeat_interleave(8, dim=0)
    return unpacked(packed, mx_dtype) * factors[:, :, None]


@pytest.mark.parametrize("stationary_dtype, moving_dtype", [
    (nl.float8_e5m2_x4, nl.float8_e5m2_x4), (nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4),
    (nl.float4_e2m1fn_x4, nl.float4_e2m1fn_x4), (nl.float4_e2m1fn_x4, nl.float8_e5m2_x4)])
@pytest.mark.parametrize("K, M, N, tiles", [(128, 128, 512, 1), (32, 24, 40, 2), (64, 16, 8, 3)])
def test_matmul_mx_sums_over_partitions_and_the_four_values_of_each_element(stationary_dtype, moving_dtype, K, M,
                                                                             N, tiles):
    torch.manual_seed(K + M + N)
    stationary = random_packed(tiles * K, M, stationary_dtype)
    moving = random_packed(tiles * K, N, moving_dtype)
    stationary_scales = torch.randint(117, 130, (tiles * K // 8, M), dtype=torch.uint8)
    moving_scales = torch.randint(117, 130, (tiles * K // 8, N), dtype=torch.uint8)
    got = mx.matmul_mx(neuron(stationary), neuron(stationary_scales), neuron(moving), neuron(moving_scales),
                       stationary_dtype, moving_dtype, tiles).cpu()
    expected = torch.einsum("kmj,knj->mn", scaled(stationary, stationary_scales, stationary_dtype),
                            scaled(moving, moving_scales, moving_dtype))
    # fp32 accumulation of 4 x K x tiles products: within fp32 rounding of the largest partial sums
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-6 * float(expected.abs().max()))


def test_matmul_mx_runs_on_numpy_arrays_as_the_simulator_does():
    torch.manual_seed(5)
    stationary, moving = random_packed(32, 8, nl.float8_e4m3fn_x4), random_packed(32, 16, nl.float8_e4m3fn_x4)
    scales_s = torch.full((4, 8), 127, dtype=torch.uint8)
    scales_m = torch.randint(125, 130, (4, 16), dtype=torch.uint8)
    on_device = mx.matmul_mx(neuron(stationary), neuron(scales_s), neuron(moving), neuron(scales_m),
                             nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4, 1).cpu()
    arrays = mx.matmul_mx(stationary.numpy(), scales_s.numpy(), moving.numpy(), scales_m.numpy(),
                          nl.float8_e4m3fn_x4, nl.float8_e4m3fn_x4, 1)
    assert isinstance(arrays, np.ndarray) and torch.equal(torch.from_numpy(arrays), on_device)


def test_matmul_mx_reads_packed_data_loaded_into_sbuf_as_words():
    torch.manual_seed(6)
    stationary, moving = random_packed(64, 16, nl.float8_e5m2_x4), random_packed(64, 40, nl.float8_e5m2_x4)
    scales_s = torch.randint(120, 130, (8, 16), dtype=torch.uint8)
    scales_m = torch.randint(120, 130, (8, 40), dtype=torch.uint8)
    got = mx.matmul_mx_from_sbuf_words(neuron(stationary), neuron(scales_s), neuron(moving), neuron(scales_m)).cpu()
    expected = torch.einsum("kmj,knj->mn", scaled(stationary, scales_s, nl.float8_e5m2_x4),
                            scaled(moving, scales_m, nl.float8_e5m2_x4))
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-6 * float(expected.abs().max()))


def quantize_by_hand(x: torch.Tensor, mx_dtype: str):
    """AWS's quantize_mx: per group of 8 partitions x 4 values the scale is two times the OCP one,
    2^(largest fp32 exponent - emax + 1); values divided by it, saturated, rounded to nearest even."""
    largest, emax = LARGEST[mx_dtype]
    P, F = x.shape
    values = x.float()
    exponents = (values.view(torch.int32) >> 23) & 0xFF
    groups = exponents.reshape(P // 8, 8, F // 4, 4).amax(dim=(1, 3))
    scales = (groups - emax + 1).clamp(0, 254)
    factors = torch.pow(2.0, 127 - scales.double()).repeat_interleave(8, dim=0).repeat_interleave(4, dim=1)
    quantized = (values.double() * factors).clamp(-largest, largest).float().to(FP8[mx_dtype])
    return quantized.view(torch.uint8).view(torch.uint32), scales.to(torch.uint8)


@pytest.mark.parametrize("mx_dtype", [nl.float8_e5m2_x4, nl.float8_e4m3fn_x4])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("P, F", [(128, 64), (32, 16), (64, 8)])
def test_quantize_mx_scales_groups_by_their_largest_exponent(mx_dtype, dtype, P, F):
    torch.manual_seed(P + F)
    # Groups of very different sizes: each 8-partition band its own magnitude, one group all zeros, and
    # values that land halfway between two fp8 values.
    x = torch.randn(P, F) * torch.logspace(-3, 3, P // 8).repeat_interleave(8)[:, None]
    x[8:16, 4:8] = 0
    x[0, :4] = torch.tensor([1.0 + 2.0 ** -4, 1.0 + 3 * 2.0 ** -4, -(1.0 + 2.0 ** -3), 16.0])
    x = x.to(dtype)
    data, scales = mx.quantize_mx(neuron(x), mx_dtype)
    expected_data, expected_scales = quantize_by_hand(x, mx_dtype)
    assert data.dtype == torch.uint32 and scales.dtype == torch.uint8
    assert torch.equal(scales.cpu(), expected_scales)
    assert torch.equal(data.cpu(), expected_data)
    assert int(expected_scales[1, 1]) == 0  # the zero group: the smallest scale, zeros


@pytest.mark.parametrize("mx_dtype, error", [(nl.float8_e4m3fn_x4, 0.07), (nl.float8_e5m2_x4, 0.13)])
def test_quantized_product_interleaves_quantizes_and_multiplies_on_chip(mx_dtype, error):
    torch.manual_seed(8)
    a, b = torch.randn(512, 128).bfloat16(), torch.randn(512, 256).bfloat16()
    got = mx.quantized_product(neuron(a), neuron(b), mx_dtype).cpu()
    # Exactly the product of the values quantize_mx makes of the interleaved operands (value j of partition
    # k is row j * 128 + k) ...
    def interleaved(t):
        return t.float().reshape(4, 128, -1).permute(1, 2, 0).reshape(128, -1)
    qa, sa = quantize_by_hand(interleaved(a), mx_dtype)
    qb, sb = quantize_by_hand(interleaved(b), mx_dtype)
    exact = torch.einsum("kmj,knj->mn", scaled(qa, sa, mx_dtype), scaled(qb, sb, mx_dtype))
    torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=1e-6 * float(exact.abs().max()))
    # ... and near a.T @ b, as far as 8-bit values allow (e4m3: 3 mantissa bits, e5m2: 2).
    reference = a.double().t() @ b.double()
    assert float((got.double() - reference).norm() / reference.norm()) < error


def test_matmul_mx_predicted_time_counts_four_values_per_element():
    from torch_neuronx.nki import cost_model
    from torch_neuronx.nki.kernel import PROGRAMS

    # Sizes no other test uses, so this call traces (and registers) its own program.
    stationary, moving = random_packed(128, 120, nl.float8_e5m2_x4), random_packed(128, 500, nl.float8_e5m2_x4)
    scales = torch.full((16, 120), 127, dtype=torch.uint8), torch.full((16, 500), 127, dtype=torch.uint8)
    mx.matmul_mx(neuron(stationary), neuron(scales[0]), neuron(moving), neuron(scales[1]), nl.float8_e5m2_x4,
                 nl.float8_e5m2_x4, 1)
    program = PROGRAMS[-1]
    assert program.encoded["kernel"] == "matmul_mx"
    predicted = cost_model.predict(program.encoded, 4)
    # By hand: one matmul of 500 moving columns, 500 cycles at the Tensor engine's 2.4 GHz (NeuronCore-v4),
    # 2 x 128 x 4 x 120 x 500 flops.
    assert predicted.instructions["tensor"] == 1
    assert predicted.busy_seconds["tensor"] == pytest.approx(500 / 2.4e9, rel=1e-9)
    assert predicted.flops == 2 * 128 * 4 * 120 * 500


def _packed_and_scales(partitions):
    return neuron(random_packed(partitions, 8, nl.float8_e5m2_x4)), neuron(torch.full((partitions // 8, 8), 127,
                                                                                       dtype=torch.uint8))


@pytest.mark.parametrize("kernel, arguments, message", [
    (mx.matmul_mx_on_trn2, lambda: _packed_and_scales(32),
     r"nc_matmul_mx: runs on NeuronCore-v4 \(trn3\) and newer; the kernel is checked for NeuronCore-v3"),
    (mx.quantize_mx_of_32_partitions,
     lambda: (neuron(torch.ones(32, 16, dtype=torch.bfloat16)), nl.float4_e2m1fn_x4),
     r"packed MX data .* is written by quantize_mx \(fp8 only\)"),
    (mx.quantize_mx_with_compact_scales_of_64_partitions, lambda: (neuron(torch.ones(64, 16, dtype=torch.bfloat16)),),
     r"dst_scale must be \[36\+, 4\] for data of 64 partitions"),
    (mx.quantize_mx_of_32_partitions, lambda: (neuron(torch.ones(32, 16)), nl.float8_e5m2_x4),
     "src must be bfloat16 or float16, not float32"),
    (mx.add_packed_values, lambda: _packed_and_scales(32), r"tensor_tensor: packed MX data"),
    (mx.matmul_mx_over_48_partitions, lambda: _packed_and_scales(48),
     "a multiple of 32 up to 128, not 48 and 48"),
])
def test_mx_rules_are_checked(kernel, arguments, message):
    with pytest.raises(NkiError, match=message):
        kernel(*arguments())
