"""Scalars beyond int32: 64-bit ones (nl.int64, SDK 2.33+) loaded without truncation, wrapping at 64 bits,
stored to int64 tiles and offsetting HBM; uint32 ones (SDK 2.34) computing modulo 2^32 and comparing unsigned;
what AWS refuses each (comparisons and division of int64, loop bounds, branches, mixed dtypes, on-chip or
unsigned offsets, compute engines on int64) refused by name."""
from __future__ import annotations

import pytest
import torch

import nki_wide_scalar_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"


def _one(value, dtype=torch.int64):
    return torch.tensor([[value]], dtype=dtype).to(N)


def _wrap64(v):
    return (v + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("a,b", [(3_000_000_000, 2), (-7, 5), (2**62 + 5, 4), (-(2**63), -1)])
def test_wide_arithmetic_keeps_64_bits_and_wraps_there(a, b):
    """AWS's example: 3,000,000,000 * 2 = 6,000,000,000, not truncated; past 2^63 the sum wraps."""
    got = k.wide_arithmetic(_one(a), _one(b)).cpu()[0].tolist()
    expected = [a + b, a - b, a * b, a * 2 + 1, -a, 7 - b]
    assert got == [_wrap64(v) for v in expected]


def test_an_int32_product_wraps_where_an_int64_one_does_not():
    """AWS's example: 100000 * 100000 on int32 scalars is 1410065408 (10^10 mod 2^32)."""
    assert k.narrow_product_wraps(_one(100000, torch.int32), _one(100000, torch.int32)).cpu().item() == 1410065408
    assert k.wide_arithmetic(_one(100000), _one(100000)).cpu()[0, 2].item() == 10**10


def test_a_wide_scalar_offsets_an_hbm_access_pattern():
    table = torch.arange(64 * 8, dtype=torch.float32)
    got = k.row_at_wide_offset(table.to(N), _one(37), 8).cpu()
    assert torch.equal(got[0], table[37 * 8:38 * 8])
    with pytest.raises(IndexError, match="scalar_offset 512 moves a view"):
        k.row_at_wide_offset(table.to(N), _one(64), 8)
    # An offset near 2^63 would overflow the view's bounds: refused, not read.
    with pytest.raises(IndexError, match=f"scalar_offset {2**63 - 1} moves a view .* past its end"):
        k.row_at_wide_offset(table.to(N), _one(2**63 - 1), 1)
    # 2^62 rows of 8 elements wrap (int64 arithmetic) to offset 0: row 0, as the sequencer computes it.
    assert torch.equal(k.row_at_wide_offset(table.to(N), _one(2**62), 8).cpu()[0], table[:8])


@pytest.mark.parametrize("what,message", [
    ("compare", "64-bit scalars; they add, subtract and multiply only"),
    ("divide", "divide of 64-bit scalars"),
    ("mixed", "int32 and int64 scalars together; width and signedness must match"),
    ("loop_bound", "is a 64-bit scalar; loops, branches and comparisons take int32 ones"),
    ("branch", "if_else's condition is a 64-bit scalar"),
    ("store_narrow", "the scalar is int64 and the tile int32; they must match"),
    ("sbuf_offset", "SBUF tile takes an int32 scalar; 64-bit offsets are for HBM"),
    ("compute", "int64 data is moved by dma_copy to int64"),
    ("convert", "int64 data is moved by dma_copy to int64"),
])
def test_what_aws_refuses_64_bit_scalars_is_refused_by_name(what, message):
    with pytest.raises(NkiError, match=message):
        k.wide_scalar_misuse(_one(5), what)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_a_strided_dma_copy_keeps_every_bit_of_wide_integers(dtype):
    """Values past fp32's 24-bit mantissa survive a transposing DMA (as bits, not through fp32)."""
    x = torch.arange(2**30, 2**30 + 24, dtype=dtype).reshape(6, 4) * (3 if dtype == torch.int64 else 1)
    assert torch.equal(k.transposed_by_dma(x.to(N)).cpu(), x.T)


@pytest.mark.parametrize("a,b", [(3_000_000_000, 7), (5, 4_000_000_000), (2**32 - 1, 2**32 - 1)])
def test_uint32_scalars_compute_modulo_2_32_and_compare_unsigned(a, b):
    """SDK 2.34's uint32 scalars: 3,000,000,000 is larger than 7 (as int32 it would be negative)."""
    u32 = lambda v: torch.tensor([[v]], dtype=torch.int64).to(torch.uint32).to(N)  # noqa: E731
    values, flags = k.unsigned_operations(u32(a), u32(b))
    expected = [(a + b) % 2**32, (a - b) % 2**32, (a * b) % 2**32, a // b, a % b, max(a, b), min(a, b)]
    assert values.cpu().to(torch.int64)[0].tolist() == expected
    assert flags.cpu()[0].tolist() == [int(a < b), int(a > b), int(a == b)]


@pytest.mark.parametrize("what,message", [
    ("loop_bound", "is a uint32 scalar; loops and branches take int32 ones"),
    ("while", "while_loop's init is a uint32 scalar"),
    ("offset", "takes a signed scalar"),
    ("mixed", "int32 and uint32 scalars together; width and signedness must match"),
    ("negative", "a uint32 register holds 0 to 4294967295: -1 does not fit"),
])
def test_what_aws_refuses_uint32_scalars_is_refused_by_name(what, message):
    with pytest.raises(NkiError, match=message):
        k.unsigned_misuse(torch.tensor([[5]], dtype=torch.int64).to(torch.uint32).to(N), what)
