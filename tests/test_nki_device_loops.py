"""Loops that run on the device (nl.fori_loop, nl.dynamic_range, nl.while_loop), virtual registers
(nisa.register_alloc, _move, _load, _store) and views moved by a register (.ap(scalar_offset=...)), against
hand computations."""
from __future__ import annotations

import pytest
import torch

import nki_device_loop_kernels as k  # noqa: E402


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def count(n: int) -> torch.Tensor:
    return neuron(torch.tensor([[n]], dtype=torch.int32))


@pytest.mark.parametrize("rows", [0, 1, 4, 6])
def test_a_loop_runs_as_many_times_as_a_value_read_on_the_device(rows):
    torch.manual_seed(rows)
    x = torch.randn(6, 8)
    expected = torch.zeros(6, 8)
    expected[:rows] = 2 * x[:rows]
    # One trace serves every trip count: the count is data, not part of the kernel's signature.
    assert torch.equal(k.rows_doubled_by_a_device_loop(neuron(x), count(rows)).cpu(), expected)


@pytest.mark.parametrize("stop, start, step", [(10, 2, 3), (10, 0, 1), (3, 5, 1), (100, 7, 10)])
def test_dynamic_range_gives_its_index_in_a_register(stop, start, step):
    got = k.sum_of_index_values(count(stop), start, step).cpu()
    assert got.item() == sum(range(start, stop, step))


@pytest.mark.parametrize("n, halvings", [(0, 0), (1, 1), (37, 6), (1024, 11)])
def test_a_while_loop_repeats_until_its_condition_is_zero(n, halvings):
    # n -> n / 2 rounded to nearest even as the int32 register takes it: 37, 18, 9, 4, 2, 1, 0
    assert k.halvings_until_zero(count(n)).cpu().item() == halvings


def test_a_tile_made_before_a_loop_lives_through_all_its_iterations():
    torch.manual_seed(40)
    x = torch.randn(5, 16)
    assert torch.equal(k.rows_times_a_tile_made_before_the_loop(neuron(x), count(5)).cpu(), 3 * x)


def test_a_scalar_offset_moves_a_view_and_past_the_tensor_is_an_error():
    torch.manual_seed(41)
    x = torch.randn(4, 8)
    assert torch.equal(k.row_at_a_loaded_offset(neuron(x), count(16)).cpu()[0], x[2])
    assert torch.equal(k.flat_row_at_a_loaded_offset(neuron(x), count(8)).cpu()[0], x[1])
    with pytest.raises(IndexError, match=r"scalar_offset 32 moves a view of 'x' \(32 elements\) to elements 32 to 39"):
        k.row_at_a_loaded_offset(neuron(x), count(32))


def test_python_cannot_branch_on_a_register():
    with pytest.raises(TypeError, match="a register's value is known only on the device"):
        k.branch_on_a_register(neuron(torch.zeros(2, 2)))


def test_the_cost_model_takes_a_device_loops_body_once_and_leaves_the_sequencers_out():
    from torch_neuronx.nki import cost_model
    from torch_neuronx.nki.kernel import PROGRAMS

    x = torch.randn(3, 40)  # a shape no other test uses: this call traces its own program
    k.rows_times_a_tile_made_before_the_loop(neuron(x), count(3))
    program = PROGRAMS[-1]
    assert program.encoded["kernel"] == "rows_times_a_tile_made_before_the_loop"
    predicted = cost_model.predict(program.encoded, 3)
    # By hand: DMAs of the count into SBUF, one row in, one row out; on the Vector engine the fill of the
    # 3s, the product and the offset's add; register moves and the loop itself not at all.
    assert predicted.instructions["dma"] == 3
    assert predicted.instructions["vector"] == 3
