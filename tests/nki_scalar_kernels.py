"""Kernels with integers computed on the device (nisa.scalar_load, scalar arithmetic, nisa.scalar_store)
and branches on them (nl.if_else), written for these tests in the forms AWS's NKI guides show."""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# (name, how two scalars combine), in the order the kernel below stores them.
BINARY = [
    ("add", lambda a, b: a + b), ("subtract", lambda a, b: a - b), ("multiply", lambda a, b: a * b),
    ("divide", lambda a, b: nisa.scalar_alu(a, b, op=nl.divide)),
    ("fmod", lambda a, b: nisa.scalar_alu(a, b, op=nl.fmod)),
    ("maximum", lambda a, b: nisa.scalar_alu(a, b, op=nl.maximum)),
    ("minimum", lambda a, b: nisa.scalar_alu(a, b, op=nl.minimum)),
    ("less", lambda a, b: a < b), ("less_equal", lambda a, b: a <= b), ("greater", lambda a, b: a > b),
    ("greater_equal", lambda a, b: a >= b), ("equal", lambda a, b: a == b), ("not_equal", lambda a, b: a != b),
    ("negate_a", lambda a, b: -a), ("a_times_4_plus_1", lambda a, b: a * 4 + 1), ("7_minus_b", lambda a, b: 7 - b),
    ("mod", lambda a, b: nisa.scalar_alu(a, b, op=nl.mod)),
]


def _loaded(value):
    """The scalar in value[0, 0] (an int32 HBM tensor), loaded through SBUF."""
    tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=value)
    return nisa.scalar_load(tile)


@nki.jit
def every_scalar_operation(a, b):
    """out[0, j] = the j-th of BINARY on a[0, 0] and b[0, 0], each stored from its scalar."""
    x, y = _loaded(a), _loaded(b)
    out = nl.ndarray((1, len(BINARY)), dtype=nl.int32, buffer=nl.shared_hbm)
    for j, (_, combine) in enumerate(BINARY):
        nisa.scalar_store(out[0:1, j:j + 1], combine(x, y))
    return out


def _zeroed_like(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf))
    return out


def _row(t, i):
    """Row i of a [R, F] HBM tensor as a view moved by i * F elements (an index scalar times a constant)."""
    F = t.shape[1]
    return t.ap([[F, 1], [1, F]], offset=0, scalar_offset=i * F)


@nki.jit
def rows_doubled_at_scalar_offsets(x, count):
    """out[r] = 2 x[r] for the first count[0, 0] rows, zeros after: row r is at offset r * F, an index
    scalar times a constant."""
    out = _zeroed_like(x)

    def body(i):
        row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=_row(x, i))
        nisa.tensor_scalar(dst=row, data=row, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=_row(out, i), src=row)

    nl.fori_loop(0, _loaded(count), body)
    return out


@nki.jit
def plus_ten_if_positive_else_doubled(flag, data):
    """data + 10 where flag[0, 0] > 0, else data * 2 (nl.if_else on a comparison)."""
    result = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=result, src=data)

    def then_branch():
        nisa.tensor_scalar(result, result, op0=nl.add, operand0=10.0)

    def else_branch():
        nisa.tensor_scalar(result, result, op0=nl.multiply, operand0=2.0)

    nl.if_else(_loaded(flag) > 0, then_branch, else_branch)
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki.jit
def negated_if_nonzero(flag, data):
    """-data where flag[0, 0] is nonzero (any sign), else data: a branch without an else on the scalar."""
    result = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=result, src=data)
    nl.if_else(_loaded(flag), lambda: nisa.tensor_scalar(result, result, op0=nl.multiply, operand0=-1.0))
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki.jit
def odd_rows_negated(x, count):
    """For the first count[0, 0] rows: out[r] = x[r] for even r, -x[r] for odd r (a branch inside a device
    loop, on arithmetic of its index); zeros after."""
    out = _zeroed_like(x)

    def body(i):
        row = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=_row(x, i))
        odd = nisa.scalar_alu(i, 2, op=nl.fmod) != 0
        nl.if_else(odd, lambda: nisa.tensor_scalar(row, row, op0=nl.multiply, operand0=-1.0))
        nisa.dma_copy(dst=_row(out, i), src=row)

    nl.fori_loop(0, _loaded(count), body)
    return out


@nki.jit
def picked_while_tracing(data, scale: int):
    """data * 3 when scale == 3, else data: nl.if_else on a Python bool traces one side, no branch; the
    quotient of two ints (scalar_alu) is an int when tracing."""
    result = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=result, src=data)
    three = nisa.scalar_alu(7, 2, op=nl.divide)
    nl.if_else(scale == three, lambda: nisa.tensor_scalar(result, result, op0=nl.multiply, operand0=3.0))
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki.jit
def picked_by_numpy(data, scale: int):
    """data * 3 when scale == 3, else -data: nl.if_else on a NumPy bool (np.int64(scale) == 3) and on a NumPy
    integer (np.int64(scale - 3), nonzero unless scale is 3) picks a side while tracing."""
    result = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=result, src=data)
    nl.if_else(np.int64(scale) == 3, lambda: nisa.tensor_scalar(result, result, op0=nl.multiply, operand0=3.0))
    nl.if_else(np.int64(scale - 3), lambda: nisa.tensor_scalar(result, result, op0=nl.multiply, operand0=-1.0))
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki.jit
def misuse(flag, how: str):
    """One misuse of scalars per `how`, each refused while tracing."""
    tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=flag)
    scalar = nisa.scalar_load(tile)
    if how == "python_if":
        if scalar > 0:
            pass
    elif how == "floor_division":
        scalar // 2
    elif how == "store_an_int":
        nisa.scalar_store(tile, 5)
    elif how == "load_a_float":
        nisa.scalar_load(nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf))
    elif how == "load_int16":
        nisa.scalar_load(nl.zeros((1, 1), dtype=nl.int16, buffer=nl.sbuf))
    elif how == "power":
        nisa.scalar_alu(scalar, 2, op=nl.power)
    elif how == "register_operand":
        nisa.scalar_alu(scalar, nisa.register_alloc(2), op=nl.add)
    elif how == "too_wide":
        scalar + 2**31
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.scalar_store(out, scalar)
    return out
