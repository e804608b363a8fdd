"""torch.neuron: the device module of the "neuron" device, shaped like torch.cuda.

Everything torch, transformers and accelerate call on a device module is
here: availability and device selection, streams and events, RNG, memory,
AMP support and device properties.
"""
from __future__ import annotations

import threading
from typing import Any

import torch

from .. import _C
from . import _utils
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream, synchronize

__all__ = [
    "Event", "Stream", "StreamContext", "current_device", "current_stream", "default_generators",
    "default_stream", "device", "device_count", "device_of", "empty_cache", "get_amp_supported_dtype",
    "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state", "get_rng_state_all",
    "init", "initial_seed", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_accumulated_memory_stats",
    "reset_max_memory_allocated", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "synchronize",
]

_initialized = False
_init_lock = threading.Lock()


def is_available() -> bool:
    """True when at least one NeuronCore is visible. Never raises."""
    return _C._device_count() > 0


def device_count() -> int:
    """Visible logical NeuronCores (NEURON_RT_VISIBLE_CORES / NUM_CORES / LNC)."""
    return _C._device_count()


def is_initialized() -> bool:
    return _initialized


def _lazy_init() -> None:
    """Called by torch before the first neuron tensor is made."""
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        info = _C._topology()
        if not info["valid"]:
            raise RuntimeError(f"cannot initialise the neuron device: {info['error']}")
        if _C._device_count() == 0:
            raise RuntimeError("cannot initialise the neuron device: no NeuronCore is visible")
        _initialized = True


def init() -> None:
    _lazy_init()


def _is_in_bad_fork() -> bool:
    # Device memory is host memory: a forked child can keep using it.
    return False


def current_device() -> int:
    return torch.accelerator.current_device_index()


def set_device(device: Any) -> None:
    """Accepts an int, a "neuron:N" string or a torch.device."""
    index = _utils._get_device_index(device)
    if index >= 0:
        torch.accelerator.set_device_index(index)


class device:
    """Context manager that makes `device` the current NeuronCore."""

    def __init__(self, device: Any):
        self.idx = _utils._get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Makes the NeuronCore of `tensor` current (no-op for CPU tensors)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(tensor.get_device() if tensor.device.type == "neuron" else -1)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


ENGINES_PER_NEURONCORE = 4


class _DeviceProperties:
    def __init__(self, index: int):
        info = _C._topology()
        core = info["cores"][index]
        self.name = info["device_name"]
        self.platform = info["platform"]
        self.logical_nc_config = info["lnc"]
        self.logical_core_id = core["logical_id"]
        self.chip = core["chip"]
        self.physical_cores = core["physical_cores"]
        self.total_memory = core["hbm_bytes"]
        self.bf16_tflops = info["bf16_tflops_per_core"]
        # NeuronCore generation: v2 on trn1, v3 on trn2, v4 on trn3.
        self.major, self.minor = {"trn1": (2, 0), "trn2": (3, 0), "trn3": (4, 0)}.get(self.platform, (2, 0))
        # Inductor sizes work by "multiprocessors"; a NeuronCore's are its four compute
        # engines (tensor, vector, scalar, GpSimd), per physical core of the logical core.
        first, last = self.physical_cores
        self.multi_processor_count = ENGINES_PER_NEURONCORE * (last - first + 1)

    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory >> 20}MB, "
                f"logical_core_id={self.logical_core_id}, physical_cores={self.physical_cores})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    index = _utils._get_device_index(device, optional=True)
    _C._check_device(index)
    return _DeviceProperties(index)


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def __getattr__(name: str):
    # Inductor reads torch.neuron.Scheduling when it first lowers a graph for
    # the device: the moment to register neuron with Dynamo and Inductor,
    # which import torch.compile's whole stack (compile/registration.py).
    if name == "Scheduling":
        from ..compile.registration import inductor_scheduling

        return inductor_scheduling()
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")
