"""nki.language functions that AWS lists as experimental and that are compositions of other nl functions:
numpy-like reductions and normalisations (var, all, softmax, rms_norm), buffer predicates, expand_dims,
gather_flattened and the no_reorder region. What each computes is AWS's documented result; the instructions
are the ones a kernel would write by hand (reductions on the Vector engine, exp and rsqrt on the Scalar
engine, nc_n_gather on GpSimd), in fp32, rounded once to the requested dtype."""
from __future__ import annotations

import contextlib

from . import language as nl
from .trace import FLOATS, View, current

_HBM = ("hbm", "private_hbm", "shared_hbm")


def _memory(buffer) -> str:
    """A buffer's name: an nl buffer constant, or a tensor (its buffer)."""
    return buffer.buffer if isinstance(buffer, View) else str(buffer)


def is_hbm(buffer) -> bool:
    return _memory(buffer) in _HBM


def is_sbuf(buffer) -> bool:
    return _memory(buffer) == "sbuf"


def is_psum(buffer) -> bool:
    return _memory(buffer) == "psum"


def is_on_chip(buffer) -> bool:
    return _memory(buffer) in ("sbuf", "psum")


def _axes(axis) -> tuple:
    return (axis,) if isinstance(axis, int) else tuple(axis)


def _count(x: View, axis) -> int:
    count = 1
    for a in _axes(axis):
        count *= x.shape[a]
    return count


def _result(value: View, dtype, like: View) -> View:
    """value (fp32) as the requested dtype, by default the input's."""
    target = nl.dtype_name(dtype) if dtype is not None else like.dtype
    return value if target == value.dtype else nl.copy(value, dtype=target)


def var(x: View, axis, dtype=None, keepdims: bool = False, **_) -> View:
    """The population variance (numpy.var, ddof 0) along the trailing free axes; the result keeps the
    reduced axes as ones whatever keepdims says, as AWS documents."""
    mean = nl.mean(x, axis, keepdims=True)
    centred = nl.subtract(x, mean, dtype="float32")
    squares = nl.multiply(centred, centred, dtype="float32")
    return _result(nl.mean(squares, axis, keepdims=True), dtype, x)


def all(x: View, axis, dtype=None, **_) -> View:  # noqa: A001
    """1 where every element along the axes is nonzero, else 0 (numpy.all), in dtype (by default x's)."""
    nonzero = nl.not_equal(x, 0, dtype="float32")
    return nl.min(nonzero, axis, dtype=dtype or x.dtype)


def softmax(x: View, axis=-1, dtype=None, **_) -> View:
    """exp(x - max) / sum(exp(x - max)) along the trailing free axes."""
    if x.dtype not in FLOATS:
        raise current().error(f"softmax takes a float tile, not {x.dtype}")
    peak = nl.max(x, axis, keepdims=True, dtype="float32")
    exps = nl.exp(nl.subtract(x, peak, dtype="float32"))
    total = nl.sum(exps, axis, keepdims=True, dtype="float32")
    return nl.divide(exps, total, dtype=dtype or x.dtype)


def rms_norm(x: View, w: View, axis, n, epsilon: float = 1e-6, dtype=None, compute_dtype=None, **_) -> View:
    """x / sqrt(sum(x**2 along axis) / n + epsilon) * w; n the number of values the mean is over (a tile
    may hold part of a longer row), the arithmetic in compute_dtype (fp32 unless told)."""
    inner = nl.dtype_name(compute_dtype) if compute_dtype is not None else "float32"
    if not isinstance(n, int) or n <= 0:
        raise current().error(f"rms_norm: n must be a positive number of values, not {n!r}")
    squares = nl.multiply(x, x, dtype=inner)
    mean_square = nl.multiply(nl.sum(squares, axis, keepdims=True, dtype=inner), 1.0 / n, dtype=inner)
    inverse_rms = nl.rsqrt(nl.add(mean_square, float(epsilon), dtype=inner), dtype=inner)
    return nl.multiply(nl.multiply(x, inverse_rms, dtype=inner), w, dtype=dtype or x.dtype)


def expand_dims(x: View, axis: int) -> View:
    """A view of x with a new axis of size 1 at `axis` (numpy.expand_dims); the data is not moved."""
    if not -(x.ndim + 1) <= axis <= x.ndim:
        raise current().error(f"expand_dims: axis {axis} is out of range for {x!r}")
    if x.bounds or x.is_indirect():
        raise current().error(f"expand_dims takes a plain view, not the masked or indirect {x!r}")
    position = axis % (x.ndim + 1)
    sizes, strides, axis_vars = list(x.shape), list(x.strides), list(x.axis_vars)
    sizes.insert(position, 1)
    strides.insert(position, 1)
    axis_vars.insert(position, None)
    partition_axis = x.partition_axis + (1 if position <= x.partition_axis else 0)
    return View(x.decl, x.offset, sizes, strides, axis_vars, partition_axis=partition_axis)


def gather_flattened(data: View, indices: View, axis: int = 0, dtype=None, **_) -> View:
    """out[p, j...] = data[p, indices[p, j...]], data's free axes flattened: nisa.nc_n_gather on GpSimd
    (a tile of the indices' shape), then cast to dtype. Indices are uint32 or int32 (read as their bits, so
    a negative one is refused as past the data, by its uint32 value)."""
    trace = current()
    if axis != 0:
        raise trace.error(f"gather_flattened gathers within each partition (axis=0), not along axis {axis}")
    if indices.dtype not in ("int32", "uint32"):
        raise trace.error(f"gather_flattened: indices must be int32 or uint32, not {indices.dtype}")
    if indices.dtype == "int32":
        indices = indices.ap([[stride, size] for stride, size in zip(indices.strides, indices.shape)], dtype="uint32")
    data = data if data.buffer == "sbuf" else nl.copy(data)
    indices = indices if indices.buffer == "sbuf" else nl.copy(indices)
    out = nl.ndarray(indices.shape, data.dtype, nl.sbuf)
    from .isa import nc_n_gather
    nc_n_gather(out, data, indices)
    return out if dtype is None or nl.dtype_name(dtype) == out.dtype else nl.copy(out, dtype=dtype)


@contextlib.contextmanager
def no_reorder():
    """A region whose instructions keep their program order. The emulator never reorders instructions, so
    this changes neither results nor the predicted time; loops run on the device (fori_loop, while_loop,
    dynamic_range) are refused inside it, as AWS documents."""
    trace = current()
    trace.no_reorder_depth += 1
    try:
        yield
    finally:
        trace.no_reorder_depth -= 1
