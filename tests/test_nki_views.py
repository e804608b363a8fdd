"""AWS's NkiTensor view methods (slice, select, reshape_dim, flatten_dims, permute, expand_dim, squeeze_dim,
broadcast, rearrange, view, vector_select, get_pattern), against the same views taken by torch."""
from __future__ import annotations

import pytest
import torch

import nki_view_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


@pytest.mark.parametrize("how, shape, reference", [
    ("slice", (4, 24), lambda x: x[:, 4:20:3]),
    ("select", (4, 24, 5), lambda x: x[2]),
    ("select_last", (3, 24, 5), lambda x: x[:, :, 1]),
    ("flatten", (3, 24, 5), lambda x: x.flatten(1, 2)),
    ("expand_squeeze", (1, 24, 5), lambda x: x.unsqueeze(3).squeeze(0)),
    ("pattern_round_trip", (4, 24), lambda x: x[:, 2:7]),
])
def test_hbm_views_name_the_elements_torch_does(how, shape, reference):
    torch.manual_seed(1)
    x = torch.randn(shape)
    assert torch.equal(k.hbm_view(neuron(x), how).cpu(), reference(x).contiguous())


@pytest.mark.parametrize("how, reference", [
    ("split_permute", lambda x: x.reshape(8, 4, 6).permute(0, 2, 1)),
    ("rearrange", lambda x: x.reshape(8, 4, 6).permute(0, 2, 1)),
    ("merge_back", lambda x: x.reshape(8, 6, 4)),
    ("broadcast", lambda x: x[:, 5:6].expand(8, 3)),
    ("select_partition", lambda x: x[3:4]),
    ("strided", lambda x: x[1:8:2, 0:24:5]),
])
def test_on_chip_views_name_the_elements_torch_does(how, reference):
    torch.manual_seed(2)
    x = torch.randn(8, 24)
    assert torch.equal(k.sbuf_view(neuron(x), how).cpu(), reference(x).contiguous())


@pytest.mark.parametrize("dtype_name, torch_dtype", [("uint8", torch.uint8), ("int32", torch.int32),
                                                     ("bfloat16", torch.bfloat16)])
def test_view_reads_the_bytes_as_another_dtype(dtype_name, torch_dtype):
    torch.manual_seed(3)
    x = torch.randn(8, 24)
    got = k.bits_as(neuron(x), dtype_name).cpu()
    assert got.dtype == torch_dtype and torch.equal(got.view(torch.uint8), x.view(torch.uint8))


@pytest.mark.parametrize("row", [0, 2, 4])
def test_select_by_a_value_known_on_the_device(row):
    torch.manual_seed(4)
    x = torch.randn(5, 3, 7)
    index = torch.tensor([[row]], dtype=torch.int32)
    assert torch.equal(k.row_picked_on_the_device(neuron(x), neuron(index)).cpu(), x[row])


def test_select_by_arithmetic_on_a_loop_index():
    torch.manual_seed(5)
    x = torch.randn(6, 10)
    assert torch.equal(k.rows_reversed_by_a_device_loop(neuron(x)).cpu(), x.flip(0))


def test_vector_select_gathers_rows():
    torch.manual_seed(6)
    x = torch.randn(16, 8)
    indices = torch.tensor([[11], [0], [7], [7]], dtype=torch.int32)
    assert torch.equal(k.rows_gathered(neuron(x), neuron(indices)).cpu(), x[indices[:, 0].long()])


@pytest.mark.parametrize("how, message", [
    ("permute_partitions", "the partition dim of an on-chip tensor stays where it is"),
    ("flatten_permuted", "are not contiguous in memory"),
    ("slice_backwards", r"needs 0 <= start < end <= 24 and step >= 1, not start 9, end 3"),
    ("squeeze_wide", "dim 1 has size 24, not 1"),
    ("broadcast_wide", "only a dim of size 1 broadcasts"),
    ("split_partitions", "dim 0 is the partition dim of an on-chip tensor"),
    ("view_uneven", "do not split into whole int32 elements"),
    ("bad_split", r"\[5, -1\] does not split dim 1 of size 24"),
])
def test_views_the_hardware_cannot_address_are_refused(how, message):
    with pytest.raises(NkiError, match=message):
        k.misuse(neuron(torch.randn(8, 24)), how)
