"""torch.compile on neuron: the `neuron` Dynamo backend and the device's Dynamo interface.

The design (host_graph.py) lowers each captured graph with Inductor's CPU code
generation and runs the generated kernels on device memory.
"""
from __future__ import annotations

from . import report
from .backend import NeuronCompileError, neuron
from .cache import cache_dir

__all__ = ["NeuronCompileError", "cache_dir", "compile_records", "compile_report", "reset_compile_report"]

compile_report = report.compile_report
compile_records = report.records
reset_compile_report = report.reset


def register() -> None:
    from torch._dynamo import register_backend

    from . import device_interface, inductor_device

    device_interface.register()
    inductor_device.register()
    register_backend(neuron, name="neuron")
