"""Integers computed on the device (nki.isa.NkiScalar: scalar_load, scalar arithmetic, scalar_store) and
branches on them (nl.if_else), against hand computations of 32-bit sequencer arithmetic."""
from __future__ import annotations

import pytest
import torch

import nki_scalar_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def scalar(n: int) -> torch.Tensor:
    return neuron(torch.tensor([[n]], dtype=torch.int32))


def int32(n: int) -> int:
    return (n + 2**31) % 2**32 - 2**31


def c_division(a: int, b: int) -> tuple:
    """C's quotient (toward zero) and remainder (a's sign), computed by hand."""
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return int32(quotient), a - b * quotient


def expected(a: int, b: int) -> list:
    quotient, remainder = c_division(a, b)
    return [int32(a + b), int32(a - b), int32(a * b), quotient, int32(remainder), max(a, b), min(a, b),
            int(a < b), int(a <= b), int(a > b), int(a >= b), int(a == b), int(a != b), int32(-a),
            int32(a * 4 + 1), int32(7 - b), a % b]  # Python's % takes b's sign, as nl.mod


@pytest.mark.parametrize("a, b", [(-17, 4), (17, -4), (9, 9), (100000, 100000), (2**31 - 1, 1),
                                  (-2**31, -1), (0, 5)])
def test_scalar_arithmetic_is_the_sequencers_32_bit_arithmetic(a, b):
    got = k.every_scalar_operation(scalar(a), scalar(b)).cpu()[0].tolist()
    assert dict(zip([name for name, _ in k.BINARY], got)) == dict(zip([name for name, _ in k.BINARY],
                                                                     expected(a, b)))


def test_division_by_a_scalar_zero_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match=r"kernel 'every_scalar_operation', line \d+: scalar_alu: division by zero"):
        k.every_scalar_operation(scalar(3), scalar(0))


@pytest.mark.parametrize("rows", [0, 3, 5])
def test_an_index_times_a_constant_addresses_rows(rows):
    torch.manual_seed(rows)
    x = torch.randn(5, 8)
    want = torch.zeros(5, 8)
    want[:rows] = 2 * x[:rows]
    assert torch.equal(k.rows_doubled_at_scalar_offsets(neuron(x), scalar(rows)).cpu(), want)


@pytest.mark.parametrize("flag", [-3, 0, 1, 42])
def test_if_else_runs_the_side_a_comparison_picks(flag):
    data = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    want = data + 10 if flag > 0 else data * 2
    assert torch.equal(k.plus_ten_if_positive_else_doubled(scalar(flag), neuron(data)).cpu(), want)


@pytest.mark.parametrize("flag", [-7, 0, 2])
def test_if_without_else_takes_any_nonzero_value(flag):
    data = torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2
    want = -data if flag != 0 else data
    assert torch.equal(k.negated_if_nonzero(scalar(flag), neuron(data)).cpu(), want)


@pytest.mark.parametrize("rows", [0, 4, 7])
def test_a_branch_inside_a_device_loop_on_its_index(rows):
    torch.manual_seed(10 + rows)
    x = torch.randn(7, 5)
    want = torch.zeros(7, 5)
    for r in range(rows):
        want[r] = -x[r] if r % 2 else x[r]
    assert torch.equal(k.odd_rows_negated(neuron(x), scalar(rows)).cpu(), want)


def test_a_python_condition_picks_a_side_while_tracing():
    from torch_neuronx.nki import codes
    from torch_neuronx.nki.kernel import PROGRAMS

    data = torch.randn(2, 9)
    assert torch.equal(k.picked_while_tracing(neuron(data), 3).cpu(), data * 3)
    assert torch.equal(k.picked_while_tracing(neuron(data), 4).cpu(), data)
    program = PROGRAMS[-1].encoded
    assert program["kernel"] == "picked_while_tracing"
    opcodes = {ins["opcode"] for ins in program["instructions"]}
    assert codes.get()["opcode"]["branch"] not in opcodes and codes.get()["opcode"]["scalar_alu"] not in opcodes


def test_if_else_on_numpy_bools_and_integers_picks_while_tracing():
    data = torch.randn(2, 9)
    assert torch.equal(k.picked_by_numpy(neuron(data), 3).cpu(), data * 3)
    assert torch.equal(k.picked_by_numpy(neuron(data), 4).cpu(), -data)


@pytest.mark.parametrize("how, error, message", [
    ("python_if", TypeError, "a register's value is known only on the device"),
    ("floor_division", TypeError, "rounds toward zero on the device"),
    ("store_an_int", NkiError, "scalar_store stores an NkiScalar, not int"),
    ("load_a_float", NkiError, "must be a 1x1 int32, uint32 or int64 tile, not float32"),
    ("load_int16", NkiError, "must be a 1x1 int32, uint32 or int64 tile, not int16"),
    ("power", NkiError, "the sequencers have no 'power'"),
    ("register_operand", NkiError, "is a VirtualRegister; scalar arithmetic takes NkiScalars"),
    ("too_wide", NkiError, "does not fit"),
])
def test_misused_scalars_are_refused_while_tracing(how, error, message):
    with pytest.raises(error, match=message):
        k.misuse(scalar(1), how)
