"""Device-index normalisation, as torch.cuda._utils does it for "cuda"."""
from __future__ import annotations

from typing import Any

import torch


def _checked(index: int) -> int:
    # torch narrows indices to int8 further down; check before that can wrap.
    if index >= 0:
        from .. import _C

        _C._check_device(index)
    return index


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """int | str | torch.device | None -> the NeuronCore index (current if unspecified)."""
    if device is None:
        if optional:
            return torch.accelerator.current_device_index()
        raise ValueError("expected a neuron device, got None")
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type == "cpu" and allow_cpu:
            return -1
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        if device.index is None:
            return torch.accelerator.current_device_index()
        return _checked(device.index)
    if isinstance(device, int) and not isinstance(device, bool):
        return _checked(device)
    raise TypeError(f"cannot interpret {device!r} as a neuron device")
