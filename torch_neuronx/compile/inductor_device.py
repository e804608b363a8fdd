"""What Inductor, torch.compile's default backend, is told about neuron.

Inductor cannot lower neuron graphs (docs/compile.md: it treats every device
other than "cpu" as a Triton device). Registered here so that
torch.compile(fn) on neuron tensors fails with an error that says so and
names the backend that works, instead of an internal KeyError.
"""
from __future__ import annotations

from torch._inductor.codegen.common import (
    DeviceOpOverrides,
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.wrapper import PythonWrapperCodegen

from .errors import NeuronCompileError

MESSAGE = ("torch.compile's default backend (Inductor) cannot compile graphs on neuron tensors: Inductor "
           "generates Triton-style code for every device but the CPU. Use torch.compile(..., backend=\"neuron\"), "
           "which lowers the graph with Inductor's CPU code generation and runs it on the device; for transformers' "
           "generate(), set generation_config.compile_config = CompileConfig(backend=\"neuron\").")


class RefusingScheduling:
    """The scheduling Inductor asks for when a graph holds neuron buffers."""

    @classmethod
    def get_backend_features(cls, device):
        raise NeuronCompileError(MESSAGE)

    def __init__(self, scheduler):
        raise NeuronCompileError(MESSAGE)


class _NoDeviceOps(DeviceOpOverrides):
    pass


def register() -> None:
    register_backend_for_device("neuron", RefusingScheduling, PythonWrapperCodegen)
    register_device_op_overrides("neuron", _NoDeviceOps())
