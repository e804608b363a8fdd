"""neuron as an Inductor device: what torch.compile's default backend uses on neuron tensors.

    torch.compile(model)          # Inductor, no backend named

Inductor lowers a neuron graph as it lowers a CPU graph (C++/OpenMP kernels,
extern GEMMs, ATen fallbacks) and runs it on device memory, which the
emulated NeuronCore makes host-addressable: the generated wrapper allocates
its buffers on the neuron device, hands their addresses to the C++ kernels,
and calls the device's own eager kernels for everything it does not fuse
(GEMMs take the device's decode kernels, attention its decode attention).

Three facts of torch 2.14 shape this module (docs/compile.md):
- Inductor picks kernel code generation by the device type of the graph's
  current device (`torch._inductor.utils.get_current_backend`), so the
  scheduling below generates kernels with the CPU as current device;
- `Scheduler._try_reindex_pointwise_for_reduction` runs for every device but
  the CPU and cannot handle C++ loop groups; Inductor's own setting
  `loop_reindexing_after_fusion` turns it off (see `register()`);
- lowerings that test `device.type == "cpu"` for results are corrected by the
  device's post-grad pass (device_passes.py).
"""
from __future__ import annotations

import contextlib
import os

import torch
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.virtualized import V

from . import device_passes, report

_HOST = torch.device("cpu")


@contextlib.contextmanager
def _host_is_current():
    """Kernel generation as for the CPU; buffers and calls keep their neuron device."""
    graph = V.graph
    prior = graph.current_device
    graph.current_device = _HOST
    try:
        yield
    finally:
        graph.current_device = prior


class NeuronScheduling(CppScheduling):
    """Inductor's C++ scheduling, generating its kernels as it does for the CPU."""

    def codegen_node(self, node):
        with _host_is_current():
            return super().codegen_node(node)

    def codegen_template(self, *args, **kwargs):
        with _host_is_current():
            return super().codegen_template(*args, **kwargs)

    def flush(self):
        with _host_is_current():
            return super().flush()


class NeuronWrapperCodegen(PythonWrapperCodegen):
    """Inductor's Python wrapper, which also tells compile_report() that the graph was loaded.

    The line sits in the module's header, so it runs whenever the module is
    loaded: after a fresh compile and after a hit in Inductor's caches alike.
    """

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return NeuronWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        report.lowering_started()
        context = torch._guards.TracingContext.try_get()
        name = getattr(context, "aot_graph_name", None) or "graph"
        name = "_".join(name) if isinstance(name, list) else str(name)
        signature = [report.describe(value) for value in V.graph.example_inputs or ()]
        self.header.writeline("from torch_neuronx.compile import report as _neuron_report")
        self.header.writeline(f"_neuron_report.inductor_graph_loaded({name!r}, {signature!r})")

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        # Inductor writes device='neuron' and relies on a device guard around the call, which it
        # emits only for GPU types: name the core, so a graph on neuron:1 allocates on neuron:1.
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == "neuron" and device.index is not None:
            line = line.replace("device='neuron'", f"device='neuron:{device.index}'", 1)
        return line


class NeuronDeviceOpOverrides(CpuDeviceOpOverrides):
    """What the generated wrapper writes for device switches: the kernels themselves run synchronously."""

    def set_device(self, device_idx) -> str:
        return f"torch.neuron.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.neuron.synchronize()"

    def device_guard(self, device_idx) -> str:
        return f"torch.neuron.device({device_idx})"


def set_unless_user_chose(name: str, value, env: str) -> None:
    """Sets Inductor's config `name` unless the user set it, in code or through `env`.

    The env check is separate: Inductor reads these variables into plain
    defaults, so its config module does not count them as the user's choice.
    """
    from torch._inductor import config

    if env in os.environ or not config._is_default(name):
        return
    setattr(config, name, value)


def register() -> None:
    register_backend_for_device("neuron", NeuronScheduling, NeuronWrapperCodegen, CppWrapperCpu,
                                device_custom_pass=device_passes.NeuronPostGradPass())
    register_device_op_overrides("neuron", NeuronDeviceOpOverrides())
    # Process-wide, as Inductor has one setting for every device: nothing changes for CPU graphs
    # (the reindexing never runs for them); CUDA and XPU graphs of the process fuse without it.
    set_unless_user_chose("loop_reindexing_after_fusion", False, "TORCHINDUCTOR_LOOP_REINDEXING_AFTER_FUSION")
    report.watch_compiles()
