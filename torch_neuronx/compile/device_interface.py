"""Dynamo's view of the neuron device (torch._dynamo.device_interface).

Dynamo and Inductor ask a device interface for streams, events, device
properties and synchronisation when a graph touches a device; torch only
registers interfaces for its in-tree devices.
"""
from __future__ import annotations

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device


def _neuron():
    return torch.neuron


class NeuronInterface(DeviceInterface):
    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            _neuron().set_device(device)

        @staticmethod
        def current_device() -> int:
            return _neuron().current_device()

        @staticmethod
        def get_device_properties(device=None):
            return _neuron().get_device_properties(device)

    @staticmethod
    def current_device() -> int:
        return _neuron().current_device()

    @staticmethod
    def set_device(device) -> None:
        _neuron().set_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = _neuron().current_device()
        if device >= 0 and device != previous:
            _neuron().set_device(device)
        return previous

    exchange_device = maybe_exchange_device

    @staticmethod
    def device_count() -> int:
        return _neuron().device_count()

    @staticmethod
    def is_available() -> bool:
        return _neuron().is_available()

    @staticmethod
    def stream(stream):
        return _neuron().stream(stream)

    @staticmethod
    def current_stream():
        return _neuron().current_stream()

    @staticmethod
    def set_stream(stream) -> None:
        _neuron().set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _neuron().set_stream(torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return _neuron().current_stream(device_idx).stream_id

    @staticmethod
    def synchronize(device=None) -> None:
        _neuron().synchronize(device)

    @classmethod
    def get_device_properties(cls, device=None):
        return _neuron().get_device_properties(device)

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return "neuroncore-" + _neuron().get_device_properties(device).name

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device=None) -> int:
        return _neuron().memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False

    @staticmethod
    def raise_if_triton_unavailable(device=None) -> None:
        raise RuntimeError("NeuronCores do not run Triton: Inductor generates C++ kernels for neuron (docs/compile.md)")


def register() -> None:
    NeuronInterface.Event = _neuron().Event
    NeuronInterface.Stream = _neuron().Stream
    register_interface_for_device("neuron", NeuronInterface)
    for index in range(_neuron().device_count()):
        register_interface_for_device(f"neuron:{index}", NeuronInterface)
