"""nki.isa (`nisa`), current API: one function per NeuronCore instruction,
destination first, returning nothing."""
from __future__ import annotations

import math
import warnings
from typing import Optional

from . import language as nl, lnc
from .language import _broadcast, _emit, _fill_value, _operand, _reduce_axes, _tensor_tensor_engine
from .device_loops import (VirtualRegister, register_alloc, register_load, register_move,  # noqa: F401
                           register_store)
from .device_scalars import NkiScalar, scalar_alu, scalar_load, scalar_store  # noqa: F401
from .isa_random import dropout, rand2, rand_get_state, rand_set_state, rng, set_rng_seed  # noqa: F401
from .indirection import columns_of
from .isa_dma import (dge_mode, dma_compute, dma_copy, dma_transpose, oob_mode,  # noqa: F401
                      transposed_source)
from .trace import View, current


class engine:  # noqa: N801
    unknown, tensor, vector, scalar, gpsimd, activation, dma = "unknown", "tensor", "vector", "scalar", \
        "gpsimd", "scalar", "dma"


# The beta API's names of the engines.
tensor_engine, vector_engine, scalar_engine, gpsimd_engine, unknown_engine = \
    engine.tensor, engine.vector, engine.scalar, engine.gpsimd, engine.unknown


class reduce_cmd:  # noqa: N801
    """What an instruction's side reduction does with its engine's accumulator registers (activation on the
    Scalar engine, tensor_scalar_reduce on the Vector engine): one fp32 register per partition."""
    idle, reset, reduce, reset_reduce, load_reduce = "idle", "reset", "reduce", "reset_reduce", "load_reduce"


def _side_reduction(engine: str, dst: View, op, reduce_res: Optional[View], command, init=0.0,
                    identity: float = 0.0) -> None:
    """The side reduction of an instruction that wrote `dst`: dst's free axes reduced with `op` into the
    engine's registers as `command` says (reset_reduce, the default, starts anew; reduce combines with what
    the registers hold, across instructions and loop iterations; load_reduce first loads `init`, an
    immediate or a [partitions, 1] tile, then does as reduce; reset only sets them to `identity`, op's
    identity; idle leaves them), then copied to `reduce_res` whatever the command. The registers are a
    hidden SBUF tile of the kernel: read before any reset they hold the NaN sentinel, as a fresh tile does."""
    command = reduce_cmd.reset_reduce if command is None else command
    trace = current()
    if command != reduce_cmd.load_reduce and not (isinstance(init, (int, float)) and init == 0):
        raise trace.error(f"reduce_init is for reduce_cmd=load_reduce; it must be unset or 0.0 with {command!r}")
    if command not in (reduce_cmd.idle, reduce_cmd.reset, reduce_cmd.reduce, reduce_cmd.reset_reduce,
                       reduce_cmd.load_reduce):
        raise trace.error(f"reduce_cmd={command!r}: expected idle, reset, reduce, reset_reduce or load_reduce")
    registers = trace.reduce_registers(engine)
    lanes = View(registers.decl, 0, [dst.shape[0], 1], registers.strides)
    if command != reduce_cmd.idle:
        _update_registers(registers, lanes, dst, op, command, init, identity)
    if reduce_res is not None:
        tensor_copy(reduce_res, lanes)


def _update_registers(registers: View, lanes: View, dst: View, op, command, init, identity: float) -> None:
    axes = tuple(range(1, dst.ndim))
    if command == reduce_cmd.load_reduce:
        if isinstance(init, View):
            tensor_copy(lanes, init)
        else:
            memset(lanes, float(init))
        command = reduce_cmd.reduce
    if command == reduce_cmd.reset:
        memset(registers, identity)
    elif command == reduce_cmd.reset_reduce:
        tensor_reduce(lanes, op, dst, axis=axes, keepdims=True)
    else:
        partial = nl.ndarray((dst.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        tensor_reduce(partial, op, dst, axis=axes, keepdims=True)
        _emit("tensor_tensor", "vector", lanes, (lanes, partial), None, op0=alu_of(op))
    # The engine orders its own register updates, each within one instruction on the hardware: they are
    # left out of the affine_range dependency check, as accumulations are.
    current().instructions[-1]["accumulate"] = True


class nc_version:  # noqa: N801
    gen2, gen3, gen4 = 2, 3, 4


def get_nc_version() -> int:
    return current().version


def get_nc_sub_version() -> int:
    """The silicon revision within the target's NeuronCore generation: 0, the first, which is the one the
    emulator models."""
    current()
    return 0


_NUMPY_NAMES = {"add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
                "true_divide": "divide", "maximum": "maximum", "minimum": "minimum", "power": "power",
                "equal": "equal", "not_equal": "not_equal", "greater": "greater", "greater_equal": "greater_equal",
                "less": "less", "less_equal": "less_equal", "logical_and": "logical_and",
                "logical_or": "logical_or", "logical_xor": "logical_xor", "mod": "floor_mod",
                "remainder": "floor_mod", "fmod": "mod", "max": "maximum", "min": "minimum", "amax": "maximum",
                "amin": "minimum"}
_NUMPY_FUNCTIONS = {"exp": "exp", "log": "log", "tanh": "tanh", "sqrt": "sqrt", "abs": "abs", "absolute": "abs",
                    "negative": "negative", "square": "square", "sin": "sin", "cos": "cos", "sign": "sign",
                    "floor": "floor", "ceil": "ceil", "arctan": "arctan", "reciprocal": "reciprocal", "tan": "tan",
                    "trunc": "trunc"}


def alu_of(op) -> str:
    if op is None:
        return "bypass"
    name = getattr(op, "nki_alu", None) or _NUMPY_NAMES.get(getattr(op, "__name__", str(op)))
    if name is None:
        raise current().error(f"{op!r} is not an ALU operator (nl.add, nl.multiply, nl.maximum, ...)")
    return name


def function_of(op) -> str:
    name = getattr(op, "nki_function", None) or _NUMPY_FUNCTIONS.get(getattr(op, "__name__", str(op)))
    if name is None and getattr(op, "__name__", "") == "copy":
        name = "copy"
    if name is None:
        raise current().error(f"{op!r} is not an activation function (nl.exp, nl.tanh, nl.copy, ...)")
    return name


def _engine(requested, default: str) -> str:
    return default if requested in (None, "unknown") else requested


def nc_matmul(dst: View, stationary: View, moving: View, accumulate: Optional[bool] = None,
              is_transpose: bool = False, mask=None, **_) -> None:
    """dst[M, N] = stationary[K, M].T @ moving[K, N]; accumulate=None adds to what an earlier
    write left in that PSUM range and overwrites a range not yet written, as the hardware does."""
    if any(columns_of(v) is not None for v in (dst, stationary, moving)) and (
            is_transpose or tuple(_.get("tile_position") or (0, 0)) != (0, 0)):
        raise current().error("nc_matmul: an .indirect() operand works without is_transpose and tile_position "
                              "(hardware tiling)")
    if is_transpose:
        _emit("nc_transpose", "tensor", dst, (stationary,), mask)
        return
    if accumulate is None:  # an .indirect() dst's columns are known only as it runs: it starts a group
        accumulate = nl._psum_written_before(dst) and columns_of(dst) is None
    _emit("nc_matmul", "tensor", dst, (stationary, moving), mask, accumulate=bool(accumulate))


def nc_transpose(dst: View, data: View, engine=None, mask=None, **_) -> None:
    _emit("nc_transpose", _engine(engine, "tensor" if data.shape[0] > 32 or data.shape[1] > 32 or
                                  dst.buffer == "psum" else "vector"), dst, (data,), mask)


def tensor_tensor(dst: View, data1: View, data2: View, op, engine=None, mask=None, **_) -> None:
    if data1.buffer == "psum" and data2.buffer == "psum":
        raise current().error("tensor_tensor: at most one input may be in PSUM")
    a, b, alu = _broadcast(data1, dst), _broadcast(data2, dst), alu_of(op)
    _emit("tensor_tensor", _engine(engine, _tensor_tensor_engine(dst, a, b, alu)), dst, (a, b), mask, op0=alu)


def tensor_scalar(dst: View, data: View, op0, operand0, reverse0: bool = False, op1=None, operand1=None,
                  reverse1: bool = False, engine=None, mask=None, **_) -> None:
    inputs = [data]
    first = _operand(operand0, inputs, data)
    second = _operand(operand1, inputs, data) if op1 is not None else (-1, 0.0)
    _emit("tensor_scalar", _engine(engine, "vector"), dst, inputs, mask, op0=alu_of(op0), operand0=first,
          reverse0=reverse0, op1=alu_of(op1), operand1=second, reverse1=reverse1)


def tensor_scalar_reduce(dst: View, data: View, op0, operand0, reduce_op, reduce_res: View, reverse0: bool = False,
                         engine=None, mask=None, reduce_cmd=None, reduce_init=0.0, **_) -> None:
    """dst = data op0 operand0, and reduce_res = reduce_op over dst's free axes (Vector engine)."""
    tensor_scalar(dst, data, op0, operand0, reverse0=reverse0, engine=engine, mask=mask)
    _side_reduction("vector", dst, reduce_op, reduce_res, reduce_cmd, reduce_init)


def tensor_reduce(dst: View, op, data: View, axis, negate: bool = False, keepdims: bool = False, mask=None,
                  **_) -> None:
    source, axes = _reduce_axes(data, axis, trailing_only=True)
    kept = data.ndim - len(axes)
    target = dst
    if dst.ndim == data.ndim and dst.ndim > kept:  # kept dimensions: drop the reduced ones where they are
        target = dst.permuted([a for a in range(dst.ndim) if a not in axes] + axes)
    if target.ndim > kept:
        target = View(target.decl, target.offset, target.sizes[:kept], target.strides[:kept])
    _emit("tensor_reduce", "vector", target, (source,), mask, op0=alu_of(op), reduce_axes=len(axes),
          negate=negate)


def tensor_copy(dst: View, src: View, engine=None, mask=None, **_) -> None:
    chosen = _engine(engine, "vector")
    if chosen == "gpsimd" and "psum" in (dst.buffer, src.buffer):
        raise current().error("tensor_copy: the GpSimd engine cannot reach PSUM")
    d, s = nl._same_shape(dst, src)
    if d is None:
        raise current().error(f"tensor_copy: {src!r} and {dst!r} differ in shape")
    _emit("tensor_copy", chosen, d, (s,), mask)


def activation(dst: View, op, data: View, bias=None, scale=1.0, reduce_op=None, reduce_res=None, mask=None,
               reduce_cmd=None, reduce_init=0.0, **_) -> None:
    inputs = [data]
    scale_operand = _operand(scale, inputs, data) if isinstance(scale, View) else (-1, float(scale))
    bias_operand = _operand(bias, inputs, data) if bias is not None else (-1, 0.0)
    _emit("activation", "scalar", dst, inputs, mask, function=function_of(op), op0="multiply",
          operand0=scale_operand, op1="add", operand1=bias_operand)
    if reduce_res is not None or reduce_cmd not in (None, "idle"):
        _side_reduction("scalar", dst, reduce_op or nl.add, reduce_res, reduce_cmd, reduce_init)


# The value a running reduction starts from (a reset of the registers, tensor_scalar_cumulative's start).
_REDUCTION_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf,
                       "abs_max": 0.0, "abs_min": math.inf}

# nisa.activate2's tensor-scalar stage: the (op0, op1) pairs AWS documents, and its reductions.
_ACTIVATE2_PAIRS = (("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
                    ("subtract", "bypass"), ("bypass", "bypass"))
_ACTIVATE2_REDUCTIONS = ("add", "maximum", "minimum", "abs_max", "abs_min")


def activate2(dst: View, op, data: View, imm0, imm1, op0, op1, relu_param=0.0, reverse0: bool = False,
              reverse1: bool = False, reduce_op=None, reduce_res: Optional[View] = None,
              reduce_cmd=reduce_cmd.idle, engine=None, mask=None, **_) -> None:
    """dst = op((data op0 imm0) op1 imm1), in fp32 and rounded once to dst's dtype (NeuronCore-v4 and newer):
    imm0 and imm1 immediates or [partitions, 1] tiles, reverse0/1 putting the immediate first, relu_param
    nl.prelu's slope. On the Scalar engine, reduce_op (add, maximum, minimum, abs_max, abs_min) over dst's
    free axes into the registers nisa.activation shares, as reduce_cmd says; engine=nisa.engine.gpsimd
    (SDK 2.33) runs the first two stages there, without the reduction."""
    trace = current()
    if trace.version < nc_version.gen4:
        raise trace.error(f"nisa.activate2 is a NeuronCore-v4 instruction and this kernel runs on a "
                          f"NeuronCore-v{trace.version}; use nisa.activation there")
    first, second = alu_of(op0), alu_of(op1)
    if (first, second) not in _ACTIVATE2_PAIRS:
        raise trace.error(f"activate2: op0={first}, op1={second}; the supported pairs are "
                          + ", ".join(f"({a}, {b})" for a, b in _ACTIVATE2_PAIRS))
    if (reverse0 and first == "bypass") or (reverse1 and second == "bypass"):
        raise trace.error("activate2: reverse0 and reverse1 need their operator (op0, op1) set")
    chosen = _engine(engine, "scalar")
    reducing = reduce_res is not None or reduce_cmd not in (None, "idle")
    if chosen not in ("scalar", "gpsimd"):
        raise trace.error(f"activate2 runs on the Scalar or the GpSimd engine, not {chosen!r}")
    if chosen == "gpsimd" and (reducing or "psum" in (dst.buffer, data.buffer)):
        raise trace.error("activate2 on the GpSimd engine: no reduction (Scalar engine only) and no PSUM operand")
    if "hbm" in (dst.buffer, data.buffer):
        raise trace.error("activate2 reads and writes SBUF or PSUM tiles, not HBM")
    if isinstance(imm0, View) and isinstance(imm1, View) and imm0.dtype != imm1.dtype:
        raise trace.error(f"activate2: imm0 {imm0!r} and imm1 {imm1!r} must share a dtype")
    d, s = nl._same_shape(dst, data)
    if d is None:
        raise trace.error(f"activate2: {data!r} and {dst!r} differ in partitions or elements")
    inputs = [s]
    fields = {"op0": first, "op1": second, "reverse0": bool(reverse0), "reverse1": bool(reverse1),
              "function": function_of(op)}
    if first != "bypass":
        fields["operand0"] = _operand(imm0, inputs, s, "activate2's imm0")
    if second != "bypass":
        fields["operand1"] = _operand(imm1, inputs, s, "activate2's imm1")
    if fields["function"] == "prelu":
        fields["operand2"] = _operand(relu_param, inputs, s, "activate2's relu_param")
    _emit("activation", chosen, d, inputs, mask, **fields)
    if reducing:
        combine = alu_of(reduce_op or nl.add)
        if combine not in _ACTIVATE2_REDUCTIONS:
            raise trace.error(f"activate2: reduce_op={combine}; it reduces with add, maximum, minimum, abs_max "
                              "or abs_min")
        if reduce_cmd == "load_reduce":
            raise trace.error("activate2 takes reduce_cmd idle, reset, reduce or reset_reduce")
        _side_reduction("scalar", dst, reduce_op or nl.add, reduce_res, reduce_cmd,
                        identity=_REDUCTION_IDENTITY[combine])


def exponential(dst: View, src: View, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0,
                mask=None, **_) -> None:
    """dst = exp(src - max_value) on the Vector engine, in fp32 before dst's rounding (NeuronCore-v4 and
    newer); max_value an immediate or a [partitions, 1] tile; reduce_cmd sums dst's free axes into the
    Vector engine's registers (and reduce_res), as tensor_scalar_reduce's do."""
    trace = current()
    if trace.version < nc_version.gen4:
        raise trace.error(f"nisa.exponential is a NeuronCore-v4 instruction and this kernel runs on a "
                          f"NeuronCore-v{trace.version}; use nisa.activation(op=nl.exp, bias=...) there")
    if isinstance(max_value, View):
        shifted = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.sbuf)  # the engine's fp32, not dst's dtype
        tensor_scalar(shifted, src, op0=nl.subtract, operand0=max_value, mask=mask)
        _emit("activation", "vector", dst, (shifted,), mask, function="exp")
    else:
        _emit("activation", "vector", dst, (src,), mask, function="exp", op1="add",
              operand1=(-1, -float(max_value)))
    _side_reduction("vector", dst, nl.add, reduce_res, reduce_cmd, reduce_init)


def activation_reduce(dst: View, op, data: View, reduce_op, reduce_res: View, bias=None, scale=1.0, **kw) -> None:
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, **kw)


def memset(dst: View, value, engine=None, mask=None, **_) -> None:
    _emit("memset", _engine(engine, "vector"), dst, (), mask, operand0=_fill_value(value, dst, "memset: value"))


def iota(dst: View, pattern=None, offset: int = 0, channel_multiplier: int = 0, mask=None, **_) -> None:
    """dst[c, ...] = offset + c * channel_multiplier + sum of step * index over `pattern`'s [step, count]."""
    if dst.buffer != "sbuf":
        raise current().error("iota runs on the GpSimd engine, which writes SBUF only")
    pattern = list(pattern or [[1, dst.elements() // dst.shape[0]]])
    free = 1
    for _, count in pattern:
        free *= count
    if free * dst.shape[0] != dst.elements():
        raise current().error(f"iota pattern {pattern} does not cover {dst!r}")
    target = View(dst.decl, dst.offset, (dst.shape[0],) + tuple(c for _, c in pattern),
                  (dst.strides[0],) + _row_major(tuple(c for _, c in pattern)))
    terms = [offset, channel_multiplier] + [s for s, _ in pattern]
    for term in terms:  # the instruction's arithmetic is int32 (AWS): integers, exactly, not through fp32
        if not nl._is_integer(term) or not -(1 << 31) <= int(term) < (1 << 31):
            raise current().error(f"iota: offset, channel_multiplier and the pattern's steps are int32 values, "
                                  f"not {term!r}")
    _emit("iota", "gpsimd", target, (), mask, coefficients=terms, integers=terms)


def affine_select(dst: View, pattern, offset: int, channel_multiplier: int, on_true_tile: View,
                  on_false_value, cmp_op=None, mask=None, **_) -> None:
    """dst[c, ...] = on_true_tile[c, ...] where cmp_op(offset + c * channel_multiplier + sum of step * index over
    `pattern`'s [step, count], 0) holds, else on_false_value (cmp_op: nl.equal unless given), on GpSimd."""
    if dst.buffer != "sbuf" or on_true_tile.buffer != "sbuf":
        raise current().error("affine_select runs on the GpSimd engine, which reads and writes SBUF only")
    pattern = list(pattern)
    counts = tuple(c for _, c in pattern)
    free = 1
    for count in counts:
        free *= count
    for tile in (dst, on_true_tile):
        if free * tile.shape[0] != tile.elements() or tuple(tile.strides[1:]) != _row_major(tuple(tile.shape[1:])):
            raise current().error(f"affine_select pattern {pattern} does not cover {tile!r} (a dense tile)")
    shaped = [View(t.decl, t.offset, (t.shape[0],) + counts, (t.strides[0],) + _row_major(counts))
              for t in (dst, on_true_tile)]
    _emit("affine_select", "gpsimd", shaped[0], (shaped[1],), mask, op0=alu_of(cmp_op or nl.equal),
          operand0=(-1, float(on_false_value)), coefficients=[offset, channel_multiplier] + [s for s, _ in pattern])


def _row_major(sizes):
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def reciprocal(dst: View, data: View, mask=None, **_) -> None:
    _emit("activation", "vector", dst, (data,), mask, function="reciprocal")


def tensor_tensor_scan(dst: View, data0: View, data1: View, initial, op0, op1, reverse0: bool = False,
                       reverse1: bool = False, mask=None, **_) -> None:
    if reverse0 or reverse1:
        raise current().error("tensor_tensor_scan with reversed operands is not supported by this emulator yet")
    inputs = [data0, data1]
    start = _operand(initial, inputs, dst)  # an immediate, or a [partitions, 1] tile: one start per partition
    _emit("tensor_tensor_scan", "vector", dst, tuple(inputs), mask, op0=alu_of(op0), op1=alu_of(op1),
          operand0=start)


_CUMULATIVE_OPERATORS = ("add", "subtract", "multiply", "maximum", "minimum")


def tensor_scalar_cumulative(dst: View, src: View, op0, op1, imm0, imm1=None, reduce_cmd=None,
                             reverse0: bool = False, mask=None, **_) -> None:
    """Along each partition of a [partitions, free] tile: reg = op1(src[i] op0 imm0, reg), dst[i] = reg (with
    reverse0, imm0 op0 src[i]), on the Vector engine. reg starts at op1's identity (reset_reduce, the
    default), at imm1 (load_reduce) or where the engine's registers were left (reduce), and the registers
    keep each partition's last value. As AWS writes it, subtract alternates: reg = (src[i] op0 imm0) - reg."""
    trace = current()
    command = reduce_cmd or "reset_reduce"  # reduce_cmd's values are their names (the argument hides the class)
    accumulate = alu_of(op1)
    if accumulate not in _CUMULATIVE_OPERATORS:
        raise trace.error(f"tensor_scalar_cumulative accumulates with add, subtract, multiply, maximum or minimum, "
                          f"not {accumulate}")
    if command not in ("reset_reduce", "reduce", "load_reduce"):
        raise trace.error(f"tensor_scalar_cumulative: reduce_cmd={command!r}; expected reset_reduce, reduce or "
                          "load_reduce")
    if (imm1 is not None) != (command == "load_reduce"):
        raise trace.error("tensor_scalar_cumulative: imm1 is the start of reduce_cmd=load_reduce, and only of it")
    d, s = nl._same_shape(dst, src)
    if d is None or d.ndim != 2:
        raise trace.error(f"tensor_scalar_cumulative: dst {dst!r} and src {src!r} must be [partitions, free] tiles "
                          "of one shape")
    for view in (d, s):
        if view.dtype in ("int32", "uint32", "tfloat32"):
            raise trace.error(f"tensor_scalar_cumulative: {view.dtype} is not an input or output dtype of it")
    rows = d.shape[0]
    registers = trace.reduce_registers("vector")
    lanes = View(registers.decl, 0, [rows, 1], registers.strides)
    start = {"reset_reduce": _REDUCTION_IDENTITY[accumulate], "load_reduce": imm1, "reduce": lanes}[command]
    scaled = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
    tensor_scalar(scaled, s, op0, imm0, reverse0=reverse0, mask=mask)
    if accumulate == "subtract":  # reg = scaled - reg = (reg - scaled) * -1
        minus_one = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        memset(minus_one, -1.0)
        tensor_tensor_scan(d, scaled, minus_one, start, nl.subtract, nl.multiply, mask=mask)
    else:  # the other four commute: reg op1 scaled
        tensor_tensor_scan(d, scaled, scaled, start, getattr(nl, accumulate), None, mask=mask)
    tensor_copy(lanes, d[:, d.shape[1] - 1:d.shape[1]])
    trace.instructions[-1]["accumulate"] = True  # a register update, ordered by the engine (as _side_reduction)


def select(dst: View, predicate: View, on_true: View, on_false: View, mask=None, **_) -> None:
    _emit("select", "vector", dst, (predicate, on_true, on_false), mask)


_PREDICATE_DTYPES = ("uint8", "uint16", "uint32")


def _alike(views):
    """The views as one shape (size-1 axes dropped where they differ only by those), or None."""
    if all(v.shape == views[0].shape for v in views):
        return views
    views = [nl._squeezed(v) for v in views]
    return views if all(v.shape == views[0].shape for v in views) else None


def tensor_copy_predicated(dst: View, src, predicate: View, reverse_pred: bool = False, mask=None, **_) -> None:
    """dst = src where predicate is nonzero (zero with reverse_pred), dst as it was elsewhere, on the Vector
    engine; src a tile of dst's shape and dtype or a number of dst's kind (float or integer)."""
    trace = current()
    if predicate.dtype not in _PREDICATE_DTYPES:
        raise trace.error(f"tensor_copy_predicated: the predicate is {predicate.dtype}; it must be uint8, uint16 "
                          "or uint32")
    views = _alike([dst, predicate] + ([src] if isinstance(src, View) else []))
    if views is None:
        raise trace.error(f"tensor_copy_predicated: dst {dst!r}, the predicate {predicate!r} and src differ in shape")
    d, p = views[0], views[1]
    if not isinstance(src, View):
        integer_dst = dst.dtype.startswith(("int", "uint"))
        if isinstance(src, bool) or not isinstance(src, (int, float)) or isinstance(src, float) == integer_dst:
            raise trace.error(f"tensor_copy_predicated: a scalar src must be a Python {'int' if integer_dst else 'float'}"
                              f" for a {dst.dtype} dst, got {src!r}")
        _emit("select", "vector", d, (p, d), mask, operand0=(-1, float(src)), reverse0=bool(reverse_pred))
        return
    if src.dtype != dst.dtype:
        raise trace.error(f"tensor_copy_predicated: src is {src.dtype} and dst {dst.dtype}; they must agree")
    if src.buffer == "psum" and predicate.buffer == "psum":
        raise trace.error("tensor_copy_predicated: src or predicate may be in PSUM, not both")
    s = views[2]
    _emit("select", "vector", d, (p, d, s) if reverse_pred else (p, s, d), mask)


def _max_side_reduction(instruction: str, dst: View, reduce_res: Optional[View], command, op) -> None:
    """The maximum over dst's free axes that select_reduce and range_select add (their only reduce_op)."""
    trace = current()
    numpy_max = getattr(op, "__name__", None) in ("amax", "max")  # the beta API's default, np.amax
    if op is not None and not numpy_max and alu_of(op) != "maximum":
        raise trace.error(f"{instruction}: reduce_op supports maximum only")
    if reduce_res is not None:
        if tuple(reduce_res.shape) != (dst.shape[0], 1) or not reduce_res.dtype.startswith(("float", "bfloat")):
            raise trace.error(f"{instruction}: reduce_res {reduce_res!r} must be a float [{dst.shape[0]}, 1] tile")
        _side_reduction("vector", dst, nl.maximum, reduce_res, command)
    elif command not in (None, reduce_cmd.idle):
        _side_reduction("vector", dst, nl.maximum, None, command)


_SELECT_REDUCE_PREDICATES = ("int8", "uint8", "int16", "uint16")


def select_reduce(dst: View, predicate: View, on_true: View, on_false, reduce_res: View = None, reduce_cmd=None,
                  reduce_op=None, reverse_pred: bool = False, mask=None, **_) -> None:
    """dst = on_true where the predicate is nonzero (zero with reverse_pred), else on_false (a number, or a
    [partitions, 1] tile for each partition), on the Vector engine; with reduce_res, also the maximum over
    dst's free axes, through the engine's registers as reduce_cmd says (as tensor_scalar_reduce)."""
    trace = current()
    if predicate.dtype not in _SELECT_REDUCE_PREDICATES:
        raise trace.error(f"select_reduce: the predicate is {predicate.dtype}; it must be int8, uint8, int16 or "
                          "uint16")
    if on_true.dtype in ("tfloat32", "int32", "uint32"):
        raise trace.error(f"select_reduce: on_true cannot be {on_true.dtype}")
    if on_true.buffer == "psum" and predicate.buffer == "psum":
        raise trace.error("select_reduce: on_true or predicate may be in PSUM, not both")
    views = _alike([dst, predicate, on_true])
    if views is None:
        raise trace.error(f"select_reduce: dst {dst!r}, the predicate {predicate!r} and on_true {on_true!r} "
                          "differ in shape")
    d, p, t = views
    if isinstance(on_false, View):
        if on_false.ndim != 2 or on_false.shape != (d.shape[0], 1):
            raise trace.error(f"select_reduce: on_false {on_false!r} must be a number or a [{d.shape[0]}, 1] tile")
        inputs = [p, t]
        _operand(on_false, inputs, d)  # appends the tile spread along the free axes
        _emit("select", "vector", d, tuple(inputs), mask, reverse0=bool(reverse_pred))
    else:
        if isinstance(on_false, bool) or not isinstance(on_false, (int, float)):
            raise trace.error(f"select_reduce: on_false must be a number or a tile, got {on_false!r}")
        # select's immediate is its first choice: swap the choices by flipping the predicate
        _emit("select", "vector", d, (p, t), mask, operand0=(-1, float(on_false)), reverse0=not reverse_pred)
    _max_side_reduction("select_reduce", d, reduce_res, reduce_cmd, reduce_op)


_COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
_FP32_LOWEST = -3.4028234663852886e38


def range_select(dst: View, on_true_tile: View, comp_op0, comp_op1, bound0: View, bound1: View, reduce_cmd=None,
                 reduce_res: View = None, reduce_op=None, range_start=0.0, on_false_value=_FP32_LOWEST, mask=None,
                 **_) -> None:
    """dst[p, j] = on_true_tile[p, j] where the free index j + range_start satisfies both
    `comp_op0 bound0[p]` and `comp_op1 bound1[p]` (bounds: fp32 [partitions, 1] tiles), else on_false_value
    (fp32's lowest unless given: a row with nothing selected then has that maximum); with reduce_res, the
    maximum over each row as select_reduce gives it. NeuronCore-v3 and newer (Vector engine)."""
    trace = current()
    if trace.version < nc_version.gen3:
        raise trace.error(f"nisa.range_select is a NeuronCore-v3 instruction and this kernel runs on a "
                          f"NeuronCore-v{trace.version}")
    ops = [alu_of(comp_op0), alu_of(comp_op1)]
    if any(op not in _COMPARISONS for op in ops):
        raise trace.error(f"range_select compares the index with its bounds: comp_op0 and comp_op1 must be "
                          f"comparisons (nl.less, nl.greater_equal, ...), not {ops[0]} and {ops[1]}")
    d, t = nl._same_shape(dst, on_true_tile)
    if d is None or d.ndim != 2:
        raise trace.error(f"range_select: dst {dst!r} and on_true_tile {on_true_tile!r} must be [partitions, free] "
                          "tiles of one shape")
    for name, bound in (("bound0", bound0), ("bound1", bound1)):
        if not isinstance(bound, View) or tuple(bound.shape) != (d.shape[0], 1) or bound.dtype != "float32":
            raise trace.error(f"range_select: {name} must be a float32 [{d.shape[0]}, 1] tile, got {bound!r}")
    inputs = [t]
    low, high = _operand(bound0, inputs, d), _operand(bound1, inputs, d)
    _emit("range_select", "vector", d, inputs, mask, op0=ops[0], op1=ops[1], operand0=low, operand1=high,
          coefficients=[float(range_start), float(on_false_value)])
    _max_side_reduction("range_select", d, reduce_res, reduce_cmd, reduce_op)


def scalar_tensor_tensor(dst: View, data: View, op0, operand0, op1, operand1: View, reverse0: bool = False,
                         reverse1: bool = False, mask=None, **_) -> None:
    """dst = (data op0 operand0) op1 operand1: operand0 a scalar or a [partitions, 1] vector, operand1 a
    tile of data's shape (operands swap sides with reverse0 / reverse1)."""
    if not isinstance(operand1, View):
        raise current().error("scalar_tensor_tensor: operand1 is a tile of data's shape")
    inputs = [data, operand1]
    first = _operand(operand0, inputs, data)
    _emit("scalar_tensor_tensor", "vector", dst, inputs, mask, op0=alu_of(op0), operand0=first, op1=alu_of(op1),
          reverse0=reverse0, reverse1=reverse1)


def tensor_partition_reduce(dst: View, op, data: View, mask=None, **_) -> None:
    """dst[0, ...] = op (nl.add, nl.maximum, nl.minimum) over the partitions of data, on the GpSimd engine;
    dst is one partition with data's free shape."""
    _emit("tensor_partition_reduce", "gpsimd", dst, (data,), mask, op0=alu_of(op))


def _start_partition(view: View) -> int:
    """The first partition an on-chip view reads or writes (tiles are stored partition first)."""
    return view.offset // view.decl.strides()[0]


def nc_stream_shuffle(dst: View, src: View, shuffle_mask, dtype=None, mask=None, **_) -> None:
    """Within each quadrant of 32 partitions, dst partition i = src partition shuffle_mask[i] (255 leaves dst
    partition i as it was), the same 32-entry mask for every quadrant; dst may be src. Vector engine."""
    trace = current()
    entries = [int(m) for m in shuffle_mask]
    if len(entries) != 32 or any(not (0 <= m < 32 or m == 255) for m in entries):
        raise trace.error(f"nc_stream_shuffle: shuffle_mask must be 32 partition numbers 0-31 or 255, got {entries}")
    if src.dtype != dst.dtype or (dtype is not None and nl.dtype_name(dtype) != dst.dtype):
        raise trace.error(f"nc_stream_shuffle: src ({src.dtype}) and dst ({dst.dtype}) must have one dtype")
    active = -(-max(src.shape[0], dst.shape[0]) // 32) * 32
    allowed = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    for name, view in (("src", src), ("dst", dst)):
        if _start_partition(view) not in allowed:
            raise trace.error(f"nc_stream_shuffle: {name} starts at partition {_start_partition(view)}; with "
                              f"{active} active partitions it must start at {' or '.join(map(str, allowed))}")
    _emit("nc_stream_shuffle", "vector", dst, (src,), mask, coefficients=entries)


_EXACT_IN_FP32 = 1 << 24  # the instruction's immediates travel as fp32


def nonzero_with_count(dst: View, src: View, index_offset=0, padding_val=-1, **_) -> None:
    """On each GpSimd core's first partition (0, 16, ..., 112) only: dst[p] = the positions (free axes
    flattened) of src[p]'s nonzero elements plus index_offset, then padding_val up to src's length, then
    their count; dst holds one more element per partition than src. Other partitions of dst keep what they
    held. src float32 or int32, dst int32, both in SBUF. NeuronCore-v3 and newer."""
    trace = current()
    if trace.version < nc_version.gen3:
        raise trace.error(f"nisa.nonzero_with_count is a NeuronCore-v3 instruction and this kernel runs on a "
                          f"NeuronCore-v{trace.version}")
    for name, value in (("index_offset", index_offset), ("padding_val", padding_val)):
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= _EXACT_IN_FP32:
            raise trace.error(f"nonzero_with_count: {name} must be an integer below 2**24 in magnitude, got {value!r}")
    for name, view in (("src", src), ("dst", dst)):
        if view.buffer != "sbuf":
            raise trace.error(f"nonzero_with_count: {name} must be in SBUF, not {view.buffer}")
        if _start_partition(view) % 16:
            raise trace.error(f"nonzero_with_count: {name} starts at partition {_start_partition(view)}; the "
                              "GpSimd cores read partitions 0, 16, ..., 112, so it must start at one of them")
    _emit("nonzero_with_count", "gpsimd", dst, (src,), None, coefficients=[index_offset, padding_val])


def sequence_bounds(dst: View, segment_ids: View, **_) -> None:
    """For each element of a one-partition tile of segment ids: where its segment starts (dst[0, 0, i]) and
    one past where it ends (dst[0, 1, i]); a segment is a run of equal ids, and id 0 is padding, whose
    bounds are the tile's length and -1. Ids float32 or int32 (non-negative integers), dst float32 or
    int32 of the ids' shape with a 2 inserted after the partition axis, both in SBUF. GpSimd engine."""
    trace = current()
    for name, view in (("segment_ids", segment_ids), ("dst", dst)):
        if view.buffer != "sbuf":
            raise trace.error(f"sequence_bounds: {name} must be in SBUF, not {view.buffer}")
    _emit("sequence_bounds", "gpsimd", dst, (segment_ids,), None)


_ELEMENTS_PER_INDEX = (1, 2, 4, 8, 16, 32)


def local_gather_indices(index: View, num_valid_indices=None) -> int:
    """The indices each GpSimd core takes: num_valid_indices, else all its 16 partitions of `index` hold."""
    return 16 * math.prod(index.shape[1:]) if num_valid_indices is None else num_valid_indices


def local_gather(dst: View, src_buffer: View, index: View, num_elem_per_idx=1, num_valid_indices=None,
                 **_) -> None:
    """Each GpSimd core gathers within its 16 partitions (0-15, 16-31, ...): index j of a core is
    partition j % 16's element j / 16 of `index` (uint16, partition first), and every partition p of the
    core gets, for each of the first num_valid_indices indices, elements [index * n, index * n + n) of its
    own src_buffer data (free axes flattened; n = num_elem_per_idx) in dst, in src_buffer's dtype. The
    default num_valid_indices is all of the core's indices. All in SBUF. GpSimd engine."""
    trace = current()
    for name, view in (("dst", dst), ("src_buffer", src_buffer), ("index", index)):
        if view.buffer != "sbuf":
            raise trace.error(f"local_gather: {name} must be in SBUF, not {view.buffer}")
        if _start_partition(view) % 16:
            raise trace.error(f"local_gather: {name} starts at partition {_start_partition(view)}; each GpSimd "
                              "core gathers within partitions 16c to 16c + 15, so it must start at one of 0, 16, ...")
    if isinstance(num_elem_per_idx, bool) or num_elem_per_idx not in _ELEMENTS_PER_INDEX:
        raise trace.error(f"local_gather: num_elem_per_idx must be one of {_ELEMENTS_PER_INDEX}, "
                          f"not {num_elem_per_idx!r}")
    valid = local_gather_indices(index, num_valid_indices)
    if isinstance(valid, bool) or not isinstance(valid, int):
        raise trace.error(f"local_gather: num_valid_indices must be an integer, not {num_valid_indices!r}")
    _emit("local_gather", "gpsimd", dst, (src_buffer, index), None, coefficients=[num_elem_per_idx, valid])


def nc_n_gather(dst: View, data: View, indices: View, **_) -> None:
    """dst[p, j...] = data[p, indices[p, j...]] with data's free axes flattened, within each partition; dst has
    the data's dtype and the indices' shape, the indices are uint32, all in SBUF. GpSimd engine."""
    trace = current()
    for name, view in (("dst", dst), ("data", data), ("indices", indices)):
        if view.buffer != "sbuf":
            raise trace.error(f"nc_n_gather: {name} must be in SBUF, not {view.buffer}")
    _emit("nc_n_gather", "gpsimd", dst, (data, indices), None)


def max8(dst: View, src: View, mask=None, **_) -> None:
    """dst[p, :8] = the 8 largest values of partition p of src, in descending order."""
    _emit("max8", "vector", dst, (src,), mask)


def nc_find_index8(dst: View, data: View, vals: View, mask=None, **_) -> None:
    """dst[p, j] = the index (within partition p of data, free axes flattened) of vals[p, j]'s first
    occurrence; a value repeated in vals takes the next occurrence; a value not found gets all ones."""
    _emit("nc_find_index8", "vector", dst, (data, vals), mask)


def nc_match_replace8(dst: View, data: View, vals: View, imm, dst_idx: View = None, mask=None, **_) -> None:
    """dst = data with the first occurrence of each of vals[p, :8] replaced by imm, vals taken from the
    last to the first (a value repeated in vals replaces its next occurrence each time); dst_idx, if given,
    gets where each was found (a repeated value's first occurrence in its highest slot, the reverse of
    nc_find_index8's pairing; all ones where a value is not found)."""
    if dst_idx is not None:  # read before dst is written: dst may be data itself
        _emit("nc_find_index8", "vector", dst_idx, (data, vals), mask, reverse0=True, operand0=(-1, float(imm)))
    _emit("nc_match_replace8", "vector", dst, (data, vals), mask, operand0=(-1, float(imm)))


def bn_stats(dst: View, data: View, mask=None, **_) -> None:
    """dst[p, :6] = (count, mean, variance * count) of partition p's even-indexed elements, then of its
    odd-indexed ones: the input of bn_aggr (at most nl.tile_size.bn_stats_fmax elements per partition)."""
    _emit("bn_stats", "vector", dst, (data,), mask)


def bn_aggr(dst: View, data: View, mask=None, **_) -> None:
    """dst[p, :2] = (mean, population variance) of the (count, mean, variance * count) triples in
    partition p of data, the outputs of one or more bn_stats."""
    _emit("bn_aggr", "vector", dst, (data,), mask)


# The largest exponent of each packed MX type's values (OCP MX emax_elem).
_MX_MAX_EXPONENT = {"float8_e5m2_x4": 15, "float8_e4m3fn_x4": 8, "float4_e2m1fn_x4": 2}


def quantize_mx(dst: View, src: View, dst_scale: View, **_) -> None:
    """dst (float8_*_x4, [P, F / 4]) and dst_scale (uint8) = src (bf16/fp16, [P, F]) in MXFP8: one scale per
    8 partitions x 4 values, spread over the SBUF quadrants as nc_matmul_mx reads them (NeuronCore-v4)."""
    if dst.dtype not in _MX_MAX_EXPONENT:
        raise current().error(f"quantize_mx: dst must be float8_e5m2_x4 or float8_e4m3fn_x4, not {dst.dtype}")
    # One instruction of the Vector engine, issued as two here so that each writes one tile: the scales,
    # then the data divided by them.
    _emit("quantize_mx_scales", "vector", dst_scale, (src,), None, coefficients=[_MX_MAX_EXPONENT[dst.dtype]])
    _emit("quantize_mx", "vector", dst, (src, dst_scale), None)


def nc_matmul_mx(dst: View, stationary: View, moving: View, stationary_scale: View, moving_scale: View,
                 tile_position=None, tile_size=None, accumulate: Optional[bool] = None, **_) -> None:
    """dst[M, N] (+)= the product of packed MX tiles stationary [K, M] and moving [K, N] over K and the four
    values of each element, each value times its group's scale (NeuronCore-v4). Row tiling (tile_position,
    tile_size) changes where the Tensor engine runs it, not the result."""
    operands = (dst, stationary, moving, stationary_scale, moving_scale)
    if any(columns_of(v) is not None for v in operands) and tuple(tile_position or (0, 0)) != (0, 0):
        raise current().error("nc_matmul_mx: an .indirect() operand works without tile_position (hardware tiling)")
    if accumulate is None:
        accumulate = nl._psum_written_before(dst) and columns_of(dst) is None
    _emit("nc_matmul_mx", "tensor", dst, (stationary, moving, stationary_scale, moving_scale), None,
          accumulate=bool(accumulate))


def _deprecated_lnc(name: str):
    """nki.isa's name of an nki.lnc call: AWS keeps it as a wrapper that warns."""
    def wrapper(*args, pipe_id=None, **kwargs):
        warnings.warn(f"nki.isa.{name} is deprecated: use nki.lnc.{name}", DeprecationWarning, stacklevel=2)
        return getattr(lnc, name)(*args, **kwargs)
    wrapper.__name__ = name
    return wrapper


sendrecv, sendrecv_compute, core_barrier = (_deprecated_lnc(n) for n in ("sendrecv", "sendrecv_compute",
                                                                         "core_barrier"))
