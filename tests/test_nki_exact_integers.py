"""Integers on the engines as integers, where fp32 (exact only up to 2**24) would change them: bitvec
operators' immediates, integer memsets, GpSimd's native 32-bit arithmetic (tensor_tensor's default for int32
and uint32 tiles, as AWS documents it) and bitvec reductions, against numpy's integer arithmetic."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nki_integer_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"
TORCH = {"int32": torch.int32, "uint8": torch.uint8, "int16": torch.int16, "int8": torch.int8}


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def _random(dtype: str, shape, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    values = np.random.default_rng(seed).integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64)
    return values.astype(dtype)


@pytest.mark.parametrize("mask,pattern", [(0x7FFFFFFF, 16777217), (0x00FFFFFF, -(2**31)), (-16777218, 0x55555555)])
def test_bitvec_immediates_keep_every_bit(mask, pattern):
    """Immediates past 2**24 reach the bitvec operators as written (as fp32, 0x7FFFFFFF became 2**31 and the
    and gave 0 or the sign bit)."""
    x = _random("int32", (32, 16), 1)
    x[0, :4] = [2**30 + 1, -(2**29) - 3, 123456789, 7]
    got = [_numpy(t) for t in k.bitvec_immediates(torch.from_numpy(x).to(N), mask, pattern)]
    m, p = np.int32(np.int64(mask).astype(np.int32)), np.int32(pattern)
    for name, g, e in zip(["and", "or", "xor", "and-then-xor"], got, [x & m, x | m, x ^ p, (x & m) ^ p]):
        np.testing.assert_array_equal(g, e, err_msg=name)


@pytest.mark.parametrize("dtype,value", [("int32", 16777217), ("int32", -(2**31)), ("int32", 2**31 - 1),
                                         ("int16", -32768), ("uint8", 255), ("int8", -128)])
def test_integer_memset_is_exact(dtype, value):
    for got in k.filled((8, 6), TORCH[dtype], value):
        np.testing.assert_array_equal(_numpy(got), np.full((8, 6), value, dtype=dtype))


@pytest.mark.parametrize("dtype,value", [("int8", 200), ("uint8", -1), ("int32", 2**31), ("int16", 40000)])
def test_integer_memset_out_of_range_is_refused(dtype, value):
    with pytest.raises(NkiError, match=f"{value} does not fit in {dtype}"):
        k.filled((8, 6), TORCH[dtype], value)


def _integer_reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """op in int64, wrapped back into 32 bits (two's complement) as the engine's integer unit does."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    result = {"add": a64 + b64, "subtract": a64 - b64, "multiply": (a64 * b64) & 0xFFFFFFFF,
              "maximum": np.maximum(a64, b64), "minimum": np.minimum(a64, b64), "equal": a64 == b64,
              "not_equal": a64 != b64, "greater": a64 > b64, "greater_equal": a64 >= b64, "less": a64 < b64,
              "less_equal": a64 <= b64}[op]
    return (result.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("op", sorted(k.ARITHMETIC))
def test_int32_tensor_tensor_is_exact_by_default(op):
    """tensor_tensor of int32 tiles runs on GpSimd unless told, exact and wrapping: sums past 2**24, products
    past 2**31, maxima of neighbours that fp32 cannot tell apart. nl's operator takes the same route."""
    x, y = _random("int32", (64, 20), 2), _random("int32", (64, 20), 3)
    x[0, :4], y[0, :4] = [2**30 + 1, 16777217, 2**31 - 1, -5], [2**29 + 1, 16777216, 1, -(2**31)]
    y[1] = x[1] + np.where(x[1] < 2**31 - 1, 1, 0).astype(np.int32)  # neighbours: fp32 rounds them together
    y[2] = x[2]
    expected = _integer_reference(op, x, y)
    for got in k.integer_tensor_tensor(torch.from_numpy(x).to(N), torch.from_numpy(y).to(N), op, None):
        np.testing.assert_array_equal(_numpy(got), expected)


def test_int32_tensor_tensor_on_the_vector_engine_computes_in_fp32():
    """engine=vector keeps AWS's fp32 arithmetic: the sum of int32 values past 2**24 rounds as in float32, then
    converts back to int32 to nearest (the exact sum would be 2**24 + 3)."""
    x = np.array([[16777217, 2**30 + 1, 3, -7]], dtype=np.int32)
    y = np.array([[2, 2**29 + 1, 4, 2]], dtype=np.int32)
    dst, _ = k.integer_tensor_tensor(torch.from_numpy(x).to(N), torch.from_numpy(y).to(N), "add", "vector")
    expected = (x.astype(np.float32) + y.astype(np.float32)).astype(np.float64).round().astype(np.int32)
    np.testing.assert_array_equal(_numpy(dst), expected)
    assert _numpy(dst)[0, 0] != 16777219  # the exact sum is what the GpSimd route gives instead


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype,axis", [("int32", 2), ("int32", (1, 2)), ("uint8", 2), ("int16", (1, 2))])
def test_bitvec_reductions(op, dtype, axis):
    """tensor_reduce with and, or, xor (AWS's legal bitvec reductions) over integer tiles, as bits."""
    x = _random(dtype, (16, 5, 7), 4)
    if dtype == "int32":
        x[0, :, 0] = 0x7F00FF01
    got = _numpy(k.bitvec_reduce(torch.from_numpy(x).to(N), op, axis, False))
    expected = getattr(np, op).reduce(x, axis=axis)
    np.testing.assert_array_equal(got, expected.astype(dtype))


@pytest.mark.parametrize("op,negate", [("left_shift", False), ("bitwise_or", True)])
def test_bitvec_reductions_refuse_shifts_and_negate(op, negate):
    with pytest.raises(NkiError, match="bitwise_and, bitwise_or and bitwise_xor in tensor_reduce, without negate"):
        k.bitvec_reduce(torch.ones(8, 4, dtype=torch.int32).to(N), op, 1, negate)


@pytest.mark.parametrize("offset,channel_multiplier,steps", [(16777217, 1000, (1, 7)), (2**31 - 40, 3, (5, 1)),
                                                              (-(2**30), -(2**24) - 1, (-3, 2**20))])
def test_iota_is_int32_arithmetic(offset, channel_multiplier, steps):
    """iota's values are int32 arithmetic (AWS): exact past 2**24 and wrapping past 2**31 in an int32 tile,
    converted once (to nearest) for a float32 tile."""
    shape = (8, 3, 5)
    p, i, j = np.meshgrid(np.arange(8), np.arange(3), np.arange(5), indexing="ij")
    exact = offset + p * channel_multiplier + i * steps[0] + j * steps[1]
    wrapped = (exact.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(_numpy(k.iota(shape, torch.int32, offset, channel_multiplier, steps)), wrapped)
    np.testing.assert_array_equal(_numpy(k.iota(shape, torch.float32, offset, channel_multiplier, steps)),
                                  wrapped.astype(np.float32))


@pytest.mark.parametrize("offset", [2**31, 0.5])
def test_iota_refuses_terms_that_are_not_int32(offset):
    with pytest.raises(NkiError, match="iota: offset, channel_multiplier and the pattern's steps are int32"):
        k.iota((8, 4), torch.int32, offset, 0, (1,))


def test_power_runs_on_gpsimd_which_cannot_reach_psum():
    """tensor_tensor's nl.power is a GpSimd operation (AWS), so its tiles must be in SBUF."""
    x, y = torch.rand(8, 16) + 0.5, torch.rand(8, 16) * 3
    torch.testing.assert_close(k.power_from(x.to(N), y.to(N), "sbuf").cpu(), x ** y, rtol=1e-5, atol=1e-6)
    with pytest.raises(NkiError, match="GpSimd|gpsimd"):
        k.power_from(x.to(N), y.to(N), "psum")
