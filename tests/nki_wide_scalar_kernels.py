"""Kernels with 64-bit (nl.int64, SDK 2.33+) and unsigned (nl.uint32, SDK 2.34) scalars: loaded from their
tiles, combined, stored and used as HBM offsets, in the forms AWS's NkiScalar guide shows; and the uses AWS
refuses them."""
import nki
import nki.isa as nisa
import nki.language as nl


def _loaded(value, dtype=nl.int64):
    """The scalar in value[0, 0] (an HBM tensor), loaded through an SBUF tile of `dtype`."""
    tile = nl.ndarray((1, 1), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=value)
    return nisa.scalar_load(tile)


@nki.jit
def wide_arithmetic(a, b):
    """out[0] = a + b, a - b, a * b, a * 2 + 1, -a, 7 - b on int64 scalars, each stored through an int64 tile."""
    x, y = _loaded(a), _loaded(b)
    results = [x + y, x - y, x * y, x * 2 + 1, -x, 7 - y]
    out = nl.ndarray((1, len(results)), dtype=nl.int64, buffer=nl.shared_hbm)
    for j, value in enumerate(results):
        tile = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)
        nisa.scalar_store(tile, value)
        nisa.dma_copy(dst=out[0:1, j:j + 1], src=tile)
    return out


@nki.jit
def narrow_product_wraps(a, b):
    """a * b on int32 scalars: wraps at 32 bits where the same product of int64 scalars does not."""
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.scalar_store(out, _loaded(a, nl.int32) * _loaded(b, nl.int32))
    return out


@nki.jit
def row_at_wide_offset(table, row, width):
    """out = table[row * width : row * width + width] (a flat HBM tensor), the offset an int64 scalar."""
    out = nl.ndarray((1, width), dtype=table.dtype, buffer=nl.shared_hbm)
    start = _loaded(row) * width
    tile = nl.ndarray((1, width), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=table.ap([[width, 1], [1, width]], scalar_offset=start))
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def wide_scalar_misuse(a, what):
    """A 64-bit scalar used as AWS refuses, named by `what`."""
    x = _loaded(a)
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    if what == "compare":
        x > 0
    elif what == "divide":
        nisa.scalar_alu(x, 3, op=nl.divide)
    elif what == "mixed":
        x + _loaded(a, nl.int32)
    elif what == "loop_bound":
        nl.fori_loop(0, x, lambda i: None)
    elif what == "branch":
        nl.if_else(x, lambda: None)
    elif what == "store_narrow":
        nisa.scalar_store(out, x)
    elif what == "sbuf_offset":
        tile = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.sbuf)
        tile.ap([[8, 1], [1, 2]], scalar_offset=x)
    elif what == "compute":
        tile = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        nisa.tensor_scalar(tile, tile, nl.add, 1)
    elif what == "convert":
        tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
    return out


@nki.jit
def transposed_by_dma(x):
    """x transposed by the DMA engines (a strided copy within one dtype)."""
    tile = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tile, src=x)
    out = nl.ndarray(tile.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def unsigned_operations(a, b):
    """a + b, a - b, a * b, a / b, fmod(a, b), max(a, b), min(a, b) on uint32 scalars (stored to uint32), then
    a < b, a > b, a == b (int32 results)."""
    x, y = _loaded(a, nl.uint32), _loaded(b, nl.uint32)
    arithmetic = [x + y, x - y, x * y] + [nisa.scalar_alu(x, y, op=op) for op in
                                          (nl.divide, nl.fmod, nl.maximum, nl.minimum)]
    comparisons = [x < y, x > y, x == y]
    out = nl.ndarray((1, len(arithmetic)), dtype=nl.uint32, buffer=nl.shared_hbm)
    flags = nl.ndarray((1, len(comparisons)), dtype=nl.int32, buffer=nl.shared_hbm)
    for j, value in enumerate(arithmetic):
        nisa.scalar_store(out[0:1, j:j + 1], value)
    for j, value in enumerate(comparisons):
        nisa.scalar_store(flags[0:1, j:j + 1], value)
    return out, flags


@nki.jit
def unsigned_misuse(a, what):
    x = _loaded(a, nl.uint32)
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    if what == "loop_bound":
        nl.fori_loop(0, x, lambda i: None)
    elif what == "while":
        nl.while_loop(x, lambda r: r)
    elif what == "offset":
        out.ap([[1, 1], [1, 1]], scalar_offset=x)
    elif what == "mixed":
        x + _loaded(a, nl.int32)
    elif what == "negative":
        x + (-1)
    return out
