"""Writing through one view while reading another of the same storage: an out= or an in-place operand
over part of an input raises as on the CPU device, and views that do not overlap compute as there."""
import pytest
import torch

N = torch.device("neuron:0")


def exact(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


OVERLAPPING_OUTS = {
    "cat": lambda a: torch.cat([a[:4], a[4:8]], out=a[2:10]),
    "take": lambda a: torch.take(a, torch.tensor([0, 1, 2], device=a.device), out=a[1:4]),
    "index_select": lambda a: torch.index_select(a, 0, torch.tensor([3, 4], device=a.device), out=a[4:6]),
    "gather": lambda a: torch.gather(a, 0, torch.tensor([0, 1, 2], device=a.device), out=a[1:4]),
    # the device's own kernels for hot ops and copies
    "add_": lambda a: a[1:5].add_(a[:4]),
    "mul_": lambda a: a[1:5].mul_(a[:4]),
    "add.out": lambda a: torch.add(a[:4], a[2:6], out=a[1:5]),
    "copy_": lambda a: a[1:5].copy_(a[:4]),
    "addmm.out": lambda a: torch.addmm(a[:4].view(2, 2), a[:4].view(2, 2), a[4:8].view(2, 2), out=a[2:6].view(2, 2)),
}


@pytest.mark.parametrize("name", sorted(OVERLAPPING_OUTS))
def test_out_overlapping_an_input_view_raises_as_on_cpu(name):
    """An out= over part of an input (both views of one storage) is refused as on the CPU device: each
    view once had a CPU alias storage of its own, so the CPU kernel's overlap check saw two storages and
    wrote the values it was still reading (cat gave [0, 1, 0, 1, 2, 3, 2, 3, ...], a[1:5].add_(a[:4]) a
    running sum)."""
    run = OVERLAPPING_OUTS[name]
    with pytest.raises(RuntimeError, match="refer to a single memory location") as on_cpu:
        run(torch.arange(10.0))
    a = torch.arange(10.0, device=N)
    with pytest.raises(RuntimeError, match="refer to a single memory location") as on_neuron:
        run(a)
    assert str(on_neuron.value) == str(on_cpu.value)
    exact(a.cpu(), torch.arange(10.0))  # nothing written


def test_out_and_inputs_views_of_one_storage_without_overlap():
    """Views of one storage that do not overlap still compute, as on CPU, through the same kernels; an
    out= that must grow takes new memory for the whole storage and keeps what the other views held."""
    for device in ("cpu", N):
        a = torch.arange(12.0, device=device)
        torch.cat([a[:2], a[2:4]], out=a[6:10])
        torch.take(a[:10], torch.tensor([0, 5], device=device), out=a[10:12])
        exact(a.cpu(), torch.tensor([0.0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 0, 5]))
        grown = torch.arange(4.0, device=device)
        out = grown[4:]  # no elements, at the end of the storage: resized past it
        torch.cat([grown[:2], grown[:2]], out=out)
        exact(out.cpu(), torch.tensor([0.0, 1, 0, 1]))
        exact(grown.cpu(), torch.arange(4.0))


def test_copy_into_a_tensor_with_repeated_elements_raises_as_on_cpu():
    for source in (torch.ones(3, 4), torch.ones(3, 4, device=N)):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch.zeros(4, device=N).expand(3, 4).copy_(source)


def test_full_overlap_is_an_in_place_op_as_on_cpu():
    """An out= or in-place operand that is the very same view (full overlap) computes, as on CPU."""
    for device in ("cpu", N):
        a = torch.arange(1.0, 11.0, device=device)
        a[1:5].mul_(a[1:5])
        torch.div(a[:4], a[4:8], out=a[:4])
        expected = torch.tensor([1 / 25, 4 / 6, 9 / 7, 16 / 8, 25.0, 6.0, 7.0, 8.0, 9.0, 10.0])
        torch.testing.assert_close(a.cpu(), expected, rtol=1e-6, atol=0)
