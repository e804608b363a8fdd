"""nki_op: an NKI kernel as a torch custom operator.

    @nki_op("mylib::rmsnorm")
    def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return rmsnorm_kernel(x, w)

makes `torch.ops.mylib.rmsnorm` through torch.library.custom_op. Its fake
implementation is the wrapper itself: a kernel called with fake (or meta)
tensors traces and returns empty outputs of the shapes the trace found, so
the op traces under torch.compile (one graph node) and FakeTensorMode with
no hand-written shape function. `register_autograd` on the returned op adds
a backward (which may call other NKI kernels).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch


def nki_op(name: str, *, mutates_args: Iterable[str] | str = (), schema: Optional[str] = None):
    """Decorator: the typed wrapper of NKI kernel calls becomes the custom op `name` ("namespace::op")."""
    if "::" not in name:
        raise ValueError(f"nki_op: {name!r} must be 'namespace::name'")

    def register(fn: Callable):
        op = torch.library.custom_op(name, mutates_args=mutates_args, schema=schema)(fn)
        op.register_fake(fn)
        return op
    return register
