"""The DMA instructions of nki.isa (current API, destination first): copies between memories, gathers and
scatters through an index tile (`.ap(vector_offset=...)`), the DMA engines' read-modify-write and sums, and
their transposes."""
from __future__ import annotations

from . import language as nl
from .language import _emit
from .trace import View, current


def _alu_of(op) -> str:
    from .isa import alu_of  # isa imports this module
    return alu_of(op)


class oob_mode:  # noqa: N801
    """What an indirect DMA does with an index past its tensor: raise (error) or leave the row (skip)."""
    error, skip = "error", "skip"


def _indirect_copy(dst: View, src: View, oob, mask, accumulate: bool) -> None:
    """A gather (indirect src) or a scatter (indirect dst): the indirect side becomes the pattern of one row
    along its indirect axis, which the index tile moves as the program runs."""
    scatter = dst.vector_offset is not None
    addressed = dst if scatter else src
    index, dim = addressed.vector_offset
    if not isinstance(index, View) or index.buffer != "sbuf" or index.dtype not in ("int32", "uint32"):
        raise current().error(f"vector_offset must be an SBUF tile of int32 or uint32, not {index!r}")
    if index.elements() != addressed.shape[dim]:
        raise current().error(f"vector_offset {index!r} holds {index.elements()} indices for the "
                              f"{addressed.shape[dim]} steps of axis {dim}")
    if tuple(dst.shape) != tuple(src.shape):
        raise current().error(f"dma_copy: {src!r} and {dst!r} differ in shape (indirect DMA)")
    row = View(addressed.decl, addressed.offset, addressed.sizes[:dim] + (1,) + addressed.sizes[dim + 1:],
               addressed.strides)
    _emit("dma_copy", "dma", row if scatter else dst, (src if scatter else row, index), mask, indirect=True,
          indirect_dim=dim, indirect_dst=scatter, skip_oob=oob == oob_mode.skip, accumulate=accumulate)


def dma_copy(dst: View, src: View, mask=None, dst_rmw_op=None, oob_mode=None, **_) -> None:
    accumulate = _read_modify_write(dst, dst_rmw_op, oob_mode)
    if dst.vector_offset is not None and src.vector_offset is not None:
        raise current().error("dma_copy: an indirect source and an indirect destination at once")
    if dst.vector_offset is not None or src.vector_offset is not None:
        return _indirect_copy(dst, src, oob_mode, mask, accumulate)
    d, s = nl._same_shape(dst, src)
    if d is None:
        raise current().error(f"dma_copy: {src!r} and {dst!r} differ in shape")
    _emit("dma_copy", "dma", d, (s,), mask, accumulate=accumulate)


def _read_modify_write(dst: View, op, oob) -> bool:
    """dst_rmw_op: the DMA adds the source to what dst holds (nl.add is the only operation AWS documents;
    a scatter with repeated indices adds every row that lands on one). Sums are taken in fp32 and rounded to
    dst's dtype, so dst must be a floating-point tensor here."""
    if op is None:
        return False
    if _alu_of(op) != "add":
        raise current().error(f"dma_copy: dst_rmw_op={getattr(op, '__name__', op)!r}; the DMA engines' "
                              "read-modify-write supports nl.add only")
    if oob == oob_mode.skip:
        raise current().error("dma_copy: dst_rmw_op takes oob_mode=error only")
    if dst.dtype not in ("float32", "bfloat16", "float16"):
        raise current().error(f"dma_copy: dst_rmw_op=nl.add into {dst!r}: this emulator adds into float32, "
                              "bfloat16 and float16 tensors")
    return True


def dma_compute(dst: View, srcs, reduce_op=None, scales=None, unique_indices: bool = True, oob_mode=None,
                **_) -> None:
    """dst = srcs[0] + srcs[1] + ..., summed in fp32 by the DMA engines and rounded once to dst's dtype.
    AWS's limits: reduce_op nl.add only, every scale 1.0, 1 to 16 sources of dst's element count. With a
    vector_offset, a read-modify-write of exactly two sources: dst[indices] += src (dst in HBM, the matching
    source indirect too) or dst += src[indices] (dst in SBUF, the other source dst itself), the indirect DMA
    that dma_copy(dst_rmw_op=nl.add) makes."""
    srcs = list(srcs)
    if reduce_op is None or _alu_of(reduce_op) != "add":
        raise current().error(f"dma_compute: reduce_op={getattr(reduce_op, '__name__', reduce_op)!r}; the DMA "
                              "engines reduce with nl.add only")
    if scales is not None and (len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales)):
        raise current().error(f"dma_compute: scales {list(scales)} for {len(srcs)} sources; every scale must be "
                              "1.0 (the only one the DMA engines support)")
    if not 1 <= len(srcs) <= 16:
        raise current().error(f"dma_compute: {len(srcs)} sources; it takes 1 to 16")
    if dst.vector_offset is not None or any(s.vector_offset is not None for s in srcs):
        return _read_modify_write_compute(dst, srcs, unique_indices, oob_mode)
    if all(s.shape == dst.shape for s in srcs):
        _emit("dma_compute", "dma", dst, srcs, None)
        return
    squeezed = [nl._same_shape(dst, s) for s in srcs]
    if any(d is None or d.shape != squeezed[0][0].shape for d, _ in squeezed):
        raise current().error(f"dma_compute: the sources {[list(s.shape) for s in srcs]} and dst "
                              f"{list(dst.shape)} must hold the same elements")
    _emit("dma_compute", "dma", squeezed[0][0], [s for _, s in squeezed], None)


def _read_modify_write_compute(dst: View, srcs, unique_indices: bool, oob) -> None:
    def same(a: View, b: View) -> bool:
        return a.access() == b.access() and a.vector_offset == b.vector_offset
    if len(srcs) != 2 or not unique_indices:
        raise current().error("dma_compute with a vector_offset reads and writes dst in place: exactly two "
                              "sources and unique_indices=True (AWS: repeated indices are not supported yet)")
    if dst.vector_offset is not None:  # scatter: dst[indices] = dst[indices] + src
        others = [s for s in srcs if not same(s, dst)]
        if len(others) != 1 or dst.buffer != "hbm" or others[0].buffer != "sbuf":
            raise current().error("dma_compute scatter: dst (HBM, with a vector_offset) must be one of the two "
                                  "sources, the other an SBUF tile")
        source = others[0]
    else:  # gather: dst = dst + src[indices]
        gathered = [s for s in srcs if s.vector_offset is not None]
        rest = [s for s in srcs if s.vector_offset is None]
        if len(gathered) != 1 or not rest or not same(rest[0], dst) or dst.buffer != "sbuf" \
                or gathered[0].buffer != "hbm":
            raise current().error("dma_compute gather: dst (SBUF) must be one of the two sources, the other an "
                                  "HBM tensor with a vector_offset")
        source = gathered[0]
    _indirect_copy(dst, source, oob, None, _read_modify_write(dst, nl.add, oob))


class dge_mode:  # noqa: N801
    """How DMA descriptors are generated; the emulator's DMA is the same in each mode."""
    unknown, none, swdge, hwdge = "unknown", "none", "swdge", "hwdge"


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _transpose_axes(src: View, axes) -> tuple:
    """The permutation dma_transpose applies to a src of this many axes (axes, if given, must be it)."""
    expected = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if expected is None:
        raise current().error(f"dma_transpose: {src!r} has {src.ndim} axes; it transposes 2-, 3- and 4-axis tiles")
    if axes is not None and tuple(axes) != expected:
        raise current().error(f"dma_transpose: axes {tuple(axes)} for a {src.ndim}-axis tile; supported: {expected}")
    return expected


def transposed_source(src: View, axes=None, dge_mode=None) -> View:
    """The view a DMA transpose reads: src with its axes permuted as dma_transpose permutes them."""
    if src.vector_offset is not None:
        raise current().error("dma_transpose of an indirect source (vector_offset): give it to nisa.dma_transpose "
                              "(the current API's gather-transpose)")
    expected = _transpose_axes(src, axes)
    if src.buffer == "psum":
        raise current().error("dma_transpose: the source is a tile in HBM or SBUF, not PSUM")
    if dge_mode == "hwdge" and (src.shape[0] != 16 or src.shape[-1] % 128 or src.itemsize != 2):
        raise current().error(f"dma_transpose with dge_mode=hwdge needs a 2-byte source of shape [16, ..., a "
                              f"multiple of 128]; got {list(src.shape)} {src.dtype}")
    moved = src.permuted(expected)
    # The DMA engines read it element by element: its first axis is the one the result has on partitions.
    return View(moved.decl, moved.offset, moved.sizes, moved.strides, moved.axis_vars, moved.bounds)


def dma_transpose(dst: View, src: View, axes=None, dge_mode=None, mask=None, oob_mode=None, **_) -> None:
    """dst = src transposed by the DMA engines ([1, 0]; [2, 1, 0]; [3, 1, 2, 0]); with an indirect src
    (`.ap(..., vector_offset=index, indirect_dim=0)`), the rows the index picks, gathered, then transposed."""
    if src.vector_offset is not None:
        return _gather_transpose(dst, src, axes, dge_mode, oob_mode, mask)
    if oob_mode == "skip":
        raise current().error("dma_transpose: oob_mode=skip is for an indirect source (vector_offset)")
    view = transposed_source(src, axes, dge_mode)
    if tuple(dst.shape) != tuple(view.shape):
        raise current().error(f"dma_transpose: the transpose of {src!r} is {list(view.shape)}, dst is {dst!r}")
    _emit("dma_copy", "dma", dst, (view,), mask)


def _gather_transpose(dst: View, src: View, axes, dge, oob, mask) -> None:
    """AWS's indirect dma_transpose (a software-DGE gather-transpose, NeuronCore-v3 and newer): row j of src's
    first axis is row flat[j] of the HBM tensor, flat the [P, K] uint32 index tile read column by column,
    and dst is those rows transposed. One indirect DMA writes dst through the permuted view, each gathered
    row landing where the transpose puts it (a partial last index column is a second one)."""
    trace = current()
    index, dim = src.vector_offset
    expected = _transpose_axes(src, axes)
    rows = src.shape[0]
    if trace.version < 3:
        raise trace.error(f"an indirect dma_transpose needs a NeuronCore-v3 or newer, not v{trace.version}")
    if dge not in (None, "unknown", "swdge"):
        raise trace.error(f"an indirect dma_transpose runs on the software DGE: dge_mode unknown or swdge, not {dge}")
    if dim != 0:
        raise trace.error(f"an indirect dma_transpose gathers along the source's first axis (indirect_dim=0), "
                          f"not {dim}")
    if src.buffer != "hbm" or dst.buffer != "sbuf":
        raise trace.error(f"an indirect dma_transpose reads HBM and writes SBUF: src {src!r}, dst {dst!r}")
    if src.itemsize != 2 or dst.dtype != src.dtype:
        raise trace.error(f"an indirect dma_transpose moves 2-byte elements unconverted: src {src.dtype}, "
                          f"dst {dst.dtype}")
    if src.shape[-1] > 128 or rows % 16:
        raise trace.error(f"an indirect dma_transpose takes a source of a multiple of 16 rows with at most 128 "
                          f"elements on its last axis (dst's partitions), not {list(src.shape)}")
    if src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]):
        raise trace.error(f"a 4-axis indirect dma_transpose needs src.shape[1] or src.shape[2] to be 1: "
                          f"{list(src.shape)}")
    if not isinstance(index, View) or index.buffer != "sbuf" or index.dtype != "uint32" or index.ndim != 2:
        raise trace.error(f"the indices of an indirect dma_transpose are a 2-axis uint32 SBUF tile, not {index!r}")
    partitions, columns = index.shape
    if partitions % 16 or not 16 <= partitions <= 128 or (columns > 1 and partitions != 128) \
            or partitions * columns < rows:
        raise trace.error(f"indices {list(index.shape)} for {rows} rows: 16 to 128 partitions (a multiple of 16; "
                          f"128 with more than one column) holding at least one index per row")
    moved = src.permuted(expected)
    if tuple(dst.shape) != tuple(moved.shape):
        raise trace.error(f"dma_transpose: the transpose of {src!r} is {list(moved.shape)}, dst is {dst!r}")
    # dst in the gathered rows' order (each of the three permutations is its own inverse).
    landing = dst.permuted(expected)
    landing = View(landing.decl, landing.offset, landing.sizes, landing.strides)
    one_row = View(src.decl, src.offset, [1] + list(src.sizes[1:]), src.strides)
    by_column = index.permuted((1, 0))
    full, rest = divmod(rows, partitions)
    pieces = [(0, full * partitions, View(by_column.decl, by_column.offset, [full, partitions], by_column.strides))]
    if rest:
        pieces.append((full * partitions, rows, View(index.decl, index.offset + full * index.strides[1],
                                                     [rest, 1], index.strides)))
    for begin, end, indices in pieces:
        if end == begin:
            continue
        part = View(landing.decl, landing.offset + begin * landing.strides[0],
                    [end - begin] + list(landing.sizes[1:]), landing.strides)
        _emit("dma_copy", "dma", part, (one_row, indices), mask, indirect=True, indirect_dim=0,
              skip_oob=oob == "skip")
