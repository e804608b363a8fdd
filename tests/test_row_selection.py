"""where(mask, scalar, rows) and argmax over rows: the device's row loops (aten/ops/RowSelection.cpp)
against the CPU device, including the forms that keep the CPU kernel."""
import math

import pytest
import torch

N = torch.device("neuron")


def exact(got, want):
    assert got.device.type == "neuron"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("fill_first", [True, False])
def test_where_with_a_scalar_and_a_broadcast_mask(dtype, fill_first):
    g = torch.Generator().manual_seed(0)
    scores = (torch.randn(8, 32000, generator=g) * 50).to(dtype)
    mask = torch.rand(32000, generator=g) > 0.7
    fill = True if dtype == torch.bool else (-math.inf if dtype.is_floating_point else -7)
    args = (mask, fill, scores) if fill_first else (mask, scores, fill)
    exact(torch.where(args[0].to(N), *(a.to(N) if isinstance(a, torch.Tensor) else a for a in args[1:])),
          torch.where(*args))


def test_where_fill_converts_as_the_cpu_kernel_converts_it():
    mask = torch.arange(4096) % 3 == 0
    rows = torch.randn(2, 3, 4096).to(torch.bfloat16)
    for fill in (1.0009765625, 3.4e38, torch.tensor(2.5, dtype=torch.float64), torch.tensor(-1.5).to(N)):
        cpu_fill = fill.cpu() if isinstance(fill, torch.Tensor) else fill
        exact(torch.where(mask.to(N), fill, rows.to(N)), torch.where(mask, cpu_fill, rows))


@pytest.mark.filterwarnings("ignore:where received a uint8 condition")
@pytest.mark.parametrize("case", ["promotes", "mask_not_trailing", "short_rows", "strided", "byte_mask",
                                  "two_tensors", "mask_with_leading_one"])
def test_where_other_forms_keep_the_cpu_kernels_answer(case):
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(4, 2048, generator=g)
    mask = torch.rand(2048, generator=g) > 0.5
    fill = -math.inf
    if case == "promotes":
        scores = torch.randint(0, 9, (4, 2048), generator=g)  # int values, float fill: a float result
    elif case == "mask_not_trailing":
        mask = torch.rand(4, 1, generator=g) > 0.5
    elif case == "short_rows":
        scores, mask = scores[:, :16].contiguous(), mask[:16]
    elif case == "strided":
        scores = torch.randn(2048, 4, generator=g).t()
    elif case == "two_tensors":
        fill = torch.zeros(4, 2048)
    elif case == "mask_with_leading_one":
        mask = mask[None]
    elif case == "byte_mask":
        mask = mask.to(torch.uint8)  # deprecated (a warning), still a condition
    n_fill = fill.to(N) if isinstance(fill, torch.Tensor) else fill
    exact(torch.where(mask.to(N), n_fill, scores.to(N)), torch.where(mask, fill, scores))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_argmax_over_rows(dtype):
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(8, 32000, generator=g).to(dtype)
    scores[1, 31999] = 100  # the last element
    scores[2, :] = -math.inf  # nothing but -inf: index 0
    scores[3, [5, 700, 20000]] = 90  # ties: the first
    scores[4, [9000, 12]] = math.nan  # NaN wins, the first NaN
    scores[5, 3] = math.inf
    scores[5, 40] = math.nan
    scores[6, 17] = -0.0
    scores[6, :] = 0.0  # +0.0 and -0.0 tie: the first
    for dim, keepdim in ((-1, False), (1, True), (None, False), (None, True)):
        exact(torch.argmax(scores.to(N), dim=dim, keepdim=keepdim), torch.argmax(scores, dim=dim, keepdim=keepdim))
    three = scores.reshape(2, 4, 32000)
    exact(three.to(N).argmax(-1), three.argmax(-1))


def test_argmax_other_forms_keep_the_cpu_kernels_answer():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 2048, generator=g)
    exact(x.to(N).argmax(0), x.argmax(0))  # not the last dim
    exact(x.t().to(N).argmax(-1), x.t().argmax(-1))  # to(N) keeps the transpose's strides
    ints = torch.randint(0, 1000, (4, 4096), generator=g)
    exact(ints.to(N).argmax(-1), ints.argmax(-1))
    exact(x[:, :8].to(N).argmax(-1), x[:, :8].argmax(-1))
    with pytest.raises(IndexError, match="out of range"):
        x.to(N).argmax(2)
    with pytest.raises(IndexError, match="non-zero size"):
        torch.empty(3, 0).to(N).argmax(-1)


@pytest.mark.parametrize("level", ["scalar", "avx2"])
def test_row_loops_under_each_simd_level(level):
    """The tests above in a fresh process at a lower SIMD level than this CPU's (TORCH_NEURONX_SIMD): each
    level runs its own compilation of the row loops (AVX-512 runs in the process above, when the CPU has it)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_NEURONX_SIMD=level)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not simd_level"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
