"""Integers computed on the device (nki.isa.NkiScalar): read from a 1x1 int32 or int64 tile
(nisa.scalar_load), combined by the sequencers' scalar ALU (nisa.scalar_alu, or Python's operators on a
scalar), written back (nisa.scalar_store), and used as device-loop bounds, `.ap(scalar_offset=...)` and
nl.if_else conditions.

A scalar is a register (device_loops.py) that arithmetic may produce: `i * 4 + 1` records two scalar_alu
instructions and yields a new scalar; nothing is computed while tracing. A scalar's width is its tile's and
never changes: int32 arithmetic wraps at 32 bits; uint32 scalars (SDK 2.34) compute modulo 2^32 and compare
and divide unsigned; int64 scalars (SDK 2.33+) add, subtract and multiply, wrapping at 64 bits, and offset
HBM access patterns (past 4 GiB too), but do not compare, divide, bound loops or branch, as AWS documents."""
from __future__ import annotations

import operator

from .device_loops import VirtualRegister, _dma, _one_element, new_register, register_move
from .trace import View, current


def _toward_zero(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _remainder(a: int, b: int) -> int:  # with a's sign, as C's % and nl.fmod
    return a - b * _toward_zero(a, b)


_ARITHMETIC = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": _toward_zero,
               "mod": _remainder, "floor_mod": operator.mod, "maximum": max, "minimum": min}
_COMPARISONS = {"less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
                "greater_equal": operator.ge, "equal": operator.eq, "not_equal": operator.ne}


class NkiScalar(VirtualRegister):
    """One int32 (or int64) value computed on the device. Python's +, -, *, unary - and comparisons on it
    (with an int or another scalar of its width) trace nisa.scalar_alu; a comparison yields an int32 scalar
    holding 1 or 0. Python cannot branch on it (use nl.if_else) or turn it into a number."""

    def __repr__(self) -> str:
        return f"NkiScalar({self.element}{', int64' if self.dtype == 'int64' else ''})"

    __hash__ = VirtualRegister.__hash__  # the comparisons below trace; identity stays the hash

    def __add__(self, other): return scalar_alu(self, other, "add")
    def __radd__(self, other): return scalar_alu(other, self, "add")
    def __sub__(self, other): return scalar_alu(self, other, "subtract")
    def __rsub__(self, other): return scalar_alu(other, self, "subtract")
    def __mul__(self, other): return scalar_alu(self, other, "multiply")
    def __rmul__(self, other): return scalar_alu(other, self, "multiply")
    def __neg__(self): return scalar_alu(0, self, "subtract")
    def __lt__(self, other): return scalar_alu(self, other, "less")
    def __le__(self, other): return scalar_alu(self, other, "less_equal")
    def __gt__(self, other): return scalar_alu(self, other, "greater")
    def __ge__(self, other): return scalar_alu(self, other, "greater_equal")
    def __eq__(self, other): return scalar_alu(self, other, "equal")  # noqa: E704
    def __ne__(self, other): return scalar_alu(self, other, "not_equal")  # noqa: E704

    def _rounding(self, *_):
        raise TypeError("a scalar's division rounds toward zero on the device, unlike Python's // and %: use "
                        "nisa.scalar_alu(a, b, op=nl.divide) or op=nl.fmod")

    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = _rounding


def _op_name(op) -> str:
    if isinstance(op, str):
        name = op
    else:
        from .isa import alu_of
        name = alu_of(op)
    if name not in _ARITHMETIC and name not in _COMPARISONS:
        raise current().error(f"scalar_alu: the sequencers have no {name!r}; they add, subtract, multiply, divide "
                              "(toward zero), take remainders (nl.fmod, nl.mod), maxima, minima and comparisons")
    return name


_WIDE_OPERATORS = ("add", "subtract", "multiply")


def _operand(value, role: str, dtype: str) -> NkiScalar:
    if isinstance(value, NkiScalar):
        return value
    if isinstance(value, VirtualRegister):
        raise current().error(f"scalar_alu's {role} is a VirtualRegister; scalar arithmetic takes NkiScalars "
                              "(nisa.scalar_load) and ints")
    if isinstance(value, bool) or not isinstance(value, int):
        raise current().error(f"scalar_alu's {role} must be an NkiScalar or an int, not {type(value).__name__}")
    scalar = new_register(NkiScalar, dtype)
    register_move(scalar, value)
    return scalar


def _width(data1, data2) -> str:
    """The dtype of the scalars in an operation: theirs, which must agree (an int takes the other's)."""
    widths = sorted({d.dtype for d in (data1, data2) if isinstance(d, VirtualRegister)})
    if len(widths) > 1:
        raise current().error(f"scalar_alu: {widths[0]} and {widths[1]} scalars together; width and signedness "
                              "must match (a scalar's dtype is its tile's, with no conversion)")
    return widths[0] if widths else "int32"


def scalar_alu(data1, data2, op, name=None):
    """data1 op data2 on the sequencers: a new NkiScalar (1 or 0 for a comparison). Two ints are computed
    now: an int, or a bool for a comparison."""
    op = _op_name(op)
    if isinstance(data1, int) and isinstance(data2, int):
        if op in _COMPARISONS:
            return _COMPARISONS[op](data1, data2)
        if op in ("divide", "mod", "floor_mod") and data2 == 0:
            raise current().error("scalar_alu: division by zero")
        return _ARITHMETIC[op](data1, data2)
    from .language import _emit
    dtype = _width(data1, data2)
    if dtype == "int64" and op not in _WIDE_OPERATORS:
        raise current().error(f"scalar_alu: {op} of 64-bit scalars; they add, subtract and multiply only "
                              "(comparisons, division, remainders, maxima and minima take int32 scalars)")
    a, b = _operand(data1, "data1", dtype), _operand(data2, "data2", dtype)
    result = new_register(NkiScalar, "int32" if op in _COMPARISONS else dtype)
    _emit("scalar_alu", "vector", result.view(), (a.view(), b.view()), None, op0=op)
    return result


def _scalar_tile(tensor, role: str) -> View:
    view = _one_element(tensor, role)
    if tensor.buffer not in ("hbm", "sbuf"):
        raise current().error(f"{role} must be in SBUF or HBM, not {tensor.buffer.upper()}")
    if tensor.dtype not in ("int32", "uint32", "int64"):
        raise current().error(f"{role} must be a 1x1 int32, uint32 or int64 tile, not {tensor.dtype}")
    return view


def scalar_load(src: View) -> NkiScalar:
    """The value of a 1x1 int32, uint32 or int64 tile (SBUF or HBM) as a scalar of its dtype, never truncated."""
    tile = _scalar_tile(src, "scalar_load's src")
    scalar = new_register(NkiScalar, tile.dtype)
    _dma(scalar.view(), tile)
    return scalar


def scalar_store(dst: View, value: NkiScalar) -> None:
    """dst (a 1x1 tile of value's dtype, int32, uint32 or int64, in SBUF or HBM) = value."""
    if not isinstance(value, NkiScalar):
        raise current().error(f"scalar_store stores an NkiScalar, not {type(value).__name__} (an int stores "
                              "nothing on the device: write constants with nisa.memset)")
    tile = _scalar_tile(dst, "scalar_store's dst")
    if tile.dtype != value.dtype:
        raise current().error(f"scalar_store: the scalar is {value.dtype} and the tile {tile.dtype}; they must "
                              "match")
    _dma(tile, value.view())
