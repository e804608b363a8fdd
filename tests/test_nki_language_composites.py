"""nki.language's composite functions (AWS's experimental var, all, softmax, rms_norm, expand_dims,
no_reorder, is_hbm/is_sbuf/is_psum/is_on_chip) and nki.isa.get_nc_sub_version, against torch."""
from __future__ import annotations

import pytest
import torch

import nki_composite_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"


@pytest.mark.parametrize("shape,axis", [((128, 96), 1), ((32, 6, 20), (1, 2)), ((16, 5, 12), 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_all_softmax(shape, axis, dtype):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
    x[0] = 0.0  # a row that is all zeros: all() is 0 there
    x[1, 0] = 0.0  # one zero: all() is 0 there too
    var, every, soft = (t.cpu() for t in k.reductions(x.to(N), axis, dtype))
    dims = (axis,) if isinstance(axis, int) else axis
    wide = x.double()
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(var.double(), wide.var(dim=dims, unbiased=False, keepdim=True), **tolerance)
    # A reduction without keepdims keeps a free axis of 1 where nothing else is left, as nl.sum does.
    torch.testing.assert_close(every.double().flatten(), (wide != 0).all(dim=dims).double().flatten())
    torch.testing.assert_close(soft.double(), torch.softmax(wide.flatten(1) if len(dims) > 1 else wide,
                                                            dim=-1).reshape(shape), **tolerance)
    assert var.dtype == soft.dtype == every.dtype == dtype


@pytest.mark.parametrize("n,epsilon", [(512, 1e-6), (2048, 0.5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm(n, epsilon, dtype):
    """x / sqrt(sum(x^2) / n + epsilon) * w, n counting the values of a whole row of which the tile holds
    512 (as a kernel normalising a row in pieces passes it)."""
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(128, 512, generator=g).to(dtype), torch.randn(128, 512, generator=g).to(dtype)
    got = k.rms_norm(x.to(N), w.to(N), n, epsilon, dtype).cpu()
    xd = x.double()
    expected = xd / torch.sqrt((xd * xd).sum(1, keepdim=True) / n + epsilon) * w.double()
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=2e-2)
    torch.testing.assert_close(got.double(), expected, **tolerance)
    assert got.dtype == dtype


@pytest.mark.parametrize("axis,shape", [(1, (16, 1, 24)), (2, (16, 24, 1)), (-1, (16, 24, 1))])
def test_expand_dims(axis, shape):
    x = torch.randn(16, 24, generator=torch.Generator().manual_seed(7))
    sums, wide = (t.cpu() for t in k.expanded(x.to(N), axis))
    assert tuple(wide.shape) == shape
    torch.testing.assert_close(wide, x.reshape(shape))
    torch.testing.assert_close(sums.flatten(), x.sum(1), atol=1e-5, rtol=1e-5)


def test_no_reorder_keeps_results_and_refuses_device_loops():
    x = torch.randn(8, 16)
    torch.testing.assert_close(k.ordered(x.to(N), False).cpu(), (x + 3) * 2)
    with pytest.raises(NkiError, match="cannot be inside nl.no_reorder"):
        k.ordered(x.to(N), True)


def test_buffer_predicates_and_sub_version():
    got = k.facts(torch.ones(4, 8).to(N)).cpu()
    expected = torch.tensor([[1, 0, 1, 1, 0, 1, 1, 0, 1]], dtype=torch.float32)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.uint32])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_gather_flattened(index_dtype, dtype):
    """out[p, j] = data[p].flatten()[indices[p, j]], indices repeated and out of order, int32 or uint32."""
    g = torch.Generator().manual_seed(8)
    data = torch.randn(64, 4, 8, generator=g)
    indices = torch.randint(0, 32, (64, 20), generator=g)
    indices[0] = torch.arange(31, 11, -1)
    got = k.gathered(data.to(N), indices.to(index_dtype).to(N), dtype).cpu()
    expected = torch.gather(data.flatten(1), 1, indices)
    torch.testing.assert_close(got, expected.to(dtype or torch.float32))


def test_gather_flattened_refuses_an_index_past_the_data():
    indices = torch.zeros(8, 4, dtype=torch.int32)
    indices[3, 2] = -1
    with pytest.raises(Exception, match="4294967295 .partition 3, position 2. is past the 16 elements"):
        k.gathered(torch.randn(8, 16).to(N), indices.to(N), None)
