"""The ALU's bitvec operators on integer tiles, as bit patterns (never through fp32): and, or, xor, logical
shifts, invert and logical_not against torch; floats and a mix with arithmetic operators refused by name."""
from __future__ import annotations

import pytest
import torch

import nki_bitvec_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int16])
def test_bitvec_operators_work_on_bits(dtype):
    """nl.bitwise_and/or/xor, left_shift, right_shift (logical), invert and logical_not against torch; int32
    values past fp32's mantissa (0x7F00FF01) keep every bit."""
    g = torch.Generator().manual_seed(3)
    high = {torch.int32: 2**31 - 1, torch.uint8: 255, torch.int16: 2**15 - 1}[dtype]
    x = torch.randint(0, high, (64, 24), generator=g, dtype=torch.int64)
    y = torch.randint(0, high, (64, 24), generator=g, dtype=torch.int64)
    if dtype == torch.int32:
        x[0, 0] = 0x7F00FF01
    if dtype != torch.uint8:
        x[1, 1] = -8  # a logical right shift brings zeros in: 0x1FFFFFFF for int32
    x, y = x.to(dtype), y.to(dtype)
    got = [t.cpu() for t in k.bitwise(x.to(N), y.to(N), 3)]
    bits = {torch.int32: 32, torch.uint8: 8, torch.int16: 16}[dtype]
    unsigned = x.to(torch.int64) & ((1 << bits) - 1)
    expected = [x & y, x | y, x ^ y, (x.to(torch.int64) << 3).to(dtype) if dtype != torch.uint8 else (x << 3),
                (unsigned >> 3).to(dtype), ~x, ((y & 1) ^ 1).to(dtype)]
    for name, g_, e in zip(["and", "or", "xor", "shl", "shr", "invert", "logical_not"], got, expected):
        assert torch.equal(g_, e), name


@pytest.mark.parametrize("what,dtype,message", [
    ("float", torch.float32, "bitvec operators .* take integer tiles"),
    ("mixed", torch.int32, "without arithmetic operators beside them"),
])
def test_bitvec_operators_refuse_floats_and_mixing(what, dtype, message):
    with pytest.raises(NkiError, match=message):
        k.bitwise_misuse(torch.ones(8, 8, dtype=dtype).to(N), what)
