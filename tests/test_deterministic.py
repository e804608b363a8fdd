"""torch.use_deterministic_algorithms on neuron: with fill_uninitialized_memory (its default), new memory
holds NaN, or an integer dtype's largest value, as on CPU and CUDA."""
import pytest
import torch
import torch.utils.deterministic

N = torch.device("neuron")


@pytest.fixture
def deterministic():
    was, fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(was)
    torch.utils.deterministic.fill_uninitialized_memory = fill


FACTORIES = {
    "empty": lambda dtype: torch.empty(10, 9, device=N, dtype=dtype),
    "empty_like": lambda dtype: torch.empty_like(torch.zeros(10, 9, device=N, dtype=dtype)),
    "empty_strided": lambda dtype: torch.empty_strided((10, 9), (1, 10), device=N, dtype=dtype),
    "empty_permuted": lambda dtype: torch.empty_permuted((2, 3, 5), (1, 0, 2), device=N, dtype=dtype),
    "new_empty": lambda dtype: torch.zeros(1, device=N, dtype=dtype).new_empty((10, 9)),
    "empty(out=)": lambda dtype: torch.empty(10, 9, out=torch.zeros(1, device=N, dtype=dtype)),
}


@pytest.mark.parametrize("name", list(FACTORIES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.uint8, torch.bool])
def test_new_memory_is_filled_as_on_cpu(deterministic, name, dtype):
    got = FACTORIES[name](dtype).cpu()
    want = torch.empty(got.shape, dtype=dtype)  # the CPU device fills it in this mode
    assert torch.equal(got.isnan(), want.isnan()) and (got.isnan().all() or torch.equal(got, want)), (got, want)
    if not dtype.is_floating_point:
        assert got.eq(True if dtype == torch.bool else torch.iinfo(dtype).max).all()

