"""nki.language (`nl`): tensors, loops, data movement and the tile functions,
for the current API (`import nki.language as nl`) and the beta one
(`neuronxcc.nki.language`: nl.arange, nl.mgrid, nl.par_dim, mask=).

Every function records instructions on the current trace (trace.py) and
returns the tile they write; nothing computes until the program runs.
"""
from __future__ import annotations

import builtins
import numbers
from typing import Optional, Sequence

from . import grids, indexing
from .grids import (GridElementOffset, NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks, alloc_tiles,  # noqa: F401
                    blocks, contiguous_indices, grid_element_offset, interleaved_indices, tiles)
from .device_loops import dynamic_range, fori_loop, if_else, while_loop  # noqa: F401
from .indexing import DynSlice, IndexExpr, MGrid, apply_mask, check_bounds
from .trace import BYTES, FLOATS, INTEGER_RANGES, NkiError, View, _product, current, dtype_name, promote

# Dtypes, as the current API names them (strings); numpy and torch dtypes are accepted too.
float32, bfloat16, float16, tfloat32 = "float32", "bfloat16", "float16", "tfloat32"
float8_e4m3, float8_e4m3fn, float8_e5m2 = "float8_e4m3", "float8_e4m3", "float8_e5m2"
int8, int16, int32, uint8, uint16, uint32, bool_ = "int8", "int16", "int32", "uint8", "uint16", "uint32", "bool"
int64 = "int64"  # SDK 2.33+: moved by DMA and read into 64-bit scalars (nisa.scalar_load); no engine computes on it
# Microscaling (MX): four fp8 values in 32 bits, four fp4 values in 16 bits (nisa.quantize_mx, nisa.nc_matmul_mx)
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4 = "float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"

# Buffers.
sbuf, psum, hbm, private_hbm, shared_hbm = "sbuf", "psum", "private_hbm", "private_hbm", "shared_hbm"


class tile_size:  # noqa: N801 - the name kernels use
    pmax = 128                  # partitions
    psum_fmax = 512             # fp32 per partition in one PSUM bank
    psum_bank_fmax = 512
    gemm_stationary_fmax = 128  # stationary (left, transposed) free size of nc_matmul
    gemm_moving_fmax = 512      # moving (right) free size
    bn_stats_fmax = 512


class _ParDim(int):
    """A size marked as the partition axis of a tile (nl.par_dim)."""


def par_dim(size: int) -> int:
    """Beta API: marks the partition axis of a tile; axes before it are blocks of
    separate [partition, free] tiles ([4, par_dim(128), 512]: four tiles)."""
    return _ParDim(int(size))


def ds(start: int, size: int) -> DynSlice:
    return DynSlice(start, size)


def arange(start: int, stop: Optional[int] = None) -> IndexExpr:
    return IndexExpr.arange(start, stop)


mgrid = MGrid()


# ---- tensors -------------------------------------------------------------------------------------

def ndarray(shape: Sequence[int], dtype, buffer=sbuf, name: str = "", **_) -> View:
    trace = current()
    buffer = sbuf if buffer is None else buffer
    placement = None if isinstance(buffer, str) else buffer
    memory = buffer if isinstance(buffer, str) else getattr(buffer, "name", None)
    if memory not in ("sbuf", "psum", "private_hbm", "shared_hbm", "hbm"):
        raise trace.error(f"unknown buffer {buffer!r} (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm)")
    marked = [i for i, s in enumerate((shape,) if isinstance(shape, int) else shape) if isinstance(s, _ParDim)]
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if memory in ("sbuf", "psum") and len(shape) == 1:
        shape = shape + (1,)
    if len(marked) > 1:
        raise trace.error(f"a tile has one partition axis; nl.par_dim marks {len(marked)} of {list(shape)}")
    axis = marked[0] if marked and memory in ("sbuf", "psum") else 0
    if placement is not None and memory == "sbuf":
        from .. import _C
        from . import compiler
        per_partition = _product(shape) // shape[axis] * BYTES[dtype_name(dtype)]
        compiler.check_placement(placement, per_partition, _C._nki_sbuf_partition_bytes(trace.version),
                                 f"tile {list(shape)} {dtype_name(dtype)}")
    if axis == 0:
        return View.whole(trace.new_tensor(memory, dtype_name(dtype), shape, name))
    # Stored partition first, as the hardware holds a tile; the view keeps the declared axis order.
    stored = View.whole(trace.new_tensor(memory, dtype_name(dtype), (shape[axis],) + shape[:axis] + shape[axis + 1:],
                                         name, blocks=_product(shape[:axis])))
    order = list(builtins.range(1, axis + 1)) + [0] + list(builtins.range(axis + 1, len(shape)))
    return View(stored.decl, 0, shape, [stored.strides[a] for a in order], partition_axis=axis)


def shared_constant(constant, dtype=None, **_) -> View:
    """An HBM tensor filled with trace-time data (a NumPy array, a torch tensor or a .npy file), cast to
    `dtype`; the same data and dtype give the same tensor."""
    import numpy as np
    import torch

    from .kernel import _from_numpy, torch_dtype
    if isinstance(constant, (str, bytes)) or hasattr(constant, "__fspath__"):
        constant = np.load(constant)
    values = constant.detach().cpu() if isinstance(constant, torch.Tensor) else _from_numpy(np.array(constant))
    name = dtype_name(dtype) if dtype is not None else dtype_name(values.dtype)
    values = values.to(torch_dtype(name)).contiguous()
    if values.dim() == 0:
        values = values.reshape(1)
    return View.whole(current().constant_tensor(values, name))


def shared_identity_matrix(n, dtype="uint8", dst=None, **_) -> View:
    """An n x n identity matrix in SBUF (into `dst` if given), loaded from a shared HBM constant; the
    hardware's compiler shares one per dtype, so a kernel may call this as often as it likes."""
    import torch
    name = dtype_name(dtype)
    target = dst if dst is not None else ndarray((n, n), name, sbuf)
    if tuple(target.shape) != (n, n):
        raise current().error(f"shared_identity_matrix({n}): dst {target!r} is not {n} x {n}")
    _emit("dma_copy", "dma", target, (shared_constant(torch.eye(n), name),), None)
    return target


def full(shape, fill_value, dtype, buffer=sbuf, name: str = "", **_) -> View:
    tile = ndarray(shape, dtype, buffer, name)
    _fill(tile, fill_value)
    return tile


def zeros(shape, dtype, buffer=sbuf, name: str = "", **_) -> View:
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name: str = "", **_) -> View:
    return full(shape, 1.0, dtype, buffer, name)


def empty_like(x, dtype=None, buffer=None, name: str = "", transpose_axes=None, **_):
    """New storage shaped as x (a tensor, or a grid: grids.grid_like); transpose_axes orders its dims for a
    dma_transpose into it."""
    if isinstance(x, grids.NkiGrid):
        return grids.grid_like(x, dtype, buffer, name, transpose_axes)
    shape = x.shape if transpose_axes is None else tuple(x.shape[a] for a in _permutation(transpose_axes, x.ndim))
    return ndarray(shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(x, dtype=None, buffer=None, name: str = "", **_):
    if isinstance(x, grids.NkiGrid):
        grid = grids.grid_like(x, dtype, buffer, name)
        _fill(grid._storage.view, 0.0)
        return grid
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def _permutation(axes, ndim: int):
    axes = tuple(axes)
    if sorted(axes) != list(builtins.range(ndim)):
        raise current().error(f"transpose_axes {axes} is not an order of {ndim} dims")
    return axes


def _fill(tile: View, value, mask=None) -> None:
    tile = tile.partition_first() if mask is None else tile
    if tile.buffer == "hbm":
        staged = full(tile.shape, value, tile.dtype)
        store(tile, staged, mask=mask)
        return
    _emit("memset", "vector", tile, (), mask, operand0=_fill_value(value, tile, "the fill value"))


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral)


def _immediate(value) -> tuple:
    """An immediate operand: (-1, its fp32 value), and for an integer the integer itself, which bitvec
    operators and integer memsets take exactly (fp32 holds integers exactly only up to 2**24)."""
    if not _is_integer(value):
        return (-1, float(value or 0.0))
    value = int(value)
    if not -(1 << 63) <= value < (1 << 64):
        raise current().error(f"the immediate {value} does not fit in 64 bits")
    return (-1, float(value), value - (1 << 64) if value >= (1 << 63) else value)


def _fill_value(value, dst: View, what: str) -> tuple:
    """A memset's value for dst: an integer dtype takes an integer it can hold, exactly."""
    limits = INTEGER_RANGES.get(dst.dtype)
    if limits is None or not _is_integer(value):
        return (-1, float(value))
    if not limits[0] <= int(value) <= limits[1]:
        raise current().error(f"{what} {int(value)} does not fit in {dst.dtype} (from {limits[0]} to {limits[1]})")
    return _immediate(value)


# ---- SPMD and loops ------------------------------------------------------------------------------

class nc(int):  # noqa: N801 - the name kernels use
    """nl.nc(n): n physical NeuronCores of a logical one (LNC=2 on trn2), as a factor of nl.spmd_dim."""


def spmd_dim(*factors) -> int:
    """A launch-grid axis made of factors (nl.spmd_dim(4, nl.nc(2)): 8 instances, spread over two cores on
    the hardware). The emulator runs the instances of every factor; program_id counts them all."""
    size = 1
    for factor in factors:
        if int(factor) < 1:
            raise NkiError(f"nl.spmd_dim: factor {factor!r} is not a positive size")
        size *= int(factor)
    return size


def program_id(axis: int = 0) -> int:
    trace = current()
    if not 0 <= axis < builtins.max(len(trace.grid), 1):
        raise trace.error(f"program_id({axis}): the launch grid {list(trace.grid)} has no axis {axis}")
    return trace.program_id[axis] if trace.grid else 0


def num_programs(axes=None) -> int:
    trace = current()
    if axes is None:
        count = 1
        for g in trace.grid:
            count *= g
        return count
    return trace.grid[axes] if trace.grid else 1


def program_ndim() -> int:
    return len(current().grid)


def affine_range(*args, **_):
    """Iterations independent of each other (checked: no iteration may read or
    overwrite what another wrote, except accumulations)."""
    trace = current()
    loop = trace.next_loop
    trace.next_loop += 1
    for iteration, value in enumerate(builtins.range(*args)):
        trace.loop_stack.append((loop, iteration))
        try:
            yield value
        finally:
            trace.loop_stack.pop()


def sequential_range(*args, **_):
    """Iterations in order; `directives=` (nki.compiler.no_reorder()) are accepted: order is kept anyway."""
    return builtins.range(*args)


def static_range(*args, **_):
    return builtins.range(*args)


# ---- data movement -------------------------------------------------------------------------------

def load(src: View, dtype=None, mask=None, **_) -> View:
    if src.ndim == 1:
        src = View(src.decl, src.offset, (src.sizes[0], 1), (src.strides[0], 1), src.axis_vars + (None,),
                   src.bounds)
    tile = ndarray(src.shape, src.dtype)
    _emit("dma_copy", "dma", tile, (src,), mask)
    if dtype is not None and dtype_name(dtype) != src.dtype:
        return copy(tile, dtype=dtype)
    return tile


def load_transpose2d(src: View, dtype=None, mask=None, **_) -> View:
    """src [F, P] in HBM as a [P, F] tile in SBUF: the DMA engines transpose as they load."""
    if not isinstance(src, View) or src.buffer != "hbm" or src.ndim != 2:
        raise current().error(f"load_transpose2d loads a 2-D HBM tensor, not {src!r}")
    transposed = src.permuted([1, 0])
    transposed.partition_axis = 0  # src's free axis becomes the tile's partitions
    return load(transposed, dtype=dtype, mask=mask)


def store(dst: View, value, mask=None, **_) -> None:
    trace = current()
    if not isinstance(value, View):
        _fill(dst, value, mask)
        return
    if value.buffer == "psum":
        value = copy(value, dtype=dst.dtype, mask=mask)  # DMA does not read PSUM
    dst_view, value_view = _same_shape(dst, value)
    if dst_view is None:
        raise trace.error(f"cannot store {value!r} into {dst!r}: shapes differ")
    _emit("dma_copy", "dma", dst_view, (value_view,), mask)


def _squeezed(view: View) -> View:
    keep = [a for a in builtins.range(view.ndim)
            if view.sizes[a] != 1 or (a == 0 and view.buffer != "hbm")]
    keep = keep or [0]
    squeezed = View(view.decl, view.offset, [view.sizes[a] for a in keep], [view.strides[a] for a in keep],
                    [view.axis_vars[a] for a in keep], view.bounds,
                    keep.index(view.partition_axis) if view.partition_axis in keep else 0)
    squeezed.dynamic = view.dynamic
    return squeezed


def _same_shape(a: View, b: View):
    if a.shape == b.shape:
        return a, b
    sa, sb = _squeezed(a), _squeezed(b)
    if sa.shape == sb.shape:
        return sa, sb
    return None, None


def copy(x: View, dtype=None, mask=None, buffer=sbuf, **_) -> View:
    out = ndarray(x.shape, dtype or x.dtype, buffer)
    _emit("tensor_copy", "vector", out, (x,), mask)
    return out


class _LoopReduction:
    """What nl.loop_reduce returns: assigned into a tile (`dst[...] = nl.loop_reduce(x, op, ...)`) it makes
    dst = dst op x, an accumulation the loop's iterations share."""

    def __init__(self, x: View, op, mask):
        self.x, self.op, self.mask = x, op, mask

    def __getattr__(self, name):
        raise NkiError("nl.loop_reduce's result goes into its destination tile by assignment "
                       "(dst[...] = nl.loop_reduce(x, op, loop_indices)); here it cannot be used otherwise")


def loop_reduce(x: View, op, loop_indices, dtype=None, mask=None, **_):
    """Reduces x across the iterations of the loops named into the tile the result is assigned to (the
    destination is also op's other operand); `dtype` is the destination's."""
    if not isinstance(x, View):
        raise current().error(f"nl.loop_reduce reduces a tile, not {type(x).__name__}")
    return _LoopReduction(x, op, mask)


def assign(target: View, value) -> None:
    """target[...] = value."""
    trace = current()
    if isinstance(value, _LoopReduction):
        from .isa import alu_of
        _emit("tensor_tensor", "vector", target, (target, _broadcast(value.x, target)), value.mask,
              op0=alu_of(value.op), accumulate=True)
        return
    if not isinstance(value, View):
        _fill(target, value)
        return
    last = trace.instructions[-1] if trace.instructions else None
    if target.is_indirect() or (last is not None and last["name"] == "column_scatter"):
        last = None  # an indirect view is staged around its instruction (indirection.py): no rewrite
    if (last is not None and target.partition_axis == 0 and last["dst"].decl is value.decl and value.is_whole()
            and value.decl.memory ==
            target.decl.memory and value.shape == target.shape and value.decl.argument < 0
            and builtins.all(v.decl is not value.decl for v in last["inputs"])
            and not _used_before(value, last)):
        last["dst"] = _masked_like(target, last["dst"])  # write the result where it belongs, no extra copy
        return
    if target.buffer == "hbm":
        store(target, value)
    elif value.buffer == "hbm":
        t, v = _same_shape(target, value)
        if t is None or value.dtype != target.dtype:
            raise trace.error(f"cannot assign {value!r} to {target!r}")
        _emit("dma_copy", "dma", t, (v,), None)
    else:
        t, v = _same_shape(target, value)
        if t is None:
            raise trace.error(f"cannot assign {value!r} to {target!r}: shapes differ")
        _emit("tensor_copy", "vector", t, (v,), None)


def _used_before(value: View, last: dict) -> bool:
    trace = current()
    for ins in trace.instructions[:-1]:
        if ins["dst"].decl is value.decl or any(v.decl is value.decl for v in ins["inputs"]):
            return True
    return False


def _masked_like(target: View, written: View) -> View:
    """The target narrowed as the retargeted instruction's mask narrowed its own result."""
    if written.sizes == target.sizes:
        return target
    kept = written.ndim
    if (kept < target.ndim and written.sizes == target.sizes[:kept]
            and builtins.all(s == 1 for s in target.sizes[kept:])):
        # A reduction writes its kept axes only; the target's trailing axes are the reduced ones, of size 1.
        return View(target.decl, target.offset, written.sizes, target.strides[:kept], target.axis_vars[:kept],
                    target.bounds, target.partition_axis)
    offset = target.offset
    start = written.offset
    for a in builtins.range(written.ndim):
        step = written.strides[a] or 1
        index = (start // step) % (written.decl.shape[a] if a < len(written.decl.shape) else 1)
        offset += index * target.strides[a]
    return View(target.decl, offset, written.sizes, target.strides, target.axis_vars, target.bounds)


def accumulate_into(target: View, value) -> None:
    """target += value: a matmul accumulates in PSUM; anything else is an add the loops may share."""
    trace = current()
    last = trace.instructions[-1] if trace.instructions else None
    if (isinstance(value, View) and last is not None and last["name"] == "nc_matmul" and not target.is_indirect() and
            last["dst"].decl is value.decl and target.buffer == "psum" and value.shape == target.shape and
            target.partition_axis == 0):
        # The first product into a PSUM range starts its accumulation group (what was there is not added,
        # as the compiler makes `psum += matmul` over a fresh tile); later ones add.
        last["dst"] = target
        last["accumulate"] = _psum_written_before(target)
        _mark_psum_written(target)
        return
    if isinstance(value, View):
        _emit("tensor_tensor", "vector", target, (target, _broadcast(value, target)), None, op0="add",
              accumulate=True)
    else:
        _emit("tensor_scalar", "vector", target, (target,), None, op0="add", operand0=(-1, float(value)),
              accumulate=True)


# ---- tile arithmetic -----------------------------------------------------------------------------

def _psum_written_before(view: View) -> bool:
    """Whether an earlier instruction wrote this whole PSUM range (a matmul into it then accumulates)."""
    low, high = view.offset, view.offset + view.elements()
    return any(lo <= low and high <= hi for lo, hi in current().psum_written.get(view.decl.id, ()))


def _mark_psum_written(view: View) -> None:
    current().psum_written.setdefault(view.decl.id, []).append((view.offset, view.offset + view.elements()))


def _emit(opcode: str, engine: str, dst: View, inputs, mask, **fields) -> dict:
    trace = current()
    if isinstance(mask, indexing.AffinePredicate):
        raise trace.error("a mask bounds each index variable by a constant (i_p < 100, i_f >= 3); a comparison of "
                          "several variables is a predicate for nisa.affine_select")
    if mask is not None and not isinstance(mask, indexing.Mask):
        raise trace.error(f"mask must be a comparison of index expressions, not {type(mask).__name__}")
    dst = apply_mask(dst, mask)
    inputs = [apply_mask(v, mask) for v in inputs]
    dst, inputs = _partitions_first(dst, inputs)
    for view in [dst, *inputs]:
        check_bounds(view)
    if dst.buffer == "psum":
        _mark_psum_written(dst)
    return trace.emit(opcode, engine, dst, inputs, **fields)


def _partitions_first(dst: View, inputs):
    """Views of block tiles (nl.par_dim after block axes) with their partition axis first. An element-wise
    instruction whose operands agree in shape and partition axis takes them so; any other must be given
    one block at a time."""
    views = [dst, *inputs]
    if builtins.all(v.partition_axis == 0 for v in views):
        return dst, inputs
    if builtins.all(v.shape == dst.shape and v.partition_axis == dst.partition_axis for v in views):
        return dst.partition_first(), [v.partition_first() for v in inputs]
    odd = next(v for v in views if v.partition_axis != 0)
    raise current().error(f"{odd!r} has its partition axis (nl.par_dim) at axis {odd.partition_axis}: "
                          "index its block axes (tile[i]) before giving it to this instruction")


def _broadcast(value: View, like: View) -> View:
    if value.shape == like.shape:
        return value
    if value.ndim != like.ndim or any(v != l and v != 1 for v, l in zip(value.shape, like.shape)):
        raise current().error(f"{value!r} does not broadcast to {list(like.shape)}")
    if value.shape[0] != like.shape[0]:
        raise current().error(f"{value!r} would broadcast along the partition axis: only DMA can "
                              "(load it with nl.load(...broadcast_to(...)))")
    return value.broadcast_to(like.shape)


def _operand(value, inputs: list, like: View, what: str = "a tensor_scalar operand"):
    """An instruction's second operand: an immediate, or a [partitions, 1] tile spread along `like`'s free
    axes and appended to `inputs` (read once per partition)."""
    if isinstance(value, View):
        if value.shape[0] != like.shape[0] or any(s != 1 for s in value.shape[1:]):
            raise current().error(f"{what} is a scalar or a [partitions, 1] vector, not {value!r}")
        inputs.append(value.broadcast_to((value.shape[0],) + like.shape[1:]) if value.ndim == like.ndim else
                      View(value.decl, value.offset, like.shape, (value.strides[0],) + (0,) * (like.ndim - 1)))
        return (len(inputs) - 1, 0.0)
    return _immediate(value)


# What GpSimd computes on 32-bit integers natively (exactly) rather than in fp32.
_NATIVE_INTEGER_OPS = frozenset(("add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal",
                                 "greater", "greater_equal", "less", "less_equal"))


def _tensor_tensor_engine(dst: View, data1: View, data2: View, alu: str) -> str:
    """Where a tensor_tensor runs unless told, as AWS's nki.isa.tensor_tensor says: nl.power on GpSimd (so its
    tiles cannot be in PSUM); every tile int32 or uint32 and none in PSUM on GpSimd too, whose integer
    arithmetic is exact; anything else on the Vector engine, which computes in fp32 (int32 values past 2**24
    round)."""
    tiles = (dst, data1, data2)
    if alu == "power":
        return "gpsimd"
    words = builtins.all(t.dtype in ("int32", "uint32") and t.buffer != "psum" for t in tiles)
    return "gpsimd" if alu in _NATIVE_INTEGER_OPS and words else "vector"


def _result(shape, dtype, kwargs) -> View:
    return ndarray(shape, kwargs.get("dtype") or dtype, kwargs.get("buffer") or sbuf)


def _binary(alu: str):
    def fn(x, y, dtype=None, mask=None, **kwargs):
        kwargs["dtype"] = dtype
        if isinstance(x, View) and isinstance(y, View):
            shape = x.shape if x.elements() >= y.elements() else y.shape
            out = _result(shape, promote(x.dtype, y.dtype), kwargs)
            a, b = _broadcast(x, out), _broadcast(y, out)
            if b.strides[1:] and builtins.all(s == 0 for s in b.strides[1:]) and b is not y:  # per partition
                _emit("tensor_scalar", "vector", out, (a, b), mask, op0=alu, operand0=(1, 0.0))
            elif a.strides[1:] and builtins.all(s == 0 for s in a.strides[1:]) and a is not x:
                _emit("tensor_scalar", "vector", out, (b, a), mask, op0=alu, operand0=(1, 0.0), reverse0=True)
            else:
                engine = _tensor_tensor_engine(out, a, b, alu)
                if "psum" in (out.buffer, a.buffer, b.buffer):
                    engine = "vector"  # nl leaves engines to the compiler, which keeps PSUM operands off GpSimd
                _emit("tensor_tensor", engine, out, (a, b), mask, op0=alu)
            return out
        if isinstance(x, View):
            out = _result(x.shape, x.dtype if x.dtype in FLOATS or isinstance(y, int) else "float32", kwargs)
            _emit("tensor_scalar", "vector", out, (x,), mask, op0=alu, operand0=_immediate(y))
            return out
        if isinstance(y, View):
            out = _result(y.shape, y.dtype if y.dtype in FLOATS or isinstance(x, int) else "float32", kwargs)
            _emit("tensor_scalar", "vector", out, (y,), mask, op0=alu, operand0=_immediate(x), reverse0=True)
            return out
        raise current().error(f"nl.{alu} needs a tile")
    fn.__name__ = alu
    fn.nki_alu = alu
    return fn


def _unary(function: str, name: Optional[str] = None):
    def fn(x, dtype=None, mask=None, **kwargs):
        if not isinstance(x, View):
            raise current().error(f"nl.{name or function} needs a tile")
        kwargs["dtype"] = dtype
        out = _result(x.shape, x.dtype if x.dtype in FLOATS else "float32", kwargs)
        _emit("activation", "scalar", out, (x,), mask, function=function)
        return out
    fn.__name__ = name or function
    fn.nki_function = function
    return fn


add, subtract, multiply, divide = _binary("add"), _binary("subtract"), _binary("multiply"), _binary("divide")
maximum, minimum, power = _binary("maximum"), _binary("minimum"), _binary("power")
equal, not_equal, greater, greater_equal = _binary("equal"), _binary("not_equal"), _binary("greater"), \
    _binary("greater_equal")
less, less_equal = _binary("less"), _binary("less_equal")
logical_and, logical_or, logical_xor = _binary("logical_and"), _binary("logical_or"), _binary("logical_xor")
abs_max, abs_min = _binary("abs_max"), _binary("abs_min")
# Bitvec operators: integer tiles as bit patterns (shifts logical), never through fp32.
bitwise_and, bitwise_or, bitwise_xor = _binary("bitwise_and"), _binary("bitwise_or"), _binary("bitwise_xor")
left_shift, right_shift = _binary("left_shift"), _binary("right_shift")
fmod = _binary("mod")  # the remainder with x's sign (C's fmod)
mod = _binary("floor_mod")  # the remainder with y's sign (numpy.mod, Python's %)

exp, log, tanh, sigmoid, relu = _unary("exp"), _unary("log"), _unary("tanh"), _unary("sigmoid"), _unary("relu")
gelu, gelu_apprx_tanh, silu = _unary("gelu"), _unary("gelu_apprx_tanh"), _unary("silu")
sqrt, rsqrt, reciprocal = _unary("sqrt"), _unary("rsqrt"), _unary("reciprocal")
abs, negative, square = _unary("abs"), _unary("negative"), _unary("square")  # noqa: A001 - nl's names
sin, cos, erf, softplus, sign = _unary("sin"), _unary("cos"), _unary("erf"), _unary("softplus"), _unary("sign")
floor, ceil, arctan, mish = _unary("floor"), _unary("ceil"), _unary("arctan"), _unary("mish")
gelu_apprx_sigmoid = _unary("gelu_apprx_sigmoid")
gelu_dx, gelu_apprx_sigmoid_dx = _unary("gelu_dx"), _unary("gelu_apprx_sigmoid_dx")
silu_dx, erf_dx, tan, trunc = _unary("silu_dx"), _unary("erf_dx"), _unary("tan"), _unary("trunc")
identity = _unary("copy", "identity")


def invert(x, dtype=None, mask=None, **kwargs):
    """Bitwise NOT of an integer tile: XOR with all ones, as AWS implements it."""
    return bitwise_xor(x, -1, dtype=dtype, mask=mask, **kwargs)


def logical_not(x, dtype=None, mask=None, **kwargs):
    """XOR with 1, as AWS implements it: 1 - x for 0/1 tiles (other values: use nl.equal(x, 0))."""
    return bitwise_xor(x, 1, dtype=dtype, mask=mask, **kwargs)


def _instruction_only(name: str, role: str, **marks):
    """An operator that names a stage of an instruction (nisa.activate2) and computes nothing by itself."""
    def fn(*args, **kwargs):
        raise current().error(f"nl.{name} is {role}; it is passed to an instruction, not called")
    fn.__name__ = name
    for key, value in marks.items():
        setattr(fn, key, value)
    return fn


# nisa.activate2's stages (NKI 0.4): an ALU stage that passes its data on, and PReLU with its relu_param.
bypass = _instruction_only("bypass", "the pass-through ALU operator (op0=/op1= of nisa.activate2)",
                           nki_alu="bypass")
prelu = _instruction_only("prelu", "an activation function of nisa.activate2 (op=nl.prelu, relu_param=...)",
                          nki_function="prelu")


def _reduce_axes(x: View, axis, trailing_only: bool = False):
    """x with the reduced free axes moved last, as the Vector engine reduces them, and the sorted axes.
    nl reductions may name any free axes (the compiler reorders the access pattern); the instruction
    itself (nisa.tensor_reduce) takes only the trailing ones."""
    axes = sorted({a % x.ndim for a in ((axis,) if isinstance(axis, int) else tuple(axis))})
    if 0 in axes:
        raise current().error("a reduction cannot include the partition axis 0 "
                              "(use nisa.tensor_partition_reduce or a transpose)")
    if axes != list(builtins.range(x.ndim - len(axes), x.ndim)):
        if trailing_only:
            raise current().error(f"tensor_reduce axes {axes} of {x!r} must be its trailing free axes "
                                  "(nl.sum, nl.max, ... reorder other axes)")
        x = x.permuted([a for a in builtins.range(x.ndim) if a not in axes] + axes)
    return x, axes


def _reduction(alu: str, name: str):
    def fn(x: View, axis, dtype=None, keepdims: bool = False, mask=None, negate: bool = False, **kwargs):
        source, axes = _reduce_axes(x, axis)
        kept_axes = [a for a in builtins.range(x.ndim) if a not in axes]
        kept = tuple(x.shape[a] for a in kept_axes)
        if keepdims:  # ones where the reduced axes were, as numpy keeps them
            shape = tuple(1 if a in axes else x.shape[a] for a in builtins.range(x.ndim))
        else:
            kept_axes = list(builtins.range(len(kept)))
            shape = kept + (1,) * len(axes) if len(kept) < 2 else kept
        out = ndarray(shape, dtype or (x.dtype if x.dtype in FLOATS else "int32"), kwargs.get("buffer") or sbuf)
        dst = View(out.decl, 0, kept, [out.strides[a] for a in kept_axes])
        _emit("tensor_reduce", "vector", dst, (source,), mask, op0=alu, reduce_axes=len(axes), negate=negate)
        return out
    fn.__name__ = name
    fn.nki_alu = alu
    return fn


sum = _reduction("add", "sum")  # noqa: A001
max = _reduction("maximum", "max")  # noqa: A001
min = _reduction("minimum", "min")  # noqa: A001
prod = _reduction("multiply", "prod")


def mean(x: View, axis, dtype=None, keepdims: bool = False, mask=None, **kwargs) -> View:
    out = sum(x, axis, dtype=dtype or "float32", keepdims=keepdims, mask=mask)
    count = 1
    for a in ((axis,) if isinstance(axis, int) else axis):
        count *= x.shape[a]
    _emit("tensor_scalar", "vector", out, (out,), None, op0="multiply", operand0=(-1, 1.0 / count))
    return out


def transpose(x: View, dtype=None, mask=None, **_) -> View:
    if x.buffer != "sbuf":
        x = copy(x)
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, psum)
    _emit("nc_transpose", "tensor", out, (x,), mask)
    return out


def matmul(x: View, y: View, transpose_x: bool = False, mask=None, **_) -> View:
    """x @ y on the Tensor engine into PSUM (fp32); x given as [K, M] with transpose_x=True."""
    stationary = x if transpose_x else copy(transpose(x))
    if y.buffer != "sbuf":
        y = copy(y)
    if stationary.buffer != "sbuf":
        stationary = copy(stationary)
    out = ndarray((stationary.shape[1], y.shape[1]), float32, psum)
    _emit("nc_matmul", "tensor", out, (stationary, y), mask)
    return out


def where(condition: View, x, y, dtype=None, mask=None, **_) -> View:
    def as_tile(v, like):
        return v if isinstance(v, View) else full(like.shape, v, dtype or (x.dtype if isinstance(x, View)
                                                                          else "float32"))
    a, b = as_tile(x, condition), as_tile(y, condition)
    out = ndarray(condition.shape, dtype or promote(a.dtype, b.dtype))
    _emit("select", "vector", out, (condition, _broadcast(a, out), _broadcast(b, out)), mask)
    return out


def device_print(print_prefix, tensor: View, mask=None, **_) -> None:
    """Print `print_prefix` and the tile's values each time the kernel reaches this point, to stdout (as AWS's
    CPU simulator does; on Trainium the runtime writes them under NEURON_RT_DEBUG_OUTPUT_DIR). SBUF, PSUM or
    HBM; the kernel's results and its predicted time are unchanged."""
    trace = current()
    if not isinstance(tensor, View):
        raise trace.error(f"device_print prints a tensor, not {type(tensor).__name__}")
    trace.print_labels.append((str(print_prefix), tensor.dtype))
    trace.emit("device_print", "vector", apply_mask(tensor, mask), (), coefficients=[len(trace.print_labels) - 1])


def rand(shape, dtype="float32", buffer=sbuf, name: str = "", **_) -> View:
    """Uniform random numbers in [0, 1) from the Vector engine's generators (seeded by random_seed)."""
    from .isa_random import _uniform
    out = ndarray(shape, dtype, buffer, name)
    _uniform(out, 0.0, 1.0, None)
    return out


def random_seed(seed, mask=None, **_) -> None:
    """Seed the Vector engine's generators: a [1, 1] int32/uint32 tile (current API) or a number (beta)."""
    from .isa_random import seed_immediate, set_rng_seed
    if isinstance(seed, View):
        set_rng_seed(seed)
    else:
        seed_immediate(seed, ndarray((1, 1), "uint32", sbuf))


def dropout(x: View, rate, dtype=None, mask=None, **_) -> View:
    """x with each element zeroed with probability `rate` (a number or a [partitions, 1] tile); the kept
    elements are not rescaled, as in nki.isa.dropout."""
    from .isa_random import dropout as dropout_instruction
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    dropout_instruction(out, x, rate, mask=mask)
    return out


def broadcast_to(x: View, shape) -> View:
    return x.broadcast_to(shape)


def static_cast(x, dtype):
    """Beta helper: numpy arrays cast to a dtype (outside kernels)."""
    import numpy as np
    from . import kernel
    return np.asarray(x).astype(kernel.numpy_dtype(dtype_name(dtype)))


from .language_composites import (all, expand_dims, gather_flattened, is_hbm, is_on_chip,  # noqa: E402,F401,A004
                                  is_psum, is_sbuf, no_reorder, rms_norm, softmax, var)

__all__ = [name for name in dir() if not name.startswith("_")]
