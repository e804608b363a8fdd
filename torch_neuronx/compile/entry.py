"""Target of the `torch_dynamo_backends` entry point `neuron` (see setup.py).

Dynamo imports this module the first time a compile asks for backend="neuron";
importing it registers the device with Dynamo and Inductor as well.
"""
from __future__ import annotations

from .registration import ensure_registered

ensure_registered()

from .backend import neuron  # noqa: E402

__all__ = ["neuron"]
