"""Random numbers on neuron: seeding, state, explicit generators, per-core independence."""
import pytest
import torch
import torch.nn.functional as F

from conftest import requires_two_devices

N = "neuron"


def _draw_all():
    """One of every random op on the current core, returned on the CPU."""
    p = torch.full((64,), 0.3, device=N)
    return [
        torch.randn(50, device=N),
        torch.rand(50, device=N),
        torch.randint(0, 1000, (50,), device=N),
        torch.empty(50, device=N).normal_(2.0, 3.0),
        torch.empty(50, device=N).uniform_(-1, 1),
        torch.bernoulli(p),
        F.dropout(torch.ones(64, device=N), p=0.5, training=True),
        torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4], device=N), 30, replacement=True),
        torch.multinomial(torch.ones(20, device=N), 10, replacement=False),
        torch.randperm(40, device=N),
        torch.randn(8, device=N, dtype=torch.bfloat16),
    ]


def _assert_same(xs, ys):
    for i, (x, y) in enumerate(zip(xs, ys)):
        assert x.device.type == "neuron"
        assert torch.equal(x.cpu(), y.cpu()), f"draw {i} differs"


def _assert_different(xs, ys):
    # every op with many outcomes must differ (bernoulli/dropout masks of 64 could in theory match)
    for i in (0, 1, 2, 3, 4, 9):
        assert not torch.equal(xs[i].cpu(), ys[i].cpu()), f"draw {i} did not change with the seed"


def test_manual_seed_reproduces_every_random_op():
    torch.manual_seed(1234)
    first = _draw_all()
    torch.manual_seed(1234)
    second = _draw_all()
    _assert_same(first, second)
    torch.manual_seed(4321)
    _assert_different(first, _draw_all())


def test_random_values_are_sane():
    torch.manual_seed(0)
    r = torch.rand(4000, device=N).cpu()
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean().item() - 0.5) < 0.05
    n = torch.randn(4000, device=N).cpu()
    assert abs(n.mean().item()) < 0.1 and abs(n.std().item() - 1) < 0.1
    i = torch.randint(3, 7, (1000,), device=N).cpu()
    assert set(i.unique().tolist()) == {3, 4, 5, 6}
    perm = torch.randperm(100, device=N).cpu()
    assert sorted(perm.tolist()) == list(range(100))
    m = torch.multinomial(torch.tensor([0.0, 1.0, 0.0], device=N), 5, replacement=True).cpu()
    assert m.tolist() == [1] * 5
    d = F.dropout(torch.ones(4000, device=N), p=0.25, training=True).cpu()
    assert set(d.unique().tolist()) <= {0.0, torch.tensor(1 / 0.75).item()}
    assert abs((d == 0).float().mean().item() - 0.25) < 0.05


def test_neuron_seed_functions():
    torch.neuron.manual_seed(77)
    assert torch.neuron.initial_seed() == 77
    a = torch.randn(20, device=N)
    torch.neuron.manual_seed(77)
    assert torch.equal(a, torch.randn(20, device=N))
    torch.neuron.manual_seed_all(78)
    assert torch.neuron.initial_seed() == 78
    torch.neuron.seed()
    s1 = torch.neuron.initial_seed()
    torch.neuron.seed()
    s2 = torch.neuron.initial_seed()
    assert s1 != s2  # non-deterministic seeds
    torch.manual_seed(99)  # torch.manual_seed seeds the neuron generators too
    assert torch.neuron.initial_seed() == 99
    assert torch.neuron.default_generators[0].initial_seed() == 99


def test_dropout_draws_from_the_neuron_generator():
    """Dropout on neuron must depend on the neuron seed only, not on the CPU generator."""
    def mask():
        return F.dropout(torch.ones(256, device=N), p=0.5, training=True).cpu()

    torch.neuron.manual_seed(1)
    torch.random.default_generator.manual_seed(5)
    a = mask()
    torch.neuron.manual_seed(1)
    torch.random.default_generator.manual_seed(6)  # only the CPU generator changes
    b = mask()
    torch.neuron.manual_seed(2)
    torch.random.default_generator.manual_seed(5)  # only the neuron generator changes
    c = mask()
    assert torch.equal(a, b), "dropout on neuron followed the CPU generator"
    assert not torch.equal(a, c), "dropout on neuron ignored the neuron generator"


def test_get_set_rng_state_restores_sequence():
    torch.neuron.manual_seed(5)
    torch.randn(3, device=N)
    state = torch.neuron.get_rng_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    a = _draw_all()
    torch.neuron.set_rng_state(state)
    _assert_same(a, _draw_all())
    # the state of neuron:0 by device argument
    s0 = torch.neuron.get_rng_state("neuron:0")
    assert torch.equal(s0, torch.neuron.get_rng_state())


@requires_two_devices
def test_get_set_rng_state_all():
    torch.neuron.manual_seed_all(11)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    draws = [torch.randn(10, device=f"neuron:{i}") for i in range(2)]
    torch.neuron.set_rng_state_all(states)
    again = [torch.randn(10, device=f"neuron:{i}") for i in range(2)]
    for x, y in zip(draws, again):
        assert torch.equal(x.cpu(), y.cpu())


def test_explicit_generator_is_honoured():
    g1 = torch.Generator(device=N)
    g2 = torch.Generator(device=N)
    assert g1.device.type == "neuron"
    g1.manual_seed(2024)
    g2.manual_seed(2024)
    torch.manual_seed(2024)  # the default generator with the same seed, then advanced
    torch.randn(7, device=N)
    a = torch.randn(30, device=N, generator=g1)
    b = torch.randn(30, device=N, generator=g2)
    assert torch.equal(a, b)
    torch.manual_seed(1)
    default = torch.randn(30, device=N)
    assert not torch.equal(a, default)
    # the generator advanced; the default generator did not move it
    torch.manual_seed(2024)
    c = torch.randn(30, device=N, generator=g1)
    assert not torch.equal(a, c)
    g1.manual_seed(2024)
    assert torch.equal(torch.randn(30, device=N, generator=g1), a)
    # other ops take it too
    g1.manual_seed(3)
    g2.manual_seed(3)
    for f in (lambda g: torch.rand(9, device=N, generator=g),
              lambda g: torch.randint(0, 100, (9,), device=N, generator=g),
              lambda g: torch.randperm(25, device=N, generator=g),
              lambda g: torch.empty(9, device=N).normal_(generator=g),
              lambda g: torch.bernoulli(torch.full((40,), 0.5, device=N), generator=g),
              lambda g: torch.multinomial(torch.ones(10, device=N), 5, generator=g)):
        assert torch.equal(f(g1), f(g2))
    # the generator's state round-trips
    st = g1.get_state()
    x = torch.rand(5, device=N, generator=g1)
    g1.set_state(st)
    assert torch.equal(torch.rand(5, device=N, generator=g1), x)


def test_cpu_generator_rejected_for_neuron_op():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(RuntimeError):
        torch.randn(4, device=N, generator=g)
    assert torch.randn(4, device=N).device.type == "neuron"


@requires_two_devices
def test_per_device_generators_are_independent():
    torch.neuron.manual_seed_all(10)
    ref0 = torch.randn(20, device="neuron:0")
    torch.neuron.manual_seed_all(10)
    with torch.neuron.device(1):
        torch.neuron.manual_seed(999)
        assert torch.neuron.initial_seed() == 999
        torch.randn(100, device="neuron:1")
    assert torch.neuron.initial_seed() == 10
    assert torch.equal(torch.randn(20, device="neuron:0"), ref0)
    # and draws on neuron:1 use neuron:1's generator, not neuron:0's
    torch.neuron.manual_seed_all(10)
    on1 = torch.randn(20, device="neuron:1")
    assert torch.equal(on1.cpu(), ref0.cpu())  # same seed, same sequence
    torch.neuron.manual_seed_all(10)
    torch.randn(20, device="neuron:1")
    assert torch.equal(torch.randn(20, device="neuron:0"), ref0)  # neuron:0 untouched
    g1 = torch.neuron.default_generators[1]
    assert g1.device == torch.device("neuron:1")


def test_fork_rng_restores():
    torch.manual_seed(8)
    expected = torch.randn(10, device=N)
    torch.manual_seed(8)
    with torch.random.fork_rng(device_type="neuron"):
        torch.randn(1000, device=N)
        torch.neuron.manual_seed(12345)
        torch.rand(3, device=N)
    assert torch.equal(torch.randn(10, device=N), expected)
