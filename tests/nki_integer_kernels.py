"""Kernels that compute on integers exactly, written for these tests: integer immediates past fp32's
24-bit mantissa, integer memsets, GpSimd's 32-bit integer arithmetic and bitvec reductions."""
import nki
import nki.isa as nisa
import nki.language as nl

ARITHMETIC = {"add": nl.add, "subtract": nl.subtract, "multiply": nl.multiply, "maximum": nl.maximum,
              "minimum": nl.minimum, "equal": nl.equal, "not_equal": nl.not_equal, "greater": nl.greater,
              "greater_equal": nl.greater_equal, "less": nl.less, "less_equal": nl.less_equal}


def _out(tile, shape, dtype):
    result = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(result, value=tile)
    return result


@nki.jit
def bitvec_immediates(x, mask, pattern):
    """x & mask, x | mask and x ^ pattern with immediates, through nisa.tensor_scalar and nl's operators."""
    a = nl.load(x)
    both = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(both, a, nl.bitwise_and, mask, op1=nl.bitwise_xor, operand1=pattern)
    return tuple(_out(t, x.shape, x.dtype) for t in (nl.bitwise_and(a, mask), nl.bitwise_or(a, mask),
                                                     nl.bitwise_xor(pattern, a), both))


@nki.jit
def filled(shape, dtype, value):
    """nisa.memset and nl.full of one integer."""
    tile = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    nisa.memset(tile, value)
    return _out(tile, shape, dtype), _out(nl.full(shape, value, dtype=dtype), shape, dtype)


@nki.jit
def integer_tensor_tensor(x, y, op_name, engine):
    """nisa.tensor_tensor of two integer tiles (engine None: the default), and nl's operator of the same name."""
    a, b = nl.load(x), nl.load(y)
    op = ARITHMETIC[op_name]
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    if engine is None:
        nisa.tensor_tensor(dst, a, b, op=op)
    else:
        nisa.tensor_tensor(dst, a, b, op=op, engine=engine)
    return _out(dst, x.shape, x.dtype), _out(op(a, b), x.shape, x.dtype)


@nki.jit
def bitvec_reduce(x, op_name, axis, negate):
    a = nl.load(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
    dst = nl.ndarray(shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst, getattr(nl, op_name), a, axis=axis, negate=negate)
    return _out(dst, shape, x.dtype)


@nki.jit
def iota(shape, dtype, offset, channel_multiplier, steps):
    """nisa.iota over a [P, *counts] tile with the given steps."""
    tile = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    nisa.iota(tile, [[step, count] for step, count in zip(steps, shape[1:])], offset=offset,
              channel_multiplier=channel_multiplier)
    return _out(tile, shape, dtype)


@nki.jit
def power_from(x, y, buffer):
    """nisa.tensor_tensor(op=nl.power) with x staged in `buffer` (SBUF, or PSUM)."""
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=buffer)
    nisa.tensor_copy(a, nl.load(x))
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst, a, nl.load(y), op=nl.power)
    return _out(dst, x.shape, x.dtype)
