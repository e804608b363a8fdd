"""The `neuron` torch.compile backend: static shapes, a disk cache, explained recompiles.

    torch.compile(model, backend="neuron")

Each graph Dynamo captures is compiled for the concrete shapes of its first
call, as the Neuron compiler does; a new shape is a new graph, counted and
explained in `torch_neuronx.compile_report()`. Compiled graphs are kept in
TORCH_NEURONX_NEFF_CACHE_DIR, so a later process loads rather than compiles.
"""
from __future__ import annotations

import os
import time
import warnings

import torch
import torch.fx

from .. import _C
from . import attention, cache, host_graph, loss, report, vector_isa
from .errors import NeuronCompileError

describe = report.describe


def _symbolic_inputs(gm: torch.fx.GraphModule) -> list[str]:
    names = []
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("example_value")
        if isinstance(value, torch.SymInt) or (
                isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape)):
            names.append(node.name)
    return names


def _frame_name() -> str:
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        return InstructionTranslator.current_tx().f_code.co_name
    except Exception:  # noqa: BLE001 - only a label for the report
        return "graph"


def _fallback_requested(options: dict) -> bool:
    if "fallback_to_eager" in options:
        return bool(options["fallback_to_eager"])
    return os.environ.get("TORCH_NEURONX_COMPILE_FALLBACK", "") == "eager"


def neuron(gm: torch.fx.GraphModule, example_inputs, mode: str | None = None, options: dict | None = None):
    """The Dynamo backend behind backend="neuron"."""
    options = dict(options or {})
    unknown = set(options) - {"fallback_to_eager"}
    if unknown:
        raise NeuronCompileError(f"unknown neuron backend options {sorted(unknown)}; known: ['fallback_to_eager']")
    compile_id = torch._guards.CompileContext.current_compile_id()
    frame = str(compile_id) if compile_id else "?"
    name = _frame_name()
    dynamo_reason = report.latest_guard_failure()
    symbolic = _symbolic_inputs(gm)
    first_compile = compile_id is None or compile_id.frame_compile_id == 0
    if symbolic and first_compile:
        raise NeuronCompileError(
            f"graph '{name}' has dynamic shapes (inputs {', '.join(symbolic)}), and the neuron backend compiles "
            "static shapes only, as the Neuron compiler does. Call torch.compile without dynamic=True "
            "(and without torch._dynamo.mark_dynamic); each new shape then compiles its own graph.")
    return _StaticGraphs(gm, name, frame, mode, _fallback_requested(options), dynamo_reason, bool(symbolic))


class _StaticGraphs:
    """A captured graph, compiled once per concrete input signature."""

    def __init__(self, gm, name, frame, mode, fallback, dynamo_reason, symbolic):
        self.gm = gm
        self.name = name
        self.frame = frame
        self.mode = mode
        self.fallback = fallback
        self.dynamo_reason = dynamo_reason
        self.symbolic = symbolic  # Dynamo generalised a shape: specialise per call
        self.output_devices = host_graph.output_devices(gm)
        self.host_graphs: dict[bool, torch.fx.GraphModule] = {}  # by "inference"
        self.compiled: dict[tuple, object] = {}
        self.last_signature: list[str] | None = None

    def __call__(self, *args):
        key = self._shape_key(args) if self.symbolic else ()
        run = self.compiled.get(key)
        if run is None:
            run = self.compiled[key] = self._compile(args)
        return run(args)

    @staticmethod
    def _shape_key(args) -> tuple:
        return tuple(tuple(a.shape) + tuple(a.stride()) if isinstance(a, torch.Tensor) else a for a in args)

    def _compile(self, args):
        signature = [describe(a) for a in args]
        reason = self.dynamo_reason
        if self.last_signature is not None:
            change = report.explain_change(self.last_signature, signature)
            reason = f"{change} (static shapes: one graph per input shape)"
        elif self.dynamo_reason and self.symbolic:
            reason = f"{self.dynamo_reason} (compiled again for these static shapes)"
        self.last_signature = signature
        record = report.add(report.CompiledGraph(self.name, self.frame, signature, recompile_reason=reason))
        started = time.perf_counter()
        try:
            run = self._compile_on_host(args, signature, record)
        except Exception as error:  # noqa: BLE001 - reported, then raised or replaced by eager
            record.error = f"{type(error).__name__}: {error}"
            if not self.fallback:
                raise NeuronCompileError(
                    f"the neuron backend could not compile graph '{self.name}' (compile id {self.frame}, "
                    f"{len(self.gm.graph.nodes)} nodes, inputs {', '.join(signature)}): {record.error}. "
                    "Set TORCH_NEURONX_COMPILE_FALLBACK=eager (or options={'fallback_to_eager': True}) "
                    "to run such graphs eagerly instead.") from error
            warnings.warn(f"neuron backend: graph '{self.name}' runs eagerly, its compile failed: {record.error}")
            record.source = "eager fallback"
            run = self._run_eagerly
        record.compile_seconds = time.perf_counter() - started
        return run

    def _run_eagerly(self, args):
        return self.gm(*args)

    def _compile_on_host(self, args, signature, record):
        from torch._dynamo.utils import counters
        from torch._inductor import list_mode_options
        from torch._inductor.compile_fx import compile_fx
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        device = _device_index(args, self.gm)
        differentiable = torch.is_grad_enabled() and any(args[i].requires_grad for i in tensor_positions)
        if differentiable not in self.host_graphs:
            self.host_graphs[differentiable] = host_graph.to_host_graph(self.gm, inference=not differentiable)
        host_gm = self.host_graphs[differentiable]
        key = cache.graph_key(host_gm.code, "|".join(signature) + f"|grad={differentiable}", str(self.mode))
        entry = cache.lookup(key)

        host_args, _, _ = host_graph.bridge_inputs(args, tensor_positions, differentiable=False)
        # Inductor's caches need a shape environment, even for static shapes.
        fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
        for i in tensor_positions:
            host = host_args[i].detach().requires_grad_(args[i].requires_grad)
            host_args[i] = fake_mode.from_tensor(host, static_shapes=True)
        # CUDA graphs (reduce-overhead) have no CPU meaning; the rest of a mode applies.
        mode_options = list_mode_options(self.mode) if self.mode not in (None, "default") else {}
        patches = {k: v for k, v in mode_options.items() if not k.startswith("triton.")}
        patches.update(vector_isa.inductor_patches())
        # The AOT autograd cache skips graphs calling functions it does not know;
        # our attention lowering is versioned with the package.
        patches["unsafe_marked_cacheable_functions"] = {
            f"{attention.__name__}.scaled_dot_product_attention": torch_neuronx_version(),
            f"{loss.__name__}.cross_entropy": torch_neuronx_version()}
        misses_before = counters["inductor"]["fxgraph_cache_miss"]
        with cache.inductor_artifacts_here(), torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
            compiled = compile_fx(host_gm, host_args, config_patches=patches)
        kernels_compiled = counters["inductor"]["fxgraph_cache_miss"] > misses_before

        if entry is not None and not kernels_compiled:
            record.source = "disk cache"
            entry["hits"] = entry.get("hits", 0) + 1
        else:
            entry = {"graph": self.name, "signature": signature, "hits": 0, "created": cache.now()}
        record.cache_hits = entry["hits"]
        cache.record(key, entry)

        output_devices = self.output_devices

        def run(call_args):
            grad = torch.is_grad_enabled() and differentiable
            host, tensors, views = host_graph.bridge_inputs(call_args, tensor_positions, grad)
            with _C._KernelScope(device):
                outputs = compiled(*host)
            return host_graph.bridge_outputs(outputs, output_devices, device, tensors, views)

        return run


def torch_neuronx_version() -> str:
    from .. import __version__

    return __version__


def _device_index(args, gm) -> int:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "neuron":
            return a.device.index
    for node in gm.graph.nodes:
        for value in list(node.args) + list(node.kwargs.values()):
            if isinstance(value, torch.device) and value.type == "neuron" and value.index is not None:
                return value.index
    return torch.neuron.current_device()
