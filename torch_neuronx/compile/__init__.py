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


from .registration import ensure_registered  # noqa: E402

register = ensure_registered
