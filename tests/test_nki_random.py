"""The engines' random number generators in NKI kernels: the distributions each instruction documents,
seeding (torch.manual_seed for a launch, set_rng_seed and rand_set_state inside a kernel), state round
trips, and the hardware's rules as errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nki_random_kernels as k  # noqa: E402
from torch_neuronx.nki import NkiError


def neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def within_sigmas(observed: float, expected: float, sigma: float, sigmas: float = 6.0) -> bool:
    return abs(observed - expected) <= sigmas * sigma


def test_rng_fills_uint32_uniformly_and_torch_manual_seed_repeats_it():
    x = neuron(torch.zeros(128, 512))
    torch.manual_seed(7)
    a = k.random_bits_uint32(x).cpu().to(torch.int64)
    torch.manual_seed(7)
    b = k.random_bits_uint32(x).cpu().to(torch.int64)
    torch.manual_seed(8)
    c = k.random_bits_uint32(x).cpu().to(torch.int64)
    assert torch.equal(a, b)
    assert (a != c).float().mean() > 0.99
    u = a.double() / 2**32
    n = u.numel()
    assert within_sigmas(u.mean().item(), 0.5, math.sqrt(1 / 12 / n))
    # Each of the 32 bits is set half the time.
    for bit in (0, 1, 15, 16, 31):
        share = ((a >> bit) & 1).double().mean().item()
        assert within_sigmas(share, 0.5, math.sqrt(0.25 / n)), bit
    assert a.unique().numel() > n * 0.999  # 65,536 draws from 2^32: a handful of repeats at most


def test_rng_truncates_to_uint8_on_gpsimd():
    torch.manual_seed(0)
    out = k.random_bits_uint8_gpsimd(neuron(torch.zeros(128, 1024)))
    assert out.dtype == torch.uint8
    counts = torch.bincount(out.cpu().flatten().to(torch.int64), minlength=256).double()
    expected = out.numel() / 256
    assert counts.numel() == 256
    assert (counts - expected).abs().max().item() <= 6 * math.sqrt(expected)


def test_rng_on_a_tile_of_three_axes():
    torch.manual_seed(12)
    out = k.random_bits_uint16_3d(neuron(torch.zeros(128, 4, 256))).cpu().to(torch.int64)
    u = out.double() / 2**16
    assert within_sigmas(u.mean().item(), 0.5, math.sqrt(1 / 12 / u.numel()))
    for p in (0, 77):
        rows = {tuple(out[p, r].tolist()) for r in range(4)}
        assert len(rows) == 4, p  # a partition's rows come from its generators in turn, not restarted


def test_rand2_is_uniform_between_per_partition_bounds():
    torch.manual_seed(1)
    rows = torch.arange(128, dtype=torch.float32)
    low, high = (-rows).reshape(128, 1), (rows * 2 + 1).reshape(128, 1)
    out = k.uniform_between(neuron(torch.zeros(128, 4096)), neuron(low), neuron(high)).cpu()
    assert ((out >= low) & (out <= high)).all()
    unit = (out - low) / (high - low)
    n = unit.shape[1]
    for p in (0, 63, 127):
        assert within_sigmas(unit[p].mean().item(), 0.5, math.sqrt(1 / 12 / n)), p
        assert within_sigmas(unit[p].var().item(), 1 / 12, 0.09 / math.sqrt(n)), p


def test_rand2_with_scalar_bounds_into_bf16():
    torch.manual_seed(2)
    out = k.uniform_scalars(neuron(torch.zeros(128, 2048))).cpu().float()
    assert out.min() >= -2 and out.max() <= 3
    assert within_sigmas(out.mean().item(), 0.5, 5 * math.sqrt(1 / 12 / out.numel()))


def test_rand2_needs_neuroncore_v4():
    with pytest.raises(NkiError, match="rand2 needs NeuronCore-v4"):
        k.rand2_on_trn2(neuron(torch.zeros(128, 8)))


@pytest.mark.parametrize("rate", [0.0, 0.3, 1.0])
def test_dropout_zeroes_the_documented_share_and_keeps_the_rest(rate):
    torch.manual_seed(3)
    x = torch.rand(128, 2048) + 1.0  # no zeros of its own
    out = k.dropout_scalar(neuron(x), rate).cpu()
    dropped = out == 0
    assert torch.equal(out[~dropped], x[~dropped])  # kept values unscaled
    share = dropped.double().mean().item()
    assert within_sigmas(share, rate, math.sqrt(rate * (1 - rate) / x.numel()) + 1e-12)


def test_dropout_rate_per_partition_and_numpy_inputs():
    x = np.full((128, 1024), 2.0, dtype=np.float32)
    rates = np.repeat(np.array([0.0, 0.5, 1.0, 0.25], dtype=np.float32), 32).reshape(128, 1)
    out = k.dropout_per_partition(x, rates)
    assert isinstance(out, np.ndarray)
    share = (out == 0).mean(axis=1)
    assert set(np.unique(out)) <= {0.0, 2.0}
    for p in (0, 40, 64, 100):
        expected = rates[p, 0]
        assert within_sigmas(share[p], expected, math.sqrt(expected * (1 - expected) / 1024) + 1e-12), p


def test_dropout_of_integers_takes_a_float32_rate():
    with pytest.raises(NkiError, match="float32 probability"):
        k.dropout_integer_with_bf16_rate(neuron(torch.ones(128, 16, dtype=torch.int32)),
                                         neuron(torch.full((128, 1), 0.5, dtype=torch.bfloat16)))


def test_rand_set_state_then_get_state_and_rng_repeat():
    seeds = torch.randint(1, 2**31, (128, 6), generator=torch.Generator().manual_seed(4)).to(torch.uint32)
    first, state, again = k.gpsimd_state_round_trip(neuron(seeds))
    assert torch.equal(state.cpu().to(torch.int64), seeds.to(torch.int64))
    assert torch.equal(first.cpu().to(torch.int64), again.cpu().to(torch.int64))
    # The state, not the launch, decides: another torch seed gives the same bits.
    torch.manual_seed(99)
    other, _, _ = k.gpsimd_state_round_trip(neuron(seeds))
    assert torch.equal(other.cpu().to(torch.int64), first.cpu().to(torch.int64))
    # Lanes given different states draw different bits.
    assert not torch.equal(first.cpu()[0], first.cpu()[1])


def test_vector_state_saved_and_restored_on_trn3():
    first, again = k.vector_state_saved_and_restored(neuron(torch.zeros(128, 100)))
    assert torch.equal(first.cpu().to(torch.int64), again.cpu().to(torch.int64))


def test_state_rules_of_each_generation():
    with pytest.raises(NkiError, match="gpsimd engine, not vector"):
        k.vector_state_on_trn2(neuron(torch.zeros(128, 4)))  # NeuronCore-v3 keeps states on GpSimd only
    with pytest.raises(NkiError, match=r"\[partitions, 6\] uint32"):
        k.state_of_wrong_width(neuron(torch.zeros(128, 4)))
    with pytest.raises(NkiError, match="rng writes an integer tile"):
        k.rng_into_float(neuron(torch.zeros(128, 4)))


def test_seed_in_the_kernel_overrides_the_launch_seed():
    seed = neuron(torch.tensor([[1234]], dtype=torch.int32))
    torch.manual_seed(5)
    a, b = k.seeded_twice(seed)
    torch.manual_seed(6)
    c, _ = k.seeded_twice(seed)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(a.cpu(), c.cpu())
    assert 0 <= a.min().item() and a.max().item() < 1
    other, _ = k.seeded_twice(neuron(torch.tensor([[1235]], dtype=torch.int32)))
    assert not torch.equal(other.cpu(), a.cpu())


def test_beta_api_seed_number_and_dropout():
    x = neuron(torch.full((128, 512), 3.0))
    torch.manual_seed(10)
    a = k.beta_seeded_dropout(x).cpu()
    torch.manual_seed(11)
    b = k.beta_seeded_dropout(x).cpu()
    assert torch.equal(a, b)  # seeded from the kernel's number, whatever the launch
    assert within_sigmas((a == 0).double().mean().item(), 0.5, math.sqrt(0.25 / a.numel()))


def test_device_print_prints_each_tile_as_the_run_reaches_it(capsys):
    x = torch.arange(256 * 3, dtype=torch.float32).reshape(256, 3) / 8
    out = k.print_tiles(neuron(x))
    assert torch.equal(out.cpu(), x)  # printing changes nothing
    lines = capsys.readouterr().out
    printed = [block for block in lines.split("\n") if block.startswith(("input:", "tile:", "bf16:"))]
    assert [p.split(":")[0] for p in printed] == ["input", "tile", "bf16", "tile", "bf16"]
    # The printed values are the tiles' (NumPy's own formatting of the same arrays).
    assert str(x[:128].numpy()).split("\n")[0] in lines
    assert str(x[128:].numpy()).split("\n")[-1] in lines
    assert str(x.numpy()).split("\n")[0] in lines
    # A second call prints again: the print is part of the program, not of its tracing.
    k.print_tiles(neuron(x))
    assert capsys.readouterr().out.count("tile:") == 2
