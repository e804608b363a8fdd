"""How the neuron backend lowers cross-entropy.

Inductor's generated CPU kernels for log-softmax over a vocabulary, forward
and backward, run slower than ATen's (a Llama training step spends most of
its extra time there), so the backend keeps the loss as one operator over
ATen's kernels: `neuron::cross_entropy`, differentiable, which Inductor calls
as an extern kernel.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


@torch.library.custom_op("neuron::cross_entropy", mutates_args=(), device_types="cpu")
def _cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int,
                   reduction: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    log_probs = torch.ops.aten._log_softmax(logits, 1, False)
    loss, total_weight = torch.ops.aten.nll_loss_forward(log_probs, target, None, reduction, ignore_index)
    return loss, log_probs, total_weight


@_cross_entropy.register_fake
def _(logits, target, ignore_index, reduction):
    loss_shape = target.shape if reduction == 0 else ()
    return logits.new_empty(loss_shape), torch.empty_like(logits), logits.new_empty(())


@torch.library.custom_op("neuron::cross_entropy_backward", mutates_args=(), device_types="cpu")
def _cross_entropy_backward(grad: torch.Tensor, log_probs: torch.Tensor, target: torch.Tensor,
                            total_weight: torch.Tensor, ignore_index: int, reduction: int) -> torch.Tensor:
    grad_log_probs = torch.ops.aten.nll_loss_backward(grad, log_probs, target, None, reduction, ignore_index,
                                                      total_weight)
    return torch.ops.aten._log_softmax_backward_data(grad_log_probs, log_probs, 1, log_probs.dtype)


@_cross_entropy_backward.register_fake
def _(grad, log_probs, target, total_weight, ignore_index, reduction):
    return torch.empty_like(log_probs)


def _setup_context(ctx, inputs, output):
    _, target, ignore_index, reduction = inputs
    _, log_probs, total_weight = output
    ctx.save_for_backward(log_probs, target, total_weight)
    ctx.ignore_index, ctx.reduction = ignore_index, reduction


def _backward(ctx, grad_loss, grad_log_probs, grad_total_weight):
    log_probs, target, total_weight = ctx.saved_tensors
    grad = _cross_entropy_backward(grad_loss.contiguous(), log_probs, target, total_weight, ctx.ignore_index,
                                   ctx.reduction)
    return grad, None, None, None


_cross_entropy.register_autograd(_backward, setup_context=_setup_context)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """F.cross_entropy; the common case (class indices, no weights or smoothing) as neuron::cross_entropy."""
    common = (weight is None and size_average is None and reduce is None and label_smoothing == 0.0
              and input.dim() == 2 and target.dim() == 1 and not target.is_floating_point()
              and reduction in _REDUCTIONS)
    if not common:
        return F.cross_entropy(input, target, weight=weight, size_average=size_average, ignore_index=ignore_index,
                               reduce=reduce, reduction=reduction, label_smoothing=label_smoothing)
    return _cross_entropy(input, target, ignore_index, _REDUCTIONS[reduction])[0]
