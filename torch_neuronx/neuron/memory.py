"""torch.neuron memory API: per-core stats of the caching allocator."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from .. import _C
from ._utils import _get_device_index


def _index(device: Any) -> int:
    index = _get_device_index(device, optional=True)
    _C._check_device(index)
    return index


def memory_stats(device: Any = None) -> OrderedDict[str, Any]:
    return torch.accelerator.memory_stats(_index(device))


def memory_allocated(device: Any = None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    torch.accelerator.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the core's HBM, as torch.cuda.mem_get_info."""
    return torch.accelerator.get_memory_info(_index(device))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    _C._set_memory_fraction(float(fraction), _index(device))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    stats = memory_stats(device)
    index = _index(device)
    lines = [f"neuron:{index} memory summary ({_C._capacity(index) >> 20} MiB HBM)"]
    for key in ("allocated_bytes", "reserved_bytes", "requested_bytes"):
        lines.append(f"  {key:16s} current {stats.get(f'{key}.all.current', 0) >> 20:8d} MiB"
                     f"  peak {stats.get(f'{key}.all.peak', 0) >> 20:8d} MiB")
    lines.append(f"  allocations      {stats.get('allocation.all.current', 0)} live,"
                 f" {stats.get('num_alloc_retries', 0)} retries, {stats.get('num_ooms', 0)} OOMs")
    return "\n".join(lines)
