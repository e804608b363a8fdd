"""transformers' device spec for neuron (read by transformers.testing_utils when
TRANSFORMERS_TEST_DEVICE_SPEC names this file): the device's name and the functions the
test suite calls for seeding, emptying the cache and counting devices."""
import torch

import torch_neuronx  # noqa: F401  (registers torch.neuron where autoloading is off)

DEVICE_NAME = "neuron"


def MANUAL_SEED_FN(seed: int) -> None:  # noqa: N802 (the name transformers looks up)
    # The host generator as well: tests draw inputs on the CPU and move them to the device.
    torch.manual_seed(seed)
    torch.neuron.manual_seed_all(seed)


EMPTY_CACHE_FN = torch.neuron.empty_cache
DEVICE_COUNT_FN = torch.neuron.device_count
