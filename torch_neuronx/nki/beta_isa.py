"""neuronxcc.nki.isa: the beta API's instructions, which allocate and return
their result tile (dtype=, mask= keywords) instead of taking a destination."""
from __future__ import annotations

from . import isa
from . import language as nl
from .indexing import AffinePredicate, IndexExpr, Mask
from .isa import (dge_mode, engine, get_nc_version, gpsimd_engine, nc_version, reduce_cmd,  # noqa: F401
                  scalar_engine, tensor_engine, unknown_engine, vector_engine)
from .trace import FLOATS, View, current


def _out(shape, dtype, like_dtype, buffer=nl.sbuf) -> View:
    return nl.ndarray(shape, dtype or like_dtype, buffer)


def nc_matmul(stationary: View, moving: View, mask=None, is_transpose: bool = False, **_) -> View:
    out = nl.ndarray((stationary.shape[1], moving.shape[1]), nl.float32, nl.psum)
    isa.nc_matmul(out, stationary, moving, accumulate=False, is_transpose=is_transpose, mask=mask)
    return out


def nc_transpose(data: View, engine=None, mask=None, dtype=None, **_) -> View:
    on_tensor = engine in (None, "unknown", "tensor") and (data.shape[0] > 32 or data.shape[1] > 32 or
                                                           engine == "tensor")
    out = nl.ndarray((data.shape[1], data.shape[0]), dtype or data.dtype, nl.psum if on_tensor else nl.sbuf)
    isa.nc_transpose(out, data, engine="tensor" if on_tensor else "vector", mask=mask)
    return out


def tensor_tensor(data1: View, data2: View, op, dtype=None, mask=None, engine=None, **_) -> View:
    out = _out(data1.shape if data1.elements() >= data2.elements() else data2.shape, dtype,
               data1.dtype if data1.dtype == data2.dtype else "float32")
    isa.tensor_tensor(out, data1, data2, op, engine=engine, mask=mask)
    return out


def tensor_scalar(data: View, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, dtype=None,
                  mask=None, engine=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype)
    isa.tensor_scalar(out, data, op0, operand0, reverse0, op1, operand1, reverse1, engine=engine, mask=mask)
    return out


def tensor_reduce(op, data: View, axis, dtype=None, negate=False, keepdims=False, mask=None, **_) -> View:
    _, axes = nl._reduce_axes(data, axis, trailing_only=True)
    kept = tuple(data.shape[a] for a in range(data.ndim) if a not in axes)
    if keepdims:
        shape = tuple(1 if a in axes else data.shape[a] for a in range(data.ndim))
    else:
        shape = kept + (1,) * len(axes) if len(kept) < 2 else kept
    out = _out(shape, dtype, data.dtype)
    isa.tensor_reduce(out, op, data, axis, negate=negate, mask=mask)
    return out


def tensor_copy(src: View, dtype=None, mask=None, engine=None, **_) -> View:
    out = _out(src.shape, dtype, src.dtype)
    isa.tensor_copy(out, src, engine=engine, mask=mask)
    return out


def activation(op, data: View, bias=None, scale=1.0, dtype=None, mask=None, reduce_op=None, reduce_res=None,
               reduce_cmd=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype if data.dtype in FLOATS else "float32")
    isa.activation(out, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, mask=mask,
                   reduce_cmd=reduce_cmd)
    return out


def tensor_scalar_reduce(*, data: View, op0, operand0, reduce_op, reduce_res: View, reverse0=False, dtype=None,
                         mask=None, reduce_cmd=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype if data.dtype in FLOATS else "float32")
    isa.tensor_scalar_reduce(out, data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, mask=mask,
                             reduce_cmd=reduce_cmd)
    return out


def memset(shape, value, dtype, mask=None, engine=None, **_) -> View:
    out = nl.ndarray(shape, dtype)
    isa.memset(out, value, engine=engine, mask=mask)
    return out


def _grid_coefficients(expr: IndexExpr):
    """Sizes of the grid that an affine expression of nl.arange / nl.mgrid spans, and its coefficient per
    grid axis (at least two axes: partitions and one free axis)."""
    variables = sorted(expr.variables.values(), key=lambda v: v.position)
    rank = max(v.rank for v in variables)
    sizes = [1] * rank
    coefficients = [0.0] * rank
    for v in variables:
        position = v.position + rank - v.rank
        sizes[position] = v.size
        coefficients[position] += expr.terms.get(v.id, 0)
    if rank < 2:
        sizes, coefficients = sizes + [1], coefficients + [0.0]
    return sizes, coefficients


def iota(expr: IndexExpr, dtype, mask=None, **_) -> View:
    """The values of an affine index expression of nl.arange / nl.mgrid, as a tile."""
    sizes, coefficients = _grid_coefficients(expr)
    out = nl.ndarray(sizes, dtype)
    terms = [expr.const] + coefficients
    # The instruction's arithmetic is int32 (nisa.iota): integer terms travel exactly, not as fp32.
    exact = all(float(t).is_integer() and -(1 << 31) <= t < (1 << 31) for t in terms)
    nl._emit("iota", "gpsimd", out, (), mask, coefficients=terms, **({"integers": terms} if exact else {}))
    return out


def affine_select(pred, on_true_tile: View, on_false_value, mask=None, dtype=None, **_) -> View:
    """on_true_tile where `pred` (a comparison of affine index expressions, `i_q >= i_k`) holds, else
    on_false_value, evaluated per element on GpSimd: the current API's affine_select with the
    expression's coefficients as its offset, channel multiplier and pattern."""
    if isinstance(pred, Mask) and pred.predicate is not None:
        pred = pred.predicate
    if not isinstance(pred, AffinePredicate):
        raise current().error("affine_select takes one comparison of affine index expressions (i_q >= i_k), "
                                 f"not {type(pred).__name__}")
    sizes, coefficients = _grid_coefficients(pred.expr)
    if tuple(sizes) != tuple(on_true_tile.shape) and list(sizes) != [*on_true_tile.shape, 1]:
        raise current().error(f"affine_select's predicate spans {tuple(sizes)}, its on_true_tile is "
                                 f"{tuple(on_true_tile.shape)}: they must have the same shape")
    out = _out(on_true_tile.shape, dtype, on_true_tile.dtype)
    pattern = [[int(c), int(n)] for c, n in zip(coefficients[1:], sizes[1:])][:on_true_tile.ndim - 1]
    isa.affine_select(out, pattern, int(pred.expr.const), int(coefficients[0]), on_true_tile, on_false_value,
                      cmp_op=getattr(nl, pred.op), mask=mask)
    return out


def reciprocal(data: View, dtype=None, mask=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype)
    isa.reciprocal(out, data, mask=mask)
    return out


def tensor_tensor_scan(data0: View, data1: View, initial, op0, op1, reverse0=False, reverse1=False, dtype=None,
                       mask=None, **_) -> View:
    out = _out(data0.shape, dtype, data0.dtype)
    isa.tensor_tensor_scan(out, data0, data1, initial, op0, op1, reverse0, reverse1, mask=mask)
    return out


def dma_transpose(src: View, *, axes=None, mask=None, dtype=None, dge_mode=None, **_) -> View:
    view = isa.transposed_source(src, axes, dge_mode)
    out = _out(view.shape, dtype, src.dtype)
    isa.dma_transpose(out, src, axes=axes, dge_mode=dge_mode, mask=mask)
    return out


def dma_copy(*, dst: View, src: View, mask=None, **kwargs) -> None:
    isa.dma_copy(dst, src, mask=mask, **kwargs)



def scalar_tensor_tensor(*, data: View, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype)
    isa.scalar_tensor_tensor(out, data, op0, operand0, op1, operand1, reverse0, reverse1, mask=mask)
    return out


def tensor_partition_reduce(op, data: View, mask=None, dtype=None, **_) -> View:
    out = _out((1,) + tuple(data.shape[1:]), dtype, data.dtype)
    isa.tensor_partition_reduce(out, op, data, mask=mask)
    return out


def max8(*, src: View, dtype=None, mask=None, **_) -> View:
    out = _out((src.shape[0], 8), dtype, src.dtype)
    isa.max8(out, src, mask=mask)
    return out


def nc_find_index8(*, data: View, vals: View, dtype=None, mask=None, **_) -> View:
    out = _out((data.shape[0], 8), dtype, "uint32")
    isa.nc_find_index8(out, data, vals, mask=mask)
    return out


def nc_match_replace8(*, data: View, vals: View, imm, dst_idx: View = None, dtype=None, mask=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype)
    isa.nc_match_replace8(out, data, vals, imm, dst_idx=dst_idx, mask=mask)
    return out


def select_reduce(*, dst: View, predicate: View, on_true: View, on_false, reduce_res: View = None, reduce_cmd=None,
                  reduce_op=None, reverse_pred=False, mask=None, **_) -> View:
    isa.select_reduce(dst, predicate, on_true, on_false, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                      reduce_op=reduce_op, reverse_pred=reverse_pred, mask=mask)
    return dst


def nc_stream_shuffle(src: View, dst: View, shuffle_mask, *, dtype=None, mask=None, **_) -> None:
    isa.nc_stream_shuffle(dst, src, shuffle_mask, dtype=dtype, mask=mask)  # the current API takes dst first


def range_select(*, on_true_tile: View, comp_op0, comp_op1, bound0: View, bound1: View, reduce_cmd=None,
                 reduce_res: View = None, reduce_op=None, range_start=0.0, on_false_value=isa._FP32_LOWEST,
                 dtype=None, mask=None, **_) -> View:
    out = _out(on_true_tile.shape, dtype, on_true_tile.dtype)
    isa.range_select(out, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
                     reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
                     on_false_value=on_false_value, mask=mask)
    return out


def bn_stats(data: View, dtype=None, mask=None, **_) -> View:
    out = _out((data.shape[0], 6), dtype, data.dtype)
    isa.bn_stats(out, data, mask=mask)
    return out


def bn_aggr(data: View, dtype=None, mask=None, **_) -> View:
    out = _out((data.shape[0], 2), dtype, data.dtype)
    isa.bn_aggr(out, data, mask=mask)
    return out


def sequence_bounds(*, segment_ids: View, dtype=None, **_) -> View:
    out = _out((segment_ids.shape[0], 2) + tuple(segment_ids.shape[1:]), dtype, segment_ids.dtype)
    isa.sequence_bounds(out, segment_ids)
    return out


def local_gather(src_buffer: View, index: View, num_elem_per_idx=1, num_valid_indices=None, mask=None,
                 **_) -> View:
    if mask is not None:
        raise current().error("local_gather: mask= is not emulated")
    valid = isa.local_gather_indices(index, num_valid_indices)
    out = _out((src_buffer.shape[0], valid, num_elem_per_idx), None, src_buffer.dtype)
    isa.local_gather(out, src_buffer, index, num_elem_per_idx, num_valid_indices)
    return out


def dropout(data: View, prob, mask=None, dtype=None, **_) -> View:
    out = _out(data.shape, dtype, data.dtype)
    isa.dropout(out, data, prob, mask=mask)
    return out
