"""Kernels with loops that run on the device (bounds and conditions in registers) and views moved by a
register, written for these tests in the forms AWS's NKI guides show."""
import nki
import nki.isa as nisa
import nki.language as nl


def _count_register(count):
    """A register holding count[0, 0] (an int32 HBM tensor), loaded through SBUF."""
    tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=count)
    register = nisa.register_alloc()
    nisa.register_load(register, tile)
    return register


def _next_row(offset, F):
    """offset += F, through SBUF: a register moves by DMA, and SBUF does the arithmetic."""
    step = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(step, offset)
    nisa.tensor_scalar(dst=step, data=step, op0=nl.add, operand0=F)
    nisa.register_load(offset, step)


@nki.jit
def rows_doubled_by_a_device_loop(x, count):
    """out[r] = 2 x[r] for the first count[0, 0] rows (a trip count read at run time), zeros after; one
    [1, F] row per iteration, addressed with the loop's index as scalar_offset."""
    R, F = x.shape
    out = nl.ndarray((R, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.zeros((R, F), dtype=x.dtype, buffer=nl.sbuf))
    offset = nisa.register_alloc(0)

    def body(i):
        row = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x.ap([[F, 1], [1, F]], offset=0, scalar_offset=offset))
        doubled = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=doubled, data=row, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], offset=0, scalar_offset=offset), src=doubled)
        _next_row(offset, F)

    nl.fori_loop(0, _count_register(count), body)
    return out


@nki.jit
def sum_of_index_values(count, start, step):
    """acc = the sum of the loop index over range(start, count[0, 0], step), each index stored from its
    register and added (nl.dynamic_range, the index read back through register_store)."""
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.dynamic_range(start, _count_register(count), step):
        value = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(value, i)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=value, op=nl.add)
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def halvings_until_zero(x):
    """A while loop: n = x[0, 0]; while n != 0: n //= 2 (through SBUF), counting the iterations."""
    n_tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_tile, src=x)
    n = nisa.register_alloc()
    nisa.register_load(n, n_tile)
    count = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(condition):
        nisa.tensor_scalar(dst=n_tile, data=n_tile, op0=nl.divide, operand0=2.0)
        nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=1.0)
        following = nisa.register_alloc()
        nisa.register_load(following, n_tile)
        return following

    nl.while_loop(n, body)
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=count)
    return out


@nki.jit
def row_at_a_loaded_offset(x, where):
    """out = x's row at element offset where[0, 0] (a scalar_offset from a register), past the end an error."""
    F = x.shape[1]
    out = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=x.ap([[F, 1], [1, F]], offset=0, scalar_offset=_count_register(where)))
    nisa.dma_copy(dst=out, src=row)
    return out


@nki.jit
def branch_on_a_register(x):
    register = nisa.register_alloc(1)
    if register:
        nisa.dma_copy(dst=x, src=x)
    return None


@nki.jit
def rows_times_a_tile_made_before_the_loop(x, count):
    """out[r] = x[r] * 3 for count[0, 0] rows, the 3s in a tile made before the loop and last read in its
    body: it must outlive every iteration, not lend its space to a tile the body makes after reading it."""
    R, F = x.shape
    out = nl.ndarray((R, F), dtype=x.dtype, buffer=nl.shared_hbm)
    threes = nl.full((1, F), 3.0, dtype=x.dtype, buffer=nl.sbuf)
    offset = nisa.register_alloc(0)

    def body(i):
        row = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x.ap([[F, 1], [1, F]], offset=0, scalar_offset=offset))
        product = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=product, data1=row, data2=threes, op=nl.multiply)
        nisa.dma_copy(dst=out.ap([[F, 1], [1, F]], offset=0, scalar_offset=offset), src=product)
        _next_row(offset, F)  # its tile is made after the last read of threes

    nl.fori_loop(0, _count_register(count), body)
    return out


@nki.jit
def flat_row_at_a_loaded_offset(x, where):
    """As row_at_a_loaded_offset, HBM to HBM: the moved 1-D view against a [1, F] output, which dma_copy
    squeezes to one shape (the move must survive it)."""
    F = x.shape[1]
    out = nl.ndarray((1, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x.ap([[1, F]], offset=0, scalar_offset=_count_register(where)))
    return out
