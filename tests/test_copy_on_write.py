"""Lazy clones (torch's copy-on-write storages) on neuron behave as on the CPU device.

`t._lazy_clone()` shares t's bytes until one of the two is written. An op that only reads a lazy clone
leaves both sharing; an op that writes one gives it bytes of its own first, and the other keeps the old
values. Every case runs on both devices and compares values and `_is_cow_tensor` of each tensor.
"""
from __future__ import annotations

import pytest
import torch

NEURON = "neuron"


def _pair(device):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(device) - 5
    return t, t._lazy_clone()


def _cow(*tensors):
    return [torch._C._is_cow_tensor(x) for x in tensors]


# Ops that only read their operands: the hot kernels (add, mul, mm), the boxed fallback (exp, where,
# index_select, the reductions), cat, attention, a copy out of the clone and a transfer to the CPU.
READS = {
    "add": lambda t, c: t + c,
    "mul": lambda t, c: c * 2,
    "mm": lambda t, c: torch.mm(t, c.t()),
    "addmm": lambda t, c: torch.addmm(c[0, :3], t, c.t()),
    "exp": lambda t, c: torch.exp(c),
    "sum": lambda t, c: c.sum(dim=1),
    "where": lambda t, c: torch.where(c > 0, c, t),
    "index_select": lambda t, c: c.index_select(0, torch.tensor([2, 0], device=c.device)),
    "cat": lambda t, c: torch.cat([t, c]),
    "sdpa": lambda t, c: torch.nn.functional.scaled_dot_product_attention(c[None], c[None], t[None]),
    "copy out": lambda t, c: torch.empty_like(c).copy_(c.t().t()),
    "strided copy out": lambda t, c: torch.empty(4, 3, device=c.device).copy_(c.t()),
    "to cpu": lambda t, c: c.cpu(),
    "item": lambda t, c: torch.tensor(c[1, 2].item()),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reading_a_lazy_clone_keeps_the_bytes_shared(name):
    results = {}
    for device in ("cpu", NEURON):
        t, c = _pair(device)
        out = READS[name](t, c)
        results[device] = (out.cpu(), _cow(t, c))
    assert results[NEURON][1] == results["cpu"][1] == [True, True]
    torch.testing.assert_close(results[NEURON][0], results["cpu"][0])


# Ops that write the clone (or, for "write original", the tensor it was cloned from): in place through
# the hot kernels and through the fallback, out= into the clone, out= into one view of the clone while
# another view of it is read (its bytes must be its own before either alias is taken), copy_ into it,
# index_put_, and a foreach op over a list of clones.
def _write_out_over_own_view(t, c):
    torch.add(c[0], c[1], out=c[2])


def _foreach(t, c):
    torch._foreach_add_([c[0], c[1]], 1.0)


WRITES = {
    "add_": lambda t, c: c.add_(t),
    "mul_": lambda t, c: c.mul_(3),
    "clamp_": lambda t, c: c.clamp_(min=0),
    "out=": lambda t, c: torch.mul(t, t, out=c),
    "out= over a view it reads": _write_out_over_own_view,
    "copy_": lambda t, c: c.copy_(t.flip(0)),
    "index_put_": lambda t, c: c.index_put_((torch.tensor([1], device=c.device),), torch.tensor(9.0, device=c.device)),
    "foreach": _foreach,
    "write original": lambda t, c: t.mul_(-1),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writing_a_lazy_clone_gives_it_bytes_of_its_own(name):
    results = {}
    for device in ("cpu", NEURON):
        t, c = _pair(device)
        WRITES[name](t, c)
        results[device] = (t.cpu(), c.cpu(), _cow(t, c))
    torch.testing.assert_close(results[NEURON][0], results["cpu"][0], rtol=0, atol=0)
    torch.testing.assert_close(results[NEURON][1], results["cpu"][1], rtol=0, atol=0)
    assert results[NEURON][2] == results["cpu"][2]
    # The one not written keeps the values both had.
    expected = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5
    untouched = results[NEURON][0] if name != "write original" else results[NEURON][1]
    assert torch.equal(untouched, expected)
