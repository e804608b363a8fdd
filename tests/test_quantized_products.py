"""Int4 weight-only products on neuron: the accelerator pair (_convert_weight_to_int4pack,
_weight_int4pack_mm) that quantisation libraries and PyTorch's tests call off the CPU, against the CPU
device's own pair on the same values and against the dense product."""
from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_quantization import _group_quantize_tensor

N = "neuron"


@pytest.mark.parametrize("m,k,n", [(32, 64, 48), (1, 128, 64), (7, 256, 16)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_int4_weight_products_match_the_cpu_pair(m, k, n, dtype):
    torch.manual_seed(m + k + n)
    a = torch.rand(m, k, dtype=dtype)
    b = torch.rand(k, n, dtype=dtype)
    q_group, tiles = 32, 2
    # The CPU device's pair: int32 [N, K] values in, its own packing.
    values, scales = _group_quantize_tensor(b, n_bit=4, q_group_size=q_group)
    expected = torch._weight_int4pack_mm_for_cpu(a, torch._convert_weight_to_int4pack_for_cpu(values, tiles),
                                                 q_group, scales)
    # The accelerator pair on neuron: two values per byte in, torch's meta shapes out.
    bytes_, scales_n = _group_quantize_tensor(b.to(N), n_bit=4, q_group_size=q_group)
    assert bytes_.dtype == torch.uint8 and bytes_.shape == (n, k // 2)
    packed = torch._convert_weight_to_int4pack(bytes_, tiles)
    assert packed.device.type == N and packed.dtype == torch.int32
    assert packed.shape == (n // 8, k // (tiles * 16), 32, tiles // 2)
    got = torch._weight_int4pack_mm(a.to(N), packed, q_group, scales_n)
    assert got.device.type == N and got.dtype == dtype
    assert torch.equal(got.cpu(), expected)
    dense = (a.float() @ b.float()).to(dtype)
    torch.testing.assert_close(got.cpu().float(), dense.float(), rtol=0.1, atol=0.1 * k ** 0.5)


def test_int4_pack_refuses_bad_weights_by_name():
    with pytest.raises(RuntimeError, match="expected a uint8 \\[N, K / 2\\] weight"):
        torch._convert_weight_to_int4pack(torch.zeros(16, 32, dtype=torch.int32, device=N), 2)
    with pytest.raises(RuntimeError, match="N \\(12\\) must be a multiple of 8"):
        torch._convert_weight_to_int4pack(torch.zeros(12, 32, dtype=torch.uint8, device=N), 2)
    with pytest.raises(RuntimeError, match="expected a weight from _convert_weight_to_int4pack"):
        torch._weight_int4pack_mm(torch.zeros(2, 64, device=N), torch.zeros(8, 64, dtype=torch.int32, device=N), 32,
                                  torch.zeros(2, 8, 2, device=N))
