"""Kernels of the DMA engines' arithmetic (nisa.dma_compute), written for these tests."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def summed_by_dma(out_dtype, in_sbuf, *sources):
    """out = the sum of `sources` (HBM tensors of one shape; with in_sbuf, every other one first loaded into
    SBUF), computed by one dma_compute into an SBUF tile of out_dtype."""
    shape = sources[0].shape
    operands = []
    for i, source in enumerate(sources):
        if in_sbuf and i % 2:
            tile = nl.ndarray(shape, dtype=source.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=source)
            source = tile
        operands.append(source)
    total = nl.ndarray(shape, dtype=out_dtype, buffer=nl.sbuf)
    nisa.dma_compute(dst=total, srcs=operands, reduce_op=nl.add, scales=[1.0] * len(operands))
    out = nl.ndarray(shape, dtype=out_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=total)
    return out


@nki.jit
def accumulated_in_place_by_dma(a, b):
    """acc = a; acc = acc + b by dma_compute, acc being both dst and a source; written flat from a [P, F]."""
    acc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=a)
    nisa.dma_compute(dst=acc, srcs=[acc, b.reshape((a.shape[0], a.shape[1]))], reduce_op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def scatter_added_by_dma_compute(table, rows, ids):
    """out = table with out[ids[i]] += rows[i]: dma_compute's scatter read-modify-write."""
    height, width = table.shape
    count = rows.shape[0]
    out = nl.ndarray(table.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=table)
    index = nl.ndarray((count, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids.reshape((count, 1)))
    tile = nl.ndarray((count, width), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=rows)
    chosen = out.ap([[width, count], [1, width]], offset=0, vector_offset=index, indirect_dim=0)
    nisa.dma_compute(dst=chosen, srcs=[chosen, tile], reduce_op=nl.add)
    return out


@nki.jit
def gather_added_by_dma_compute(base, table, ids):
    """out = base + table[ids]: dma_compute's gather read-modify-write into SBUF."""
    count, width = base.shape
    acc = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=base)
    index = nl.ndarray((count, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids.reshape((count, 1)))
    picked = table.ap([[width, count], [1, width]], offset=0, vector_offset=index, indirect_dim=0)
    nisa.dma_compute(dst=acc, srcs=[picked, acc], reduce_op=nl.add)
    out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def dma_compute_with(a, reduce_op, scales, count):
    """dma_compute of `count` copies of a, as told."""
    total = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_compute(dst=total, srcs=[a] * count, reduce_op=reduce_op, scales=scales)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=total)
    return out


@nki.jit
def bits_of_tile(x, as_dtype, words, in_scratch_hbm):
    """x's bytes read as as_dtype: loaded into an SBUF tile (or an HBM scratch tensor) and stored through
    .ap(dtype=as_dtype) as `words` elements per partition, each partition's bytes kept together."""
    P, F = x.shape
    buffer = nl.private_hbm if in_scratch_hbm else nl.sbuf
    tile = nl.ndarray((P, F), dtype=x.dtype, buffer=buffer)
    nisa.dma_copy(dst=tile, src=x)
    out = nl.ndarray((P, words), dtype=as_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile.ap(dtype=as_dtype, pattern=[[words, P], [1, words]], offset=0))
    return out


@nki.jit
def written_through_another_dtype(x):
    """An fp32 tile whose second half of each partition is zeroed through its bytes (a uint8 memset), then
    doubled as fp32: a write through one view, reads through the other."""
    P, F = x.shape
    tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.memset(dst=tile.ap(dtype=nl.uint8, pattern=[[4 * F, P], [1, 2 * F]], offset=2 * F), value=0)
    doubled = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=tile, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=doubled)
    return out


@nki.jit
def odd_bytes_as_words(x):
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # 3 bf16 per partition: 6 bytes
    nisa.dma_copy(dst=tile, src=x)
    out = nl.ndarray((x.shape[0], 1), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile.ap(dtype=nl.uint32, pattern=[[1, x.shape[0]], [1, 1]], offset=0))
    return out


@nki.jit(platform_target="trn2")
def gather_transpose(table, ids, rows, oob_skip=False):
    """AWS's indirect dma_transpose: out[p, j] = table[flat[j], p], flat the [P, K] uint32 ids read column by
    column, `rows` of them; out starts as -1 so that a skipped row shows."""
    width = table.shape[1]
    index = nl.ndarray(ids.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids)
    picked = table.ap([[width, rows], [1, width]], offset=0, vector_offset=index, indirect_dim=0)
    tile = nl.ndarray((width, rows), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(tile, -1.0)
    nisa.dma_transpose(dst=tile, src=picked, axes=(1, 0), oob_mode=nisa.oob_mode.skip if oob_skip else None)
    out = nl.ndarray((width, rows), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit(platform_target="trn2")
def gather_transpose_4d(table, ids):
    """The 4-axis form: table [T, 1, d2, d3], out[a, 0, c, j] = table[ids[j], 0, c, a] (axes (3, 1, 2, 0))."""
    _, d1, d2, d3 = table.shape
    rows = ids.shape[0] * ids.shape[1]
    index = nl.ndarray(ids.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids)
    picked = table.ap([[d1 * d2 * d3, rows], [d2 * d3, d1], [d3, d2], [1, d3]], offset=0, vector_offset=index,
                      indirect_dim=0)
    tile = nl.ndarray((d3, d1, d2, rows), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tile, src=picked, axes=(3, 1, 2, 0))
    out = nl.ndarray((d3, d1, d2, rows), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit(platform_target="trn2")
def gather_transpose_misuse(table, ids, what):
    """An indirect dma_transpose against one of AWS's rules, named by `what`."""
    width = table.shape[1]
    index = nl.ndarray(ids.shape, dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids)
    rows = 16 if what == "few_indices" else ids.shape[0] * ids.shape[1]
    if what == "rows":
        rows = 24
    picked = table.ap([[width, rows], [1, width]], offset=0, vector_offset=index, indirect_dim=0)
    tile = nl.ndarray((width, rows), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tile, src=picked, dge_mode=nisa.dge_mode.hwdge if what == "hwdge" else None)
    return tile
