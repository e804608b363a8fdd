"""torch.compile on neuron: the `neuron` Dynamo backend and the device's Dynamo interface.

The design (host_graph.py) lowers each captured graph with Inductor's CPU code
generation and runs the generated kernels on device memory.
"""
from __future__ import annotations

from . import registration, report  # noqa: F401  registration notes the user's cache settings
from .errors import NeuronCompileError

__all__ = ["NeuronCompileError", "cache_dir", "compile_records", "compile_report", "reset_compile_report"]

compile_report = report.compile_report
compile_records = report.records
reset_compile_report = report.reset


def cache_dir() -> str:
    from .cache import cache_dir as where

    return where()


def __getattr__(name: str):
    # The backend itself (and its custom ops) loads when a compile first needs it,
    # not with the plugin: `import torch` stays light.
    if name == "neuron":
        from .backend import neuron

        return neuron
    raise AttributeError(f"module 'torch_neuronx.compile' has no attribute {name!r}")
