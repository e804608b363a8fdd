"""Running a compiled graph on device memory.

A graph captured on neuron tensors is rewritten to the CPU device (every
`neuron` device constant becomes `cpu`), compiled by Inductor's CPU pipeline,
and run on zero-copy CPU views of the neuron inputs. Its buffers are
allocated inside a kernel-memory scope, so they are device memory of the
core; its results come back as neuron tensors over the same bytes.

This is the route of backend="neuron". torch.compile's default backend takes
the other one (inductor_device.py): Inductor lowers the neuron graph itself,
with its buffers on the device. Both run Inductor's C++ kernels on device
memory and the device's decode kernels (docs/compile.md).
"""
from __future__ import annotations

import re

import torch
import torch.fx

from .. import _C
from . import attention, loss

_NEURON_DEVICE_STRING = re.compile(r"^neuron(:\d+)?$")


def _on_host(value):
    if isinstance(value, torch.device) and value.type == "neuron":
        return torch.device("cpu")
    if isinstance(value, str) and _NEURON_DEVICE_STRING.match(value):
        return "cpu"
    if isinstance(value, (list, tuple)):
        return type(value)(_on_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_host(v) for k, v in value.items()}
    return value


def to_host_graph(gm: torch.fx.GraphModule, inference: bool) -> torch.fx.GraphModule:
    """A copy of `gm` whose device constants say cpu where they said neuron.

    Attention, cross-entropy and (in inference graphs) linear layers take the
    device's own lowerings: attention.py, loss.py and neuron::linear
    (aten/ops/DecodeMatmul.cpp).
    """
    graph = torch.fx.Graph()
    outputs = graph.graph_copy(gm.graph, {})
    graph.output(outputs)
    for node in graph.nodes:
        node.args = _on_host(node.args)
        node.kwargs = _on_host(node.kwargs)
        _check_host_kernel(node)
        if node.target in (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention):
            node.target = attention.scaled_dot_product_attention
        elif node.target is torch.nn.functional.cross_entropy:
            node.target = loss.cross_entropy
        elif inference and node.target is torch._C._nn.linear:
            node.target = torch.ops.neuron.linear
    host = torch.fx.GraphModule(gm, graph)
    for name, value in list(host.named_buffers()) + list(host.named_parameters()):
        if value.device.type == "neuron":
            raise NotImplementedError(f"graph attribute {name} is a neuron tensor; expected graph inputs only")
    return host


_HOST_KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
              "CompositeExplicitAutogradNonFunctional")


def _check_host_kernel(node: torch.fx.Node) -> None:
    """Refuses an operator with a neuron kernel but none the host graph could run."""
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        overloads = [getattr(target, name) for name in target.overloads()]
    elif isinstance(target, torch._ops.OpOverload):
        overloads = [target]
    else:
        return
    for op in overloads:
        if op.namespace in ("aten", "prims") or any(
                torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key) for key in _HOST_KEYS):
            return
    raise NotImplementedError(
        f"operator {target} (node {node.name}) has no CPU kernel, so the neuron backend cannot lower it with "
        "Inductor's CPU code generation; give it a CPU kernel or a composite implementation")


def output_devices(gm: torch.fx.GraphModule) -> list[str | None]:
    """Per flat output of `gm`: the device type Dynamo traced it on (None: not a tensor)."""
    (output_node,) = [n for n in gm.graph.nodes if n.op == "output"]
    flat, _ = torch.utils._pytree.tree_flatten(output_node.args[0])
    devices = []
    for item in flat:
        value = item.meta.get("example_value") if isinstance(item, torch.fx.Node) else item
        devices.append(value.device.type if isinstance(value, torch.Tensor) else None)
    return devices


class _ToHost(torch.autograd.Function):
    """A neuron tensor as a CPU view, with its gradient crossing back.

    The view is made inside forward: an autograd Function that returned an
    input as-is would hand out a view, which in-place updates then refuse.
    """

    @staticmethod
    def forward(ctx, tensor):
        ctx.device = tensor.device.index
        return _C._host_views([tensor.detach()])[0]

    @staticmethod
    def backward(ctx, grad):
        return _C._device_results([grad], ctx.device, [], [])[0]


class _ToDevice(torch.autograd.Function):
    """A CPU result over device memory as a neuron tensor, differentiably."""

    @staticmethod
    def forward(ctx, host, device_index, tensors, views):
        return _C._device_results([host.detach()], device_index, tensors, views)[0]

    @staticmethod
    def backward(ctx, grad):
        return _C._host_views([grad])[0], None, None, None


def bridge_inputs(args, tensor_positions, differentiable: bool):
    """(host args, neuron tensors, their host views) for a call."""
    tensors = [args[i] for i in tensor_positions]
    views = _C._host_views(tensors)
    host_args = list(args)
    for position, tensor, view in zip(tensor_positions, tensors, views):
        if differentiable and tensor.requires_grad and tensor.device.type == "neuron":
            view = _ToHost.apply(tensor)
        host_args[position] = view
    return host_args, tensors, views


def scope_backward(outputs, device_index: int) -> None:
    """Runs the compiled backward of `outputs` in a kernel-memory scope.

    The autograd engine calls the compiled backward later, outside the
    forward's scope; without one its buffers would come from the host
    allocator (fresh pages every step) instead of the core's cache.
    """
    node = next((o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None), None)
    if node is None:
        return

    # If the backward raises, autograd skips `leave`; the scope then ends by
    # itself once the thread leaves that backward (aten/core/KernelMemory.h).
    def enter(grad_outputs):
        _C._enter_backward_scope(device_index)

    def leave(grad_inputs, grad_outputs):
        _C._leave_backward_scope()

    node.register_prehook(enter)
    node.register_hook(leave)


def bridge_outputs(outputs, devices, device_index, tensors, views):
    """The graph's results on the devices Dynamo traced them on."""
    results = list(outputs)
    scope_backward(results, device_index)
    to_device = [i for i, kind in enumerate(devices) if kind == "neuron" and isinstance(results[i], torch.Tensor)]
    plain = [i for i in to_device if not results[i].requires_grad]
    for i, device_tensor in zip(plain, _C._device_results([results[i] for i in plain], device_index, tensors, views)):
        results[i] = device_tensor
    for i in to_device:
        if results[i].device.type == "cpu":  # requires grad: crosses differentiably
            results[i] = _ToDevice.apply(results[i], device_index, tensors, views)
    for i, kind in enumerate(devices):
        # A result traced as a CPU tensor (`.cpu()` in the graph) must not
        # share the device's bytes, as a real device-to-host copy would not.
        if kind == "cpu" and isinstance(results[i], torch.Tensor):
            results[i] = results[i].clone()
    return results
