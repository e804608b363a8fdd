"""The neuron device's post-grad pass: where Inductor's lowerings would give neuron other results than the CPU.

Inductor lowers a neuron graph with its CPU code generation, but some
lowerings test `device.type == "cpu"` and take a GPU-minded path otherwise.
Two of those change results; this pass rewrites the graph so that they take
what the CPU takes (docs/compile.md lists the ones that differ within an ulp):

- argmax/argmin over the whole of a non-contiguous tensor (dim=None): the
  non-CPU lowering returns the index in memory order, not the logical index;
  the pass reduces a contiguous, flattened copy instead, whose single reduced
  dimension is the logical index.
- bf16/fp16 add and sub of a Python scalar: the CPU rounds the scalar to the
  tensor's dtype first, as eager does; the other lowering keeps it in fp32.
"""
from __future__ import annotations

import torch
import torch.fx
from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

aten = torch.ops.aten

_WHOLE_TENSOR_ARG_REDUCTIONS = (aten.argmax.default, aten.argmin.default)
_SCALAR_ROUNDING_OPS = (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar)
_ROUNDED_DTYPES = (torch.bfloat16, torch.float16)


def _value(node) -> object:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def _flattened_argument_reductions(graph: torch.fx.Graph) -> int:
    changed = 0
    for target in _WHOLE_TENSOR_ARG_REDUCTIONS:
        for node in graph.find_nodes(op="call_function", target=target):
            source = node.args[0]
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
            value = _value(source)
            if dim is not None or not isinstance(value, torch.Tensor) or value.is_contiguous() or value.dim() < 2:
                continue
            # One reduced dimension holds the logical index whatever the order Inductor loops in.
            contiguous = value.clone(memory_format=torch.contiguous_format)
            flat = contiguous.view(-1)
            result = _value(node)
            with graph.inserting_before(node):
                copy = graph.call_function(aten.clone.default, (source,), {"memory_format": torch.contiguous_format})
                vector = graph.call_function(aten.view.default, (copy, [-1]))
                index = graph.call_function(target, (vector, 0, False))
                shaped = graph.call_function(aten.view.default, (index, list(result.shape))) if keepdim else index
            for new, val in ((copy, contiguous), (vector, flat), (index, target(flat, 0, False))):
                new.meta = {**node.meta, "val": val}
            if keepdim:
                shaped.meta = dict(node.meta)
            node.replace_all_uses_with(shaped)
            graph.erase_node(node)
            changed += 1
    return changed


def _is_scalar(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rounded_scalars(graph: torch.fx.Graph) -> int:
    changed = 0
    for target in _SCALAR_ROUNDING_OPS:
        for node in graph.find_nodes(op="call_function", target=target):
            tensors = [_value(a) for a in node.args[:2] if isinstance(_value(a), torch.Tensor)]
            if not tensors or tensors[0].dtype not in _ROUNDED_DTYPES:
                continue
            dtype = tensors[0].dtype
            args = tuple(torch.tensor(a, dtype=dtype).item() if i < 2 and _is_scalar(a) else a
                         for i, a in enumerate(node.args))
            if args != node.args:
                node.args = args
                changed += 1
    return changed


class NeuronPostGradPass(CustomGraphModulePass):
    """Runs on every post-grad graph that holds neuron tensors (Inductor's device_custom_pass)."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        changed = _flattened_argument_reductions(gm.graph) + _rounded_scalars(gm.graph)
        if changed:
            gm.graph.lint()
            gm.recompile()

    def uuid(self) -> bytes:
        # The generated code also depends on the device's scheduling and wrapper.
        from . import inductor_device

        return get_hash_for_files((__file__, inductor_device.__file__))
