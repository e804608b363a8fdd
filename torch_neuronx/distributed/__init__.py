"""The "neuron" torch.distributed backend: collectives between ranks on one host.

Registered when the plugin loads, so `init_process_group("neuron")`, and
`init_process_group()` with no backend when the accelerator is neuron, give a
process group whose neuron (and CPU) tensors move through shared memory. The
backend itself is C++ (distributed/ in the repository); see docs/distributed.md.
"""
from __future__ import annotations

from datetime import timedelta

import torch

BACKEND_NAME = "neuron"

_registered = False


def is_available() -> bool:
    """True when torch has distributed support and the C++ backend was built into the plugin."""
    from .. import _C

    return torch.distributed.is_available() and hasattr(_C, "_NeuronBackend")


def _create_backend(store, rank: int, world_size: int, timeout: timedelta):
    """The creator torch calls for each process group (register_backend's non-extended form)."""
    from .. import _C

    return _C._NeuronBackend(store, rank, world_size, timeout)


def register() -> None:
    """Registers the backend with torch.distributed; a no-op when torch lacks distributed."""
    global _registered
    if _registered or not is_available():
        return
    _registered = True
    backend = torch.distributed.Backend
    if BACKEND_NAME in backend.backend_list:
        return  # already registered, e.g. by an earlier import of another copy
    # "cpu" too: object collectives and CPU tensors in a "neuron" group use this
    # backend. The default backend for CPU-only groups stays gloo (torch keeps an
    # existing default_device_backend_map entry).
    backend.register_backend(BACKEND_NAME, _create_backend, devices=["neuron", "cpu"])
