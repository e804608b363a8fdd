"""AWS's tile grids (NKI of SDK 2.33): `nl.tiles`, `nl.blocks`, `nl.alloc_tiles`, `nl.alloc_blocks` and
`nl.empty_like` of a grid. A grid is a view of a tensor navigated in tile (or block) coordinates: indexing
it selects cells, `.element_shape` gives the elements they cover (the last cell along a dim clamped to the
tensor), and `.data` gives the selection as one tensor view for an instruction. Nothing here allocates
(except the alloc and empty_like calls), moves data or emits an instruction.

Grid dims map one to one to the tensor's dims. The tiled dims are the trailing len(tile_shape); the ones
before them are untiled (one element per cell, "a slab at a time"). A grid on chip whose tiles stack
along the partition axis keeps its tiles side by side along the free axis (`_Packed`), so a selection
within one row of tiles is one view and one across rows is not (`is_data_representable`)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil
from typing import Optional, Tuple

from . import trace
from .trace import NkiError, View


class NkiGridTypeError(NkiError, TypeError):
    """A grid call was given an argument of the wrong kind."""


class NkiGridValueError(NkiError, ValueError):
    """A grid call was given a value outside what it accepts."""


class NkiGridOperandError(NkiError, AttributeError):
    """A grid was used where a tensor is needed (an instruction's operand takes grid.data)."""


def _where(message: str) -> str:
    return str(trace.current().error(message)) if trace.tracing() else message


def _type_error(message: str) -> NkiGridTypeError:
    return NkiGridTypeError(_where(message))


def _value_error(message: str) -> NkiGridValueError:
    return NkiGridValueError(_where(message))


@dataclass(frozen=True)
class _Axis:
    """One dim of a grid: `count` cells of `cell` elements, `step` cells apart, the first at element
    `origin`; cells end at `limit` (the last one clamped). `consumed`: indexed by an integer (no longer a
    grid dim). `runtime`: a coordinate known only on the device, ("cell" | "element", scalar), or
    ("rows", index tile) for rows gathered by an index tile."""
    origin: int
    limit: int
    cell: int
    count: int
    tile: int = 1
    tiled: bool = True
    step: int = 1
    consumed: bool = False
    runtime: Optional[tuple] = None

    def elements(self) -> int:
        if self.runtime is not None:
            return self.runtime[1].shape[0] if self.runtime[0] == "rows" else self.cell
        starts = (self.origin + k * self.step * self.cell for k in range(self.count))
        return sum(min(self.cell, self.limit - start) for start in starts)

    def span(self) -> Optional[Tuple[int, int, int]]:
        """The selected elements as (start, stop, stride), or None when they are not evenly spaced."""
        if self.count == 1 or self.step == 1:
            return self.origin, min(self.origin + ((self.count - 1) * self.step + 1) * self.cell, self.limit), 1
        if self.cell == 1:
            return self.origin, self.origin + (self.count - 1) * self.step + 1, self.step
        return None

    def clamped(self) -> bool:
        return self.runtime is None and self.origin + ((self.count - 1) * self.step + 1) * self.cell > self.limit


class _Direct:
    """Grid coordinates are the tensor view's own."""

    def __init__(self, view: View):
        self.view = view

    def region(self, ranges) -> View:
        """The view of `ranges` [(dim, start, stop, stride) or (dim, index, None, None) for a slab]."""
        view = self.view
        for dim, start, stop, stride in sorted(ranges, key=lambda r: -r[0]):  # later dims first: selects drop dims
            view = view.select(dim, start) if stop is None else view.slice(dim, start, stop, stride)
        return view


class _Packed:
    """An on-chip [rows, columns] grid taller than its tiles: tile (i, j) of a grid of `across` tiles per
    row is stored at free offset (i * across + j) * tile_columns, all tiles on the tiles' partitions."""

    def __init__(self, storage: View, tile_rows: int, tile_columns: int, across: int):
        self.view, self.tile_rows, self.tile_columns, self.across = storage, tile_rows, tile_columns, across

    def region(self, ranges) -> View:
        (_, p0, p1, p_stride), (_, f0, f1, f_stride) = sorted(ranges)
        row = p0 // self.tile_rows
        if p1 is None or f1 is None or p_stride != 1 or (p1 - 1) // self.tile_rows != row:
            raise ValueError("it spans more than one row of tiles of an on-chip grid (tiles stacked along the "
                             "partitions are stored side by side): select one row of tiles, or a tile at a time")
        base = row * self.across * self.tile_columns
        return self.view.slice(0, p0 - row * self.tile_rows, p1 - row * self.tile_rows).slice(
            1, base + f0, base + f1, f_stride)


class NkiGrid:
    """A tensor region navigated in cell coordinates (AWS's NkiGrid); made by nl.tiles, nl.blocks,
    nl.alloc_tiles, nl.alloc_blocks or nl.empty_like, never directly."""

    def __init__(self, storage, axes: Tuple[_Axis, ...]):
        self._storage, self._axes = storage, tuple(axes)

    # ---- what kernels read ------------------------------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(a.count for a in self._axes if not a.consumed)

    @property
    def tile_shape(self) -> Tuple[int, ...]:
        return tuple(a.tile for a in self._axes if a.tiled)

    @property
    def element_shape(self) -> Tuple[int, ...]:
        return tuple(a.elements() for a in self._axes if a.tiled or not a.consumed)

    @property
    def index_step_elements(self) -> Tuple[int, ...]:
        return tuple(a.cell * a.step for a in self._axes if not a.consumed)

    @property
    def is_remainder(self) -> bool:
        return any(a.clamped() for a in self._axes)

    @property
    def dtype(self) -> str:
        return self._storage.view.dtype

    @property
    def buffer(self) -> str:
        return self._storage.view.buffer

    @property
    def is_data_representable(self) -> bool:
        return self._data_or_reason()[0] is not None

    @property
    def data(self) -> View:
        view, reason = self._data_or_reason()
        if view is None:
            raise _value_error(f"{self!r}.data: the selection is not one access pattern: {reason}")
        return view

    def __repr__(self) -> str:
        return (f"{type(self).__name__} shape {list(self.shape)} of elements {list(self.element_shape)} "
                f"(tile {list(self.tile_shape)}) over {self._storage.view!r}")

    def __iter__(self):
        raise _type_error(f"{self!r} cannot be iterated: loop over range(grid.shape[d]) and index it")

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NkiGridOperandError(_where(f"{self!r} has no '{name}': an instruction or a tensor method takes the "
                                         "grid's .data (one tensor view), not the grid"))

    # ---- .data ------------------------------------------------------------------------------------------

    def _data_or_reason(self):
        ranges, moves = [], []
        for dim, axis in enumerate(self._axes):
            if axis.runtime is not None:
                moves.append((dim, axis))
                start, stop, stride = axis.origin, min(axis.origin + axis.cell, axis.limit), 1
                if axis.runtime[0] == "rows":
                    start, stop = axis.origin, axis.limit
            elif axis.consumed and not axis.tiled:
                ranges.append((dim, axis.origin, None, None))
                continue
            elif axis.span() is None:
                return None, (f"dim {dim} selects {axis.count} cells of {axis.cell} elements {axis.step} cells "
                              "apart (a gapped selection of cells wider than one element)")
            else:
                start, stop, stride = axis.span()
            ranges.append((dim, start, stop, stride))
        if moves and not isinstance(self._storage, _Direct):
            return None, "an on-chip grid taller than its tiles takes no index known only on the device"
        try:
            view = self._storage.region(ranges)
        except ValueError as e:
            return None, str(e)
        for dim, axis in moves:
            view = _moved(view, self._storage.view, dim, axis)
        return view, None

    # ---- indexing ---------------------------------------------------------------------------------------

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        free = [d for d, a in enumerate(self._axes) if not a.consumed]
        if len(keys) > len(free):
            raise _value_error(f"{self!r}: {len(keys)} indices for a grid of {len(free)} dims")
        axes = list(self._axes)
        for dim, k in zip(free, keys):
            axes[dim] = _indexed(axes[dim], k, dim)
        return type(self)(self._storage, tuple(axes))


class NkiTileGrid(NkiGrid):
    """A grid whose cells are tiles (nl.tiles, nl.alloc_tiles)."""


class NkiBlockGrid(NkiGrid):
    """A grid whose cells are blocks of block_shape tiles (nl.blocks, nl.alloc_blocks); nl.tiles of a
    block gives its tiles."""

    @property
    def block_shape(self) -> Tuple[int, ...]:
        return tuple(a.cell // a.tile for a in self._axes if a.tiled)


@dataclass(frozen=True)
class GridElementOffset:
    """A grid index in elements of its dim rather than in cells (nl.grid_element_offset)."""
    offset: object


def grid_element_offset(offset) -> GridElementOffset:
    if isinstance(offset, bool):
        raise _type_error("grid_element_offset takes an int or a value on the device, not a bool")
    if isinstance(offset, int) and offset < 0:
        raise _value_error(f"grid_element_offset({offset}): an element offset is not negative")
    return GridElementOffset(offset)


def _moved(view: View, storage: View, dim: int, axis: _Axis) -> View:
    """`view` moved along `dim` by the axis's device-known coordinate, or gathered by its index tile."""
    kind, value = axis.runtime
    if kind == "rows":
        return view.vector_select(0, value)
    from .views import _device_index
    if view.dynamic is not None:
        raise _value_error("one index known only on the device per selection")
    moved = trace.View(view.decl, view.offset, view.sizes, view.strides, partition_axis=view.partition_axis)
    scale = storage.strides[dim] * (axis.cell if kind == "cell" else 1)
    scalar = _device_index(value)
    moved.dynamic = scalar * scale if scale != 1 else scalar
    return moved


def _indexed(axis: _Axis, key, dim: int) -> _Axis:
    if isinstance(key, bool):
        raise _type_error(f"grid dim {dim}: a bool is not a cell index")
    if isinstance(key, int):
        if not 0 <= key < axis.count:
            raise _value_error(f"grid dim {dim}: index {key} is outside its {axis.count} cells")
        return replace(axis, origin=axis.origin + key * axis.step * axis.cell, count=1, consumed=True)
    if isinstance(key, slice):
        if key.step is not None and (not isinstance(key.step, int) or key.step < 1):
            raise _value_error(f"grid dim {dim}: slice step {key.step!r}: grids take positive steps")
        start, stop, step = key.indices(axis.count)
        count = len(range(start, stop, step))
        if count == 0:
            raise _value_error(f"grid dim {dim}: {key} selects none of its {axis.count} cells")
        return replace(axis, origin=axis.origin + start * axis.step * axis.cell, count=count, step=axis.step * step)
    if isinstance(key, GridElementOffset):
        return _element_offset(axis, key.offset, dim)
    return _runtime_index(axis, key, dim)


def _element_offset(axis: _Axis, offset, dim: int) -> _Axis:
    if isinstance(offset, int):
        extent = axis.count * axis.step * axis.cell
        if offset % (axis.step * axis.cell) or offset >= extent or axis.origin + offset >= axis.limit:
            raise _value_error(f"grid dim {dim}: element offset {offset} is not the start of one of its cells "
                               f"({axis.step * axis.cell} elements apart)")
        return replace(axis, origin=axis.origin + offset, count=1, consumed=True)
    return _runtime_index(axis, offset, dim, kind="element")


def _runtime_index(axis: _Axis, key, dim: int, kind: str = "cell") -> _Axis:
    shape = getattr(key, "shape", None)
    if isinstance(key, View) and len(shape) == 2 and shape[1] == 1 and shape[0] > 1 and kind == "cell":
        if dim != 0 or key.dtype not in ("int32", "uint32"):
            raise _type_error(f"grid dim {dim}: rows gathered by an index tile: an int32/uint32 [K, 1] tile "
                              "indexes dim 0")
        return replace(axis, count=1, consumed=True, runtime=("rows", key))
    if axis.step != 1 or (axis.limit - axis.origin) % axis.cell:
        raise _value_error(f"grid dim {dim}: a cell chosen on the device needs whole cells one step apart "
                           f"({axis.limit - axis.origin} elements in cells of {axis.cell})")
    return replace(axis, count=1, consumed=True, runtime=(kind, key))


# ---- factories ------------------------------------------------------------------------------------------

def _shape_tuple(name: str, shape, minimum_rank: int = 1) -> Tuple[int, ...]:
    if not isinstance(shape, tuple) or not all(type(s) is int for s in shape):
        raise _type_error(f"{name} must be a tuple of Python ints, not {shape!r}")
    if len(shape) < minimum_rank or any(s < 1 for s in shape):
        raise _value_error(f"{name} {shape} must have at least {minimum_rank} positive entries")
    return shape


def _axes_over(sizes, tile_shape, what) -> Tuple[_Axis, ...]:
    """Axes of a grid of tile_shape tiles over a region of `sizes` (its trailing dims tiled)."""
    tile_shape = _shape_tuple("tile_shape", tile_shape, 2)
    if len(tile_shape) > len(sizes):
        raise _value_error(f"tile_shape {tile_shape} has more dims than {what}")
    untiled = len(sizes) - len(tile_shape)
    axes = [_Axis(0, size, 1, size, tiled=False) for size in sizes[:untiled]]
    axes += [_Axis(0, size, tile, ceil(size / tile), tile=tile) for size, tile in zip(sizes[untiled:], tile_shape)]
    return tuple(axes)


def _retiled(grid: NkiGrid, tile_shape) -> Tuple[_Axis, ...]:
    """A grid's selection as a region of its own, cut into tiles (its tiles, or tile_shape)."""
    tiled = [a for a in grid._axes if a.tiled]
    if tile_shape is not None:
        tile_shape = _shape_tuple("tile_shape", tile_shape, 2)
        if len(tile_shape) != len(tiled):
            raise _value_error(f"tile_shape {tile_shape} does not match the grid's {len(tiled)} tiled dims")
    tiles = iter(tile_shape or [a.tile for a in tiled])
    axes = []
    for dim, axis in enumerate(grid._axes):
        if not axis.tiled:
            axes.append(axis)
            continue
        span = axis.span()
        if axis.runtime is not None or span is None or span[2] != 1:
            raise _value_error(f"grid dim {dim}: only a selection of neighbouring cells fixed at trace time "
                               "is a region to cut into tiles")
        tile = next(tiles)
        axes.append(_Axis(span[0], span[1], tile, ceil((span[1] - span[0]) / tile), tile=tile))
    return tuple(axes)


def _grouped(axes, block_shape) -> Tuple[_Axis, ...]:
    tiled = [a for a in axes if a.tiled]
    block_shape = _shape_tuple("block_shape", block_shape)
    if len(block_shape) != len(tiled):
        raise _value_error(f"block_shape {block_shape} needs one entry per tiled dim ({len(tiled)})")
    blocks = iter(block_shape)
    grouped = []
    for axis in axes:
        if axis.tiled:
            cell = axis.tile * next(blocks)
            axis = replace(axis, cell=cell, count=ceil((axis.limit - axis.origin) / cell))
        grouped.append(axis)
    return tuple(grouped)


def tiles(source, *, tile_shape=None) -> NkiTileGrid:
    """`source` (a tensor, a grid or a selection of one) as a grid of tiles."""
    if isinstance(source, View):
        if tile_shape is None:
            raise _value_error(f"nl.tiles({source!r}): a tensor needs tile_shape")
        return NkiTileGrid(_Direct(source), _axes_over(source.sizes, tile_shape, repr(source)))
    if isinstance(source, NkiGrid):
        return NkiTileGrid(source._storage, _retiled(source, tile_shape))
    raise _type_error(f"nl.tiles takes a tensor or a grid, not {type(source).__name__}")


def blocks(source, *, tile_shape=None, block_shape) -> NkiBlockGrid:
    """`source` as a grid of blocks, each block_shape tiles."""
    tile_grid = tiles(source, tile_shape=tile_shape)
    return NkiBlockGrid(tile_grid._storage, _grouped(tile_grid._axes, block_shape))


def _allocated(cls, tile_shape, element_shape, buffer, dtype, name, block_shape=None):
    from . import language
    element_shape = _shape_tuple("element_shape", element_shape)
    axes = _axes_over(element_shape, tile_shape, f"element_shape {element_shape}")
    memory = buffer if isinstance(buffer, str) else getattr(buffer, "name", None)
    if memory in ("sbuf", "psum") and len(element_shape) == 2 and axes[0].count > 1:
        # Tiles stacked along the partitions are stored side by side (what the hardware can hold).
        view = language.ndarray((axes[0].tile, axes[0].count * axes[1].count * axes[1].tile), dtype, buffer, name)
        storage = _Packed(view, axes[0].tile, axes[1].tile, axes[1].count)
    else:
        storage = _Direct(language.ndarray(element_shape, dtype, buffer, name))
    if block_shape is not None:
        axes = _grouped(axes, block_shape)
    return cls(storage, axes)


def alloc_tiles(*, tile_shape, element_shape, buffer, dtype, address=None, name: str = "") -> NkiTileGrid:
    """New, uninitialised storage of element_shape, as a grid of tiles."""
    return _allocated(NkiTileGrid, tile_shape, element_shape, buffer, dtype, name)


def alloc_blocks(*, tile_shape, block_shape, element_shape, buffer, dtype, address=None,
                 name: str = "") -> NkiBlockGrid:
    """New, uninitialised storage of element_shape, as a grid of blocks."""
    return _allocated(NkiBlockGrid, tile_shape, element_shape, buffer, dtype, name, block_shape)


_TRANSPOSES = {(1, 0), (2, 1, 0), (3, 1, 2, 0)}


def grid_like(grid: NkiGrid, dtype=None, buffer=None, name: str = "", transpose_axes=None) -> NkiGrid:
    """New storage for a grid's selection (its cells packed densely), a grid of the same kind and cells;
    transpose_axes orders its dims for a dma_transpose into it."""
    kept = [a for a in grid._axes if a.tiled or not a.consumed]  # one chosen on the device has a fixed shape too
    if transpose_axes is not None:
        transpose_axes = tuple(transpose_axes)
        if transpose_axes not in _TRANSPOSES or len(transpose_axes) != len(kept) or not all(a.tiled for a in kept):
            raise _value_error(f"nl.empty_like: transpose_axes {transpose_axes} is not one of (1, 0), (2, 1, 0), "
                               f"(3, 1, 2, 0) for {len(kept)} dims, all of them tiled")
        kept = [kept[a] for a in transpose_axes]
    shape = tuple(a.elements() for a in kept)
    tile_shape = tuple(a.tile for a in kept if a.tiled)
    cls = type(grid)
    block_shape = tuple(a.cell // a.tile for a in kept if a.tiled) if cls is NkiBlockGrid else None
    new = _allocated(cls, tile_shape, shape, buffer or grid.buffer, dtype or grid.dtype, name, block_shape)
    # Cells selected by an integer stay selected: the copy of one tile is a one-tile grid.
    axes = [replace(a, consumed=True) if old.consumed else a for a, old in zip(new._axes, kept)]
    return cls(new._storage, tuple(axes))


# ---- shards of a grid dim -------------------------------------------------------------------------------

def _shard_arguments(extent, shard_id, num_shards) -> None:
    if not all(type(v) is int for v in (extent, shard_id, num_shards)):
        raise _type_error("extent, shard_id and num_shards must be Python ints known at trace time")
    if not (extent > 0 and 0 <= shard_id < num_shards <= extent):
        raise _value_error(f"shards need 0 <= shard_id ({shard_id}) < num_shards ({num_shards}) <= extent ({extent})")


def contiguous_indices(extent, *, shard_id, num_shards) -> slice:
    """Shard shard_id of num_shards neighbouring runs of range(extent); the first ones one longer."""
    _shard_arguments(extent, shard_id, num_shards)
    base, rest = divmod(extent, num_shards)
    start = shard_id * base + min(shard_id, rest)
    return slice(start, start + base + (shard_id < rest))


def interleaved_indices(extent, *, shard_id, num_shards) -> slice:
    """Every num_shards-th index of range(extent), from shard_id."""
    _shard_arguments(extent, shard_id, num_shards)
    return slice(shard_id, extent, num_shards)
