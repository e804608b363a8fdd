"""torch.neuron RNG: one generator per NeuronCore; random ops on a core draw from it."""
from __future__ import annotations

from typing import Any

import torch

from .. import _C
from ._utils import _get_device_index


class _DefaultGenerators:
    """Lazy tuple-like view of the per-core default generators (torch.cuda.default_generators)."""

    def __init__(self):
        self._cache: dict[int, torch.Generator] = {}

    def __getitem__(self, index: int) -> torch.Generator:
        if index < 0:
            index += len(self)
        if index not in self._cache:
            self._cache[index] = _C._default_generator(index)
        return self._cache[index]

    def __len__(self) -> int:
        return _C._device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device: Any) -> torch.Generator:
    return default_generators[_get_device_index(device, optional=True)]


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    first = _generator(0)
    first.seed()
    for generator in list(default_generators)[1:]:
        generator.manual_seed(first.initial_seed())


def initial_seed() -> int:
    return _generator(None).initial_seed()


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _generator(device).set_state(new_state.clone() if new_state.device.type == "cpu" else new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [generator.get_state() for generator in default_generators]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
