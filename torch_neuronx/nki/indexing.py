"""Indexing kernel tensors: slices, integers and nl.ds (both API generations),
and the beta API's index expressions (nl.arange, nl.mgrid) with masks.

An index expression is affine in index variables, each of which becomes one
axis of the resulting view; a mask narrows those axes before an instruction
is recorded, and only then are the expression's bounds checked (a masked
ragged tile may name rows past the end as long as the mask cuts them off).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .trace import Bound, NkiError, View, current


class DynSlice:
    """nl.ds(start, size): `size` elements from `start`."""

    def __init__(self, start: int, size: int, step: int = 1):
        self.start, self.size, self.step = int(start), int(size), int(step)


class IndexVar:
    def __init__(self, size: int, position: int, rank: int, var_id: int):
        self.size, self.position, self.rank, self.id = size, position, rank, var_id


class IndexExpr:
    """const + sum of coef * variable (beta API)."""

    def __init__(self, terms: Dict[int, int], const: int, variables: Dict[int, IndexVar]):
        self.terms, self.const, self.variables = terms, const, variables

    @classmethod
    def arange(cls, start: int, stop: Optional[int] = None) -> "IndexExpr":
        if stop is None:
            start, stop = 0, start
        var = IndexVar(stop - start, 0, 1, current().new_var())
        return cls({var.id: 1}, start, {var.id: var})

    def __getitem__(self, key) -> "IndexExpr":
        """`[:, None]` / `[None, :]`: place a 1-D range on an axis of a grid."""
        key = key if isinstance(key, tuple) else (key,)
        if len(self.variables) != 1 or sum(1 for k in key if k is not None) != 1:
            raise NkiError("only a single nl.arange can be placed on a grid axis with None")
        (var,) = self.variables.values()
        position = next(i for i, k in enumerate(key) if k is not None)
        placed = IndexVar(var.size, position, len(key), var.id)
        return IndexExpr(dict(self.terms), self.const, {var.id: placed})

    def _combine(self, other, sign: int) -> "IndexExpr":
        if isinstance(other, IndexExpr):
            terms = dict(self.terms)
            for v, c in other.terms.items():
                terms[v] = terms.get(v, 0) + sign * c
            return IndexExpr(terms, self.const + sign * other.const, {**self.variables, **other.variables})
        return IndexExpr(dict(self.terms), self.const + sign * int(other), self.variables)

    def __add__(self, other): return self._combine(other, 1)
    __radd__ = __add__
    def __sub__(self, other): return self._combine(other, -1)
    def __rsub__(self, other): return (self * -1)._combine(other, 1)

    def __mul__(self, factor):
        if isinstance(factor, IndexExpr):
            raise NkiError("an index expression is affine: it cannot multiply another")
        return IndexExpr({v: c * int(factor) for v, c in self.terms.items()}, self.const * int(factor),
                         self.variables)
    __rmul__ = __mul__

    def _compare(self, bound, strict_upper: bool, upper: bool):
        """A Mask where one index variable meets a bound; else (an expression on both sides, several
        variables, a negative coefficient) the AffinePredicate that nisa.affine_select takes."""
        op = ("less" if strict_upper else "less_equal") if upper else ("greater" if strict_upper else "greater_equal")
        predicate = AffinePredicate(self - bound, op)
        if isinstance(bound, IndexExpr) or len(self.terms) != 1:
            return predicate
        (var_id, coef), = self.terms.items()
        if coef <= 0:
            return predicate
        limit = int(bound) - self.const
        if upper:  # coef * v < limit  (or <=)
            hi = -(-limit // coef) if strict_upper else limit // coef + 1
            return Mask({var_id: (0, hi)}, self._placement(var_id), predicate)
        lo = limit // coef + 1 if strict_upper else -(-limit // coef)  # coef * v > limit (or >=)
        return Mask({var_id: (lo, None)}, self._placement(var_id), predicate)

    def _placement(self, var_id: int) -> Dict[int, Tuple[int, int]]:
        var = self.variables[var_id]
        return {var_id: (var.position, var.size)}

    def __lt__(self, b): return self._compare(b, True, True)
    def __le__(self, b): return self._compare(b, False, True)
    def __gt__(self, b): return self._compare(b, True, False)
    def __ge__(self, b): return self._compare(b, False, False)


class AffinePredicate:
    """`expr <op> 0` for an affine expression of index variables (op: less, less_equal, greater,
    greater_equal): the predicate that the beta API's nisa.affine_select evaluates per element. Unlike a
    Mask it may compare several variables (`i_q >= i_k`, a causal mask)."""

    def __init__(self, expr: "IndexExpr", op: str):
        self.expr, self.op = expr, op

    def __and__(self, other):
        raise NkiError("an affine_select predicate is one comparison: it cannot be combined with & "
                       "(nl.where takes a computed condition)")
    __rand__ = __and__


class Mask:
    """Bounds on index variables: [lo, hi) each, combined with &."""

    def __init__(self, ranges: Dict[int, Tuple[int, Optional[int]]], placements: Dict[int, Tuple[int, int]],
                 predicate: Optional[AffinePredicate] = None):
        self.ranges = ranges
        self.placements = placements  # variable -> (grid axis, full size)
        self.predicate = predicate  # the comparison it came from; None once combined with &

    def __and__(self, other: "Mask") -> "Mask":
        if not isinstance(other, Mask):
            return NotImplemented
        ranges = dict(self.ranges)
        for v, (lo, hi) in other.ranges.items():
            if v in ranges:
                old_lo, old_hi = ranges[v]
                his = [h for h in (old_hi, hi) if h is not None]
                ranges[v] = (max(old_lo, lo), min(his) if his else None)
            else:
                ranges[v] = (lo, hi)
        return Mask(ranges, {**self.placements, **other.placements})


class MGrid:
    """nl.mgrid[0:128, 0:512]: one index variable per axis."""

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        grids = []
        for position, part in enumerate(key):
            start, stop = (part.start or 0, part.stop) if isinstance(part, slice) else (0, int(part))
            var = IndexVar(stop - start, position, len(key), current().new_var())
            grids.append(IndexExpr({var.id: 1}, start, {var.id: var}))
        return _Grid(grids)


class _Grid(tuple):
    def __new__(cls, items):
        return super().__new__(cls, items)

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[-1]

    @property
    def y(self):
        return self[-2]

    @property
    def z(self):
        return self[-3]


def index(view: View, key) -> View:
    trace = current()
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, IndexExpr) for k in key):
        return _advanced(view, key)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (view.ndim - len(key) + 1) + key[at + 1:]
    if len(key) > view.ndim:
        raise trace.error(f"{len(key)} indices for {view!r}")
    offset, sizes, strides, axis_vars = view.offset, [], [], []
    on_chip = view.buffer != "hbm"
    partition_axis = 0  # where the partition axis lands among the kept axes
    for axis, (size, stride) in enumerate(zip(view.sizes, view.strides)):
        if axis == view.partition_axis:
            partition_axis = len(sizes)
        k = key[axis] if axis < len(key) else slice(None)
        if isinstance(k, DynSlice):
            k = slice(k.start, k.start + k.size * k.step, k.step)
        if isinstance(k, slice):
            start, stop, step = k.start if k.start is not None else 0, k.stop if k.stop is not None else size, \
                k.step or 1
            start, stop = int(start), int(stop)
            if start < 0 or stop > size or start >= stop or step < 1:
                raise trace.error(f"slice {start}:{stop} of axis {axis} is outside {view!r} (size {size})")
            offset += start * stride
            sizes.append((stop - start + step - 1) // step)
            strides.append(stride * step)
            axis_vars.append(view.axis_vars[axis])
            continue
        i = int(k)
        if not 0 <= i < size:
            raise trace.error(f"index {i} of axis {axis} is outside {view!r} (size {size})")
        offset += i * stride
        if on_chip and axis == view.partition_axis:  # the partition axis stays, of size 1
            sizes.append(1)
            strides.append(stride)
            axis_vars.append(None)
    if on_chip and len(sizes) < 2:  # on-chip tiles keep a free axis
        sizes.append(1)
        strides.append(1)
        axis_vars.append(None)
    if not sizes:
        sizes, strides, axis_vars = [1], [1], [None]
    return View(view.decl, offset, sizes, strides, axis_vars, view.bounds, partition_axis if on_chip else 0)


def _advanced(view: View, key) -> View:
    trace = current()
    if len(key) != view.ndim:
        raise trace.error(f"an index expression must index every axis of {view!r} ({view.ndim})")
    variables: Dict[int, IndexVar] = {}
    for k in key:
        if isinstance(k, IndexExpr):
            variables.update(k.variables)
        elif isinstance(k, (slice, DynSlice)):
            raise trace.error("index expressions (nl.arange, nl.mgrid) cannot be mixed with slices")
    rank = max(v.rank for v in variables.values())
    sizes, strides, axis_vars = [1] * rank, [0] * rank, [None] * rank
    positions = {}
    for v in variables.values():
        position = v.position + rank - v.rank
        positions[v.id] = position
        if axis_vars[position] is not None and sizes[position] != v.size:
            raise trace.error(f"index variables of sizes {sizes[position]} and {v.size} share grid axis {position}")
        sizes[position], axis_vars[position] = v.size, v.id
    offset, bounds = view.offset, list(view.bounds)
    for dim, (k, size, stride) in enumerate(zip(key, view.sizes, view.strides)):
        if not isinstance(k, IndexExpr):
            i = int(k)
            if not 0 <= i < size:
                raise trace.error(f"index {i} of axis {dim} is outside {view!r} (size {size})")
            offset += i * stride
            continue
        offset += k.const * stride
        for var_id, coef in k.terms.items():
            strides[positions[var_id]] += coef * stride
        bounds.append(Bound(size, k.const, [(positions[v], c) for v, c in k.terms.items()], dim))
    return View(view.decl, offset, sizes, strides, axis_vars, bounds)


def apply_mask(view: View, mask: Optional[Mask]) -> View:
    """The view narrowed by the mask; a view without index variables is narrowed on the
    grid axis of the same size (a whole tile stored under a masked index)."""
    if mask is None:
        return view
    offset, sizes, bounds = view.offset, list(view.sizes), [Bound(b.size, b.const, list(b.terms), b.dim)
                                                            for b in view.bounds]
    for var_id, (lo, hi) in mask.ranges.items():
        axis = None
        if var_id in view.axis_vars:
            axis = view.axis_vars.index(var_id)
        elif var_id in mask.placements:
            position, full = mask.placements[var_id]
            if position < len(sizes) and sizes[position] == full and view.axis_vars[position] is None:
                axis = position
        if axis is None:
            continue
        hi = sizes[axis] if hi is None else min(hi, sizes[axis])
        lo = max(lo, 0)
        if hi <= lo:
            raise current().error("the mask leaves nothing of the instruction")
        offset += lo * view.strides[axis]
        sizes[axis] = hi - lo
        for b in bounds:
            b.const += sum(c * lo for a, c in b.terms if a == axis)
    return View(view.decl, offset, sizes, view.strides, view.axis_vars, bounds, view.partition_axis)


def check_bounds(view: View) -> None:
    for b in view.bounds:
        low = high = b.const
        for axis, coef in b.terms:
            reach = coef * (view.sizes[axis] - 1)
            low, high = (low + reach, high) if reach < 0 else (low, high + reach)
        if low < 0 or high >= b.size:
            raise current().error(f"index expression on axis {b.dim} of '{view.decl.name}' reaches {low}..{high}, "
                                  f"outside 0..{b.size - 1} (add a mask to cut the ragged tile)")
