"""AWS's NkiTensor view methods (NKI 0.5 and later): slice, select, reshape_dim, flatten_dims, permute,
expand_dim, squeeze_dim, broadcast, rearrange, view (reinterpret_cast), vector_select, get_pattern,
is_indirect and size. Each returns a new view of the same memory; nothing is copied, except that a select
by an index known only on the device computes its offset on the sequencers (device_scalars.py).

On-chip tensors keep their partition axis first: the methods that would move, drop or reshape it refuse,
as AWS documents. A static select of the partition axis keeps it at size 1, as `t[i]` does."""
from __future__ import annotations

from math import prod
from typing import Sequence

from . import trace  # a module of its own: trace.View mixes these methods in while trace loads


class TensorViews:
    """Mixed into trace.View (which provides decl, offset, sizes, strides, partition_axis, dynamic,
    indirect, bounds, permuted and _as_dtype)."""

    # ---- helpers ----------------------------------------------------------------------------------------

    def _refuse(self, method: str, why: str):
        return trace.current().error(f"{self!r}.{method}: {why}")

    def _dim(self, method: str, dim, ndim=None) -> int:
        ndim = self.ndim if ndim is None else ndim
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < ndim:
            raise self._refuse(method, f"dim {dim!r} is not one of the view's {ndim} dims")
        return dim

    def _not_partition(self, method: str, dim: int) -> None:
        if self.buffer != "hbm" and dim == self.partition_axis:
            raise self._refuse(method, f"dim {dim} is the partition dim of an on-chip tensor, which it cannot change")

    def _derived(self, method: str, offset: int, sizes, strides, partition_axis=None, keep_dynamic=True):
        if self.bounds or self.vector_offset is not None:
            raise self._refuse(method, "a masked or indirect view takes no further view methods here")
        view = trace.View(self.decl, offset, sizes, strides,
                    partition_axis=self.partition_axis if partition_axis is None else partition_axis)
        view.dynamic = self.dynamic if keep_dynamic else None
        return view

    # ---- attributes -------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return prod(self.sizes)

    def get_pattern(self):
        """The view's access pattern, [[stride, count], ...] in dim order (what .ap() takes)."""
        return [[stride, count] for stride, count in zip(self.strides, self.sizes)]

    def is_indirect(self) -> bool:
        from .indirection import columns_of
        return self.dynamic is not None or self.vector_offset is not None or columns_of(self) is not None

    # ---- methods ----------------------------------------------------------------------------------------

    def slice(self, dim: int, start: int, end: int, step: int = 1):
        """Elements start, start + step, ... before end (exclusive) along dim."""
        dim = self._dim("slice", dim)
        if not (isinstance(step, int) and step >= 1 and 0 <= start < end <= self.sizes[dim]):
            raise self._refuse("slice", f"needs 0 <= start < end <= {self.sizes[dim]} and step >= 1, not start "
                                        f"{start}, end {end}, step {step}")
        sizes, strides = list(self.sizes), list(self.strides)
        sizes[dim] = -(-(end - start) // step)
        strides[dim] *= step
        return self._derived("slice", self.offset + start * self.strides[dim], sizes, strides)

    def select(self, dim: int, index):
        """Index `index` along dim, the dim removed (on chip, the partition dim is kept at size 1). The index
        may be known only on the device: an NkiScalar, a VirtualRegister or a 1x1 int32 tile."""
        dim = self._dim("select", dim)
        sizes, strides = list(self.sizes), list(self.strides)
        keeps_dim = self.buffer != "hbm" and dim == self.partition_axis
        if isinstance(index, int) and not isinstance(index, bool):
            if not 0 <= index < sizes[dim]:
                raise self._refuse("select", f"index {index} is outside dim {dim} of size {sizes[dim]}")
            offset = self.offset + index * strides[dim]
            if keeps_dim:
                sizes[dim] = 1
                return self._derived("select", offset, sizes, strides)
            del sizes[dim], strides[dim]
            return self._derived("select", offset, sizes, strides,
                                 self.partition_axis - (dim < self.partition_axis))
        if keeps_dim:
            raise self._refuse("select", "an index known only on the device cannot pick a partition")
        if self.dynamic is not None:
            raise self._refuse("select", "the view already moves by a device value: one dynamic select per tensor")
        scalar = _device_index(index)
        stride = strides[dim]
        del sizes[dim], strides[dim]
        view = self._derived("select", self.offset, sizes, strides, self.partition_axis - (dim < self.partition_axis))
        view.dynamic = scalar * stride if stride != 1 else scalar
        return view

    def reshape_dim(self, dim: int, shape: Sequence[int]):
        """dim split into `shape` (one entry may be -1)."""
        dim = self._dim("reshape_dim", dim)
        shape = [int(s) for s in shape]
        known = prod(s for s in shape if s != -1)
        if shape.count(-1) == 1 and known and self.sizes[dim] % known == 0:
            shape = [self.sizes[dim] // known if s == -1 else s for s in shape]
        if prod(shape) != self.sizes[dim] or any(s < 1 for s in shape):
            raise self._refuse("reshape_dim", f"{shape} does not split dim {dim} of size {self.sizes[dim]}")
        if len(shape) != 1:
            self._not_partition("reshape_dim", dim)
        split = [self.strides[dim] * prod(shape[k + 1:]) for k in range(len(shape))]
        partition = self.partition_axis + (len(shape) - 1 if dim < self.partition_axis else 0)
        return self._derived("reshape_dim", self.offset, self.sizes[:dim] + tuple(shape) + self.sizes[dim + 1:],
                             self.strides[:dim] + tuple(split) + self.strides[dim + 1:], partition)

    def flatten_dims(self, start_dim: int, end_dim: int):
        """Dims start_dim to end_dim (both included) merged into one; they must be contiguous in memory."""
        start_dim, end_dim = self._dim("flatten_dims", start_dim), self._dim("flatten_dims", end_dim)
        if start_dim > end_dim:
            raise self._refuse("flatten_dims", f"start_dim {start_dim} is after end_dim {end_dim}")
        if self.buffer != "hbm" and start_dim <= self.partition_axis <= end_dim and start_dim != end_dim:
            raise self._refuse("flatten_dims", "the partition dim of an on-chip tensor cannot merge with others")
        kept = [d for d in range(start_dim, end_dim + 1) if self.sizes[d] != 1]
        for a, b in zip(kept, kept[1:]):
            if self.strides[a] != self.strides[b] * self.sizes[b]:
                raise self._refuse("flatten_dims", f"dims {start_dim} to {end_dim} are not contiguous in memory "
                                                   "(after a permute or a strided slice)")
        size = prod(self.sizes[start_dim:end_dim + 1])
        stride = self.strides[kept[-1]] if kept else 1
        partition = self.partition_axis - (end_dim - start_dim if end_dim < self.partition_axis else 0)
        return self._derived("flatten_dims", self.offset,
                             self.sizes[:start_dim] + (size,) + self.sizes[end_dim + 1:],
                             self.strides[:start_dim] + (stride,) + self.strides[end_dim + 1:], partition)

    def permute(self, dims: Sequence[int]):
        """The view's dims in the order `dims` (a permutation of range(ndim))."""
        dims = list(dims)
        if sorted(dims) != list(range(self.ndim)):
            raise self._refuse("permute", f"{dims} is not a permutation of the view's {self.ndim} dims")
        if self.buffer != "hbm" and dims.index(self.partition_axis) != self.partition_axis:
            raise self._refuse("permute", "the partition dim of an on-chip tensor stays where it is")
        self._derived("permute", self.offset, self.sizes, self.strides)  # refuses masked or indirect views
        return self.permuted(dims)

    def expand_dim(self, dim: int):
        """A dim of size 1 inserted at position dim."""
        dim = self._dim("expand_dim", dim, self.ndim + 1)
        if self.buffer != "hbm" and dim <= self.partition_axis:
            raise self._refuse("expand_dim", "nothing goes before the partition dim of an on-chip tensor")
        stride = self.strides[dim] * self.sizes[dim] if dim < self.ndim else 1
        return self._derived("expand_dim", self.offset, self.sizes[:dim] + (1,) + self.sizes[dim:],
                             self.strides[:dim] + (stride,) + self.strides[dim:])

    def squeeze_dim(self, dim: int):
        """dim, of size 1, removed."""
        dim = self._dim("squeeze_dim", dim)
        self._not_partition("squeeze_dim", dim)
        if self.sizes[dim] != 1:
            raise self._refuse("squeeze_dim", f"dim {dim} has size {self.sizes[dim]}, not 1")
        return self._derived("squeeze_dim", self.offset, self.sizes[:dim] + self.sizes[dim + 1:],
                             self.strides[:dim] + self.strides[dim + 1:],
                             self.partition_axis - (dim < self.partition_axis))

    def broadcast(self, dim: int, size: int):
        """dim, of size 1, repeated `size` times (stride 0)."""
        dim = self._dim("broadcast", dim)
        self._not_partition("broadcast", dim)
        if self.sizes[dim] != 1 or size < 1:
            raise self._refuse("broadcast", f"dim {dim} has size {self.sizes[dim]}: only a dim of size 1 "
                                            f"broadcasts (to {size})")
        return self._derived("broadcast", self.offset, self.sizes[:dim] + (size,) + self.sizes[dim + 1:],
                             self.strides[:dim] + (0,) + self.strides[dim + 1:])

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: src_pattern names the view's dims (a tuple of names splits a dim), dst_pattern
        orders the names (a tuple merges them); fixed_sizes gives the sizes a split cannot infer."""
        fixed = dict(fixed_sizes or {})
        if len(src_pattern) != self.ndim:
            raise self._refuse("rearrange", f"src_pattern {src_pattern} names {len(src_pattern)} dims of {self.ndim}")
        view, names = self, []
        for dim in reversed(range(self.ndim)):  # from the last, so that earlier dims keep their positions
            entry = src_pattern[dim]
            group = list(entry) if isinstance(entry, (tuple, list)) else [entry]
            if len(group) > 1:
                view = view.reshape_dim(dim, [fixed.get(name, -1) for name in group])
            names[:0] = group
        flat = [n for e in dst_pattern for n in (e if isinstance(e, (tuple, list)) else [e])]
        if sorted(flat) != sorted(names):
            raise self._refuse("rearrange", f"dst_pattern {dst_pattern} does not use the names of {src_pattern}")
        view = view.permute([names.index(n) for n in flat])
        position = 0
        for entry in dst_pattern:
            width = len(entry) if isinstance(entry, (tuple, list)) else 1
            if width > 1:
                view = view.flatten_dims(position, position + width - 1)
            position += 1
        return view

    def view(self, dtype):
        """The same bytes as `dtype`: the last dim (contiguous) scales by the ratio of the dtypes' sizes."""
        dtype = trace.dtype_name(dtype)
        if dtype == self.dtype:
            return self
        old, new = trace.BYTES[self.dtype], trace.BYTES[dtype]
        if self.sizes[-1] != 1 and self.strides[-1] != 1:
            raise self._refuse("view", "the last dim must be contiguous to be read as another dtype")
        if (self.sizes[-1] * old) % new or any((s * old) % new for s in self.strides[:-1]):
            raise self._refuse("view", f"its rows do not split into whole {dtype} elements")
        if self.bounds or self.dynamic is not None or self.vector_offset is not None:
            raise self._refuse("view", "a masked view or one moved by a device value cannot change dtype")
        alias = self._as_dtype(dtype)
        return trace.View(alias.decl, alias.offset, self.sizes[:-1] + (self.sizes[-1] * old // new,),
                          tuple(s * old // new for s in self.strides[:-1]) + (1,), partition_axis=self.partition_axis)

    reinterpret_cast = view

    def vector_select(self, dim: int, vector_offset):
        """Partition p reads index vector_offset[p] along dim 0 (HBM; an indirect DMA source or target)."""
        if dim != 0 or self.buffer != "hbm":
            raise self._refuse("vector_select", "selects along dim 0 of an HBM tensor")
        if self.dynamic is not None:
            raise self._refuse("vector_select", "the view already moves by a device value")
        view = self._derived("vector_select", self.offset, (vector_offset.shape[0],) + self.sizes[1:], self.strides)
        view.vector_offset = (vector_offset, 0)
        return view

    def indirect(self, index, num_elem=None):
        """Tensor indirection (NeuronCore-v4): the [P, num_elem] columns of this [P, F] on-chip view that the
        uint16 index tile picks, for one compute instruction to read or write (indirection.py)."""
        from .indirection import indirect
        return indirect(self, index, num_elem)


def _device_index(index):
    """An NkiScalar holding `index` (an NkiScalar, a VirtualRegister or a 1x1 int32 tile)."""
    from .device_loops import VirtualRegister, new_register, register_move
    from .device_scalars import NkiScalar, scalar_load
    if isinstance(index, NkiScalar):
        return index
    if isinstance(index, VirtualRegister):
        scalar = new_register(NkiScalar)
        register_move(scalar, index)
        return scalar
    if isinstance(index, trace.View):
        return scalar_load(index)
    raise trace.current().error(f"select's index must be an int, an NkiScalar, a VirtualRegister or a 1x1 "
                                f"int32 tile, not {type(index).__name__}")
