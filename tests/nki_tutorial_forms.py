"""Kernels of our own written in the forms AWS's published NKI tutorials use (nki-samples,
src/nki_samples/tutorials): block tiles with nl.par_dim after their block axes, reductions over
free axes that are not the trailing ones, SPMD grids spread over NeuronCores with nl.spmd_dim,
scans carried from one chunk to the next, a one-partition tile broadcast to all partitions,
DMA casting on store, and hand placement through nki.compiler."""
from __future__ import annotations

import numpy as np

import neuronxcc.nki as beta
import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki.isa as bisa
import neuronxcc.nki.language as bnl
from neuronxcc.nki import compiler

P = 128


@beta.jit
def blocked_products(lhsT, rhs):
    """out[m-th 128 rows] = lhsT[:, m-th 128 columns].T @ rhs, each product in its own block of one
    PSUM tensor [blocks, par_dim(128), n] and its own block of an SBUF tensor."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = bnl.ndarray((M, N), dtype=bnl.float32, buffer=bnl.shared_hbm)
    blocks = M // P
    a = bnl.load(lhsT)
    b = bnl.load(rhs)
    acc = bnl.ndarray((blocks, bnl.par_dim(P), N), dtype=bnl.float32, buffer=bnl.psum)
    res = bnl.ndarray((blocks, bnl.par_dim(P), N), dtype=bnl.float32, buffer=bnl.sbuf)
    for m in bnl.affine_range(blocks):
        acc[m] = bisa.nc_matmul(a[:, m * P:(m + 1) * P], b)
        res[m, :, :] = bisa.tensor_copy(acc[m])
    for m in bnl.affine_range(blocks):
        bnl.store(out[m * P:(m + 1) * P, :], value=res[m])
    return out


@beta.jit
def block_sums(x):
    """Sum of block tiles accumulated with +=: out = x[0:128] + x[128:256] + ... (rows in 128-row tiles)."""
    rows, cols = x.shape
    out = bnl.ndarray((P, cols), dtype=x.dtype, buffer=bnl.shared_hbm)
    total = bnl.zeros((2, bnl.par_dim(P), cols), dtype=bnl.float32)
    for t in bnl.affine_range(rows // P):
        total[t % 2, 0:P, 0:cols] += bnl.load(x[t * P:(t + 1) * P, :])
    bnl.store(out, value=bnl.add(total[0], total[1]))
    return out


@beta.jit
def window_max(x, window):
    """Max over window x window patches of [channels, h, w] (a max-pool): a reduction over the
    free axes 2 and 4 of a 5-axis index expression, not the trailing ones."""
    channels, h, w = x.shape
    out = bnl.ndarray((channels, h // window, w // window), dtype=x.dtype, buffer=bnl.shared_hbm)
    i0, i1, i2, i3, i4 = bnl.mgrid[0:channels, 0:h // window, 0:window, 0:w // window, 0:window]
    tile = bnl.load(x)
    bnl.store(out, value=bnl.max(tile[i0, window * i1 + i2, window * i3 + i4], axis=[2, 4]))
    return out


@beta.jit
def add_rows(a, b):
    """One 128 x 512 tile a program; the grid is built with nl.spmd_dim over two NeuronCores."""
    i, j = bnl.program_id(0), bnl.program_id(1)
    out = bnl.ndarray(a.shape, dtype=a.dtype, buffer=bnl.shared_hbm)
    rows = slice(i * P, (i + 1) * P)
    cols = slice(j * 512, (j + 1) * 512)
    bnl.store(out[rows, cols], value=bnl.add(bnl.load(a[rows, cols]), bnl.load(b[rows, cols])))
    return out


def add_on_two_cores(a, b):
    return add_rows[bnl.spmd_dim(a.shape[0] // (2 * P), bnl.nc(2)), a.shape[1] // 512](a, b)


@beta.jit
def chunked_decay_scan(decay, inputs, chunk):
    """state[t] = decay[t] * state[t - 1] + inputs[t] along the free axis, `chunk` columns at a time:
    each chunk's scan starts from the last state of the one before (a per-partition initial value)."""
    rows, cols = decay.shape
    out = bnl.ndarray((rows, cols), dtype=decay.dtype, buffer=bnl.shared_hbm)
    state = bnl.zeros((rows, 1), dtype=bnl.float32)
    for c in bnl.sequential_range(cols // chunk):
        d = bnl.load(decay[:, c * chunk:(c + 1) * chunk])
        u = bnl.load(inputs[:, c * chunk:(c + 1) * chunk])
        scanned = bisa.tensor_tensor_scan(d, u, initial=state, op0=np.multiply, op1=np.add)
        state[...] = scanned[:, chunk - 1]
        bnl.store(out[:, c * chunk:(c + 1) * chunk], value=scanned)
    return out


@beta.jit
def scale_rows_by_one_row(x, row):
    """x * row, where row [1, cols] is loaded into one partition and broadcast to all of them."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    one = bnl.load(row)
    everywhere = one.broadcast_to((x.shape[0], x.shape[1]))
    bnl.store(out, value=bisa.tensor_tensor(bnl.load(x), everywhere, op=bnl.multiply))
    return out


@beta.jit
def store_as_bf16(x):
    """An fp32 tile stored into a bf16 HBM tensor: the DMA casts."""
    out = bnl.ndarray(x.shape, dtype=bnl.bfloat16, buffer=bnl.shared_hbm)
    tile = bnl.ndarray(x.shape, dtype=bnl.float32, buffer=bnl.sbuf)
    bisa.dma_copy(dst=tile, src=x)
    bisa.dma_copy(dst=out, src=tile)
    return out


@compiler.skip_middle_end_transformations
@beta.jit
def placed_softmax_sums(x):
    """Row sums of exp(x) with hand-placed tiles, a kept order and tensor_scalar_reduce."""
    rows, cols = x.shape
    out = bnl.ndarray((rows, 1), dtype=bnl.float32, buffer=bnl.shared_hbm)
    tile = bnl.ndarray((bnl.par_dim(rows), cols), dtype=x.dtype,
                       buffer=compiler.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,)))
    tile[...] = bnl.load(x)
    sums = bnl.ndarray((bnl.par_dim(rows), 2), dtype=bnl.float32,
                       buffer=compiler.sbuf.mod_alloc(base_addr=cols * 4))
    for half in bnl.sequential_range(2, directives=compiler.no_reorder()):
        part = tile[:, half * (cols // 2):(half + 1) * (cols // 2)]
        bisa.activation(op=bnl.exp, data=part, reduce_op=bnl.add, reduce_res=sums[:, half],
                        reduce_cmd=bisa.reduce_cmd.reset_reduce)
    doubled = bnl.ndarray((bnl.par_dim(rows), 1), dtype=bnl.float32, buffer=bnl.sbuf)
    bisa.tensor_scalar_reduce(data=sums, op0=bnl.multiply, operand0=1.0, reduce_op=bnl.add,
                                       reduce_res=doubled)
    bnl.store(out, value=doubled)
    return out


@beta.jit
def placed_past_sbuf(x):
    tile = bnl.ndarray((bnl.par_dim(P), 1024), dtype=bnl.float32,
                       buffer=compiler.sbuf.mod_alloc(base_addr=224 * 1024 - 1024))
    tile[...] = bnl.load(x)
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=tile)
    return out


@beta.jit
def nine_psum_blocks(x):
    out = bnl.ndarray((P, 512), dtype=bnl.float32, buffer=bnl.shared_hbm)
    acc = bnl.ndarray((9, bnl.par_dim(P), 512), dtype=bnl.float32, buffer=bnl.psum)
    a = bnl.load(x)
    for m in bnl.affine_range(9):
        acc[m] = bisa.nc_matmul(a[:, 0:P], a)
    total = bnl.copy(acc[0])
    for m in range(1, 9):
        total = bnl.add(total, acc[m])
    bnl.store(out, value=total)
    return out


@beta.jit
def carried_reduce_cmd(x):
    out = bnl.ndarray((x.shape[0], 1), dtype=bnl.float32, buffer=bnl.shared_hbm)
    sums = bnl.ndarray((x.shape[0], 1), dtype=bnl.float32, buffer=bnl.sbuf)
    bisa.activation(op=bnl.exp, data=bnl.load(x), reduce_op=bnl.add, reduce_res=sums,
                    reduce_cmd=bisa.reduce_cmd.reduce)
    bnl.store(out, value=sums)
    return out


@beta.jit
def transpose_by_identity(x):
    """x [128, n]^T in 128-column blocks through the Tensor engine against an identity held as a shared
    constant; each block's product accumulates (+=) into a PSUM block never written before."""
    rows, cols = x.shape
    out = bnl.ndarray((cols, rows), dtype=bnl.float32, buffer=bnl.shared_hbm)
    identity = bnl.load(bnl.shared_constant(np.identity(P, dtype=np.int8), dtype=bnl.float32))
    tile = bnl.load(x)
    blocks = bnl.ndarray((cols // P, bnl.par_dim(P), P), dtype=bnl.float32, buffer=bnl.psum)
    for b in bnl.affine_range(cols // P):
        blocks[b, :, :] += bisa.nc_matmul(tile[:, b * P:(b + 1) * P], identity)
        bnl.store(out[b * P:(b + 1) * P, :], value=bisa.tensor_copy(blocks[b]))
    return out


@beta.jit
def rotating_psum_blocks(x):
    """Sixteen 2 KiB PSUM blocks of one tensor, each written, read and done with before the next: live one
    at a time, as the compiler allocates block tiles (the whole tensor would need 16 of the 8 banks)."""
    out = bnl.ndarray((P, 512), dtype=bnl.float32, buffer=bnl.shared_hbm)
    acc = bnl.ndarray((16, bnl.par_dim(P), 512), dtype=bnl.float32, buffer=bnl.psum)
    a = bnl.load(x)
    total = bnl.zeros((P, 512), dtype=bnl.float32)
    for m in bnl.sequential_range(16):
        acc[m] = bisa.nc_matmul(a[:, 0:P], a)
        total[...] = bnl.add(total, acc[m])
    bnl.store(out, value=total)
    return out


@beta.jit
def scale_by_constant_row(x, weights):
    """x times a row of constants given to the kernel as NumPy data (nl.shared_constant with a dtype)."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    row = bnl.load(bnl.shared_constant(np.asarray(weights, dtype=np.float64).reshape(1, -1),
                                      dtype=bnl.float32).broadcast_to((x.shape[0], len(weights))))
    bnl.store(out, value=bnl.multiply(bnl.load(x), row))
    return out


@nki.jit
def dma_transposed(x):
    """x [rows, cols] -> [cols, rows] (2-D), loaded through SBUF and transposed by the DMA engines."""
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    flipped = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=flipped, src=tile)
    nisa.dma_copy(dst=out, src=flipped)
    return out


@beta.jit
def dma_transposed_4d(x):
    """A [a, b, c, d] HBM tensor read as [d, b, c, a] (axes (3, 1, 2, 0)), beta API."""
    out = bnl.ndarray((x.shape[3], x.shape[1], x.shape[2], x.shape[0]), dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=bisa.dma_transpose(x, axes=(3, 1, 2, 0)))
    return out


@nki.jit
def dma_transposed_wrong_axes(x):
    out = nl.ndarray(x.shape[::-1], dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape[::-1], dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tile, src=x, axes=(0, 1))
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def gather_rows(table, ids, skip_missing=False):
    """out[i] = table[ids[i]]: an indirect DMA whose rows come from an index tile read as the kernel runs
    (the form AWS's NKI library uses: tensor.ap(..., vector_offset=index_tile, indirect_dim=0))."""
    rows, width = table.shape
    count = ids.shape[0]
    out = nl.ndarray((count, width), dtype=table.dtype, buffer=nl.shared_hbm)
    index = nl.ndarray((count, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids.reshape((count, 1)))
    picked = nl.ndarray((count, width), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=picked, value=-1.0)
    nisa.dma_copy(dst=picked, src=table.ap([[width, count], [1, width]], offset=0, vector_offset=index,
                                           indirect_dim=0),
                  oob_mode=nisa.oob_mode.skip if skip_missing else nisa.oob_mode.error)
    nisa.dma_copy(dst=out, src=picked)
    return out


@nki.jit
def gather_by_float_index(table):
    out = nl.ndarray((4, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
    index = nl.zeros((4, 1), dtype=nl.float32)
    picked = nl.ndarray((4, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=picked, src=table.ap([[table.shape[1], 4], [1, table.shape[1]]], vector_offset=index))
    nisa.dma_copy(dst=out, src=picked)
    return out


@beta.jit
def products_reduced_over_blocks(lhsT, rhs):
    """sum over 128-row blocks k of lhsT[k].T @ rhs[k], summed into SBUF with nl.loop_reduce; the output
    is returned through a reshape of the whole tensor."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = bnl.ndarray((M * N,), dtype=bnl.float32, buffer=bnl.shared_hbm)
    total = bnl.zeros((M, N), dtype=bnl.float32)
    for k in bnl.affine_range(K // P):
        product = bnl.zeros((M, N), dtype=bnl.float32, buffer=bnl.psum)
        product += bisa.nc_matmul(bnl.load(lhsT[k * P:(k + 1) * P, :]), bnl.load(rhs[k * P:(k + 1) * P, :]))
        total[...] = bnl.loop_reduce(product, op=np.add, loop_indices=[k])
    flat = out.reshape((M, N))
    bnl.store(flat, value=total)
    return out.reshape((M, N))


def _bank_of_block(index, partitions, free):
    return index[0] % 2, 0, 0


@beta.jit
def psum_placed_by_function(x):
    """Four PSUM blocks placed by a function of their index (nki.compiler.psum.alloc)."""
    out = bnl.ndarray((4, P, 512), dtype=bnl.float32, buffer=bnl.shared_hbm)
    acc = bnl.ndarray((4, bnl.par_dim(P), 512), dtype=bnl.float32, buffer=compiler.psum.alloc(_bank_of_block))
    a = bnl.load(x)
    for m in bnl.affine_range(4):
        acc[m] = bisa.nc_matmul(a[:, 0:P], a)
        bnl.store(out[m], value=bisa.tensor_copy(acc[m]))
    return out


@nki.jit
def scatter_rows(rows, ids, height):
    """out[ids[i]] = rows[i] (other rows zero): an indirect DMA into its destination."""
    count, width = rows.shape
    out = nl.ndarray((height, width), dtype=rows.dtype, buffer=nl.shared_hbm)
    zeros = nl.zeros((height, width), dtype=rows.dtype)
    nisa.dma_copy(dst=out, src=zeros)
    index = nl.ndarray((count, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids.reshape((count, 1)))
    tile = nl.ndarray((count, width), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=rows)
    nisa.dma_copy(dst=out.ap([[width, count], [1, width]], offset=0, vector_offset=index, indirect_dim=0), src=tile)
    return out


@nki.jit
def added_by_dma(a, b):
    """out = a + b, the add done by the DMA that writes b's tile into out (dst_rmw_op=nl.add)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    tile = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=b)
    nisa.dma_copy(dst=out, src=tile, dst_rmw_op=nl.add)
    return out


@nki.jit
def scatter_added_rows(rows, ids, height):
    """out[ids[i]] += rows[i] from zeros, repeated ids summing (an embedding's gradient): an indirect DMA
    with dst_rmw_op=nl.add."""
    count, width = rows.shape
    out = nl.ndarray((height, width), dtype=rows.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.zeros((height, width), dtype=rows.dtype))
    index = nl.ndarray((count, 1), dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=ids.reshape((count, 1)))
    tile = nl.ndarray((count, width), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=rows)
    nisa.dma_copy(dst=out.ap([[width, count], [1, width]], offset=0, vector_offset=index, indirect_dim=0),
                  src=tile, dst_rmw_op=nl.add)
    return out


@nki.jit
def dma_with_rmw_op(a, op):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    nisa.dma_copy(dst=out, src=a, dst_rmw_op=op)
    return out


@nki.jit
def read_as(x, dtype, columns):
    """x's bytes read as `dtype` through an access pattern (`.ap(dtype=...)`), [rows, columns] of them."""
    rows = x.shape[0]
    out = nl.ndarray((rows, columns), dtype=dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((rows, columns), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x.ap([[columns, rows], [1, columns]], offset=0, dtype=dtype))
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def written_as(x):
    """fp32 x copied into a bf16-declared output through the output's bytes seen as fp32."""
    rows, columns = x.shape
    out = nl.ndarray((rows, 2 * columns), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    tile = nl.ndarray((rows, columns), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out.ap([[columns, rows], [1, columns]], offset=0, dtype=nl.float32), src=tile)
    return out


@nki.jit
def tile_read_as(x):
    tile = nl.load(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile.ap([[x.shape[1], x.shape[0]], [1, x.shape[1]]], dtype=nl.int32))
    return out


@nki.jit
def exp_sums_carried(x):
    """Per row, the sum of exp over x's three [128, 512] blocks, summed in the Scalar engine's registers
    across the three activations (reset, then reduce), read out after the last."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf), op=nl.exp,
                    data=nl.load(x[0:128, :]), reduce_cmd=nisa.reduce_cmd.reset)
    for t in nl.sequential_range(3):  # each step writes `sums`: in order
        activated = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=activated, op=nl.exp, data=nl.load(x[t * 128:(t + 1) * 128, :]), reduce_op=nl.add,
                        reduce_res=sums, reduce_cmd=nisa.reduce_cmd.reduce)
    nl.store(out, value=sums)
    return out


@nki.jit
def max_carried(x):
    """Per row, the maximum of 2 * x over its two [128, 512] blocks: tensor_scalar_reduce starting the
    Vector engine's registers (reset_reduce), then adding the second block's maximum to them (reduce)."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    best = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    for t, command in ((0, nisa.reduce_cmd.reset_reduce), (1, nisa.reduce_cmd.reduce)):
        doubled = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=doubled, data=nl.load(x[t * 128:(t + 1) * 128, :]), op0=nl.multiply,
                                  operand0=2.0, reduce_op=nl.maximum, reduce_res=best, reduce_cmd=command)
    nl.store(out, value=best)
    return out


@beta.jit
def columns_as_axes(x, axes):
    """x [4, 16] read through an access pattern of `axes` axes: the column index spread over free axes of
    sizes 2, 2, 2, 2 (and size-1 axes up to the count), copied as is."""
    ones = axes - 5
    grid = bnl.mgrid[(slice(0, 4),) + (slice(0, 2),) * 3 + (slice(0, 1),) * ones + (slice(0, 2),)]
    p, a, b, c, d = grid[0], grid[1], grid[2], grid[3], grid[-1]
    out = bnl.ndarray((4,) + (2,) * 3 + (1,) * ones + (2,), dtype=x.dtype, buffer=bnl.shared_hbm)
    column = a * 8 + b * 4 + c * 2 + d
    for extra in grid[4:-1]:
        column = column + extra
    tile = bnl.load(x)
    bnl.store(out, value=bnl.copy(tile[p, column]))
    return out


@beta.jit
def transposed_on_load(x):
    """x [F, P] loaded as its transpose [P, F] (nl.load_transpose2d), then stored as is."""
    F, P_ = x.shape
    tile = bnl.load_transpose2d(x)
    out = bnl.ndarray((P_, F), dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=tile)
    return out


@nki.jit
def _doubled_into(dst, src):
    """A kernel of its own that other kernels call, as AWS's rotary tutorial calls its core."""
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=2.0)


@nki.jit
def doubled_by_an_inner_kernel(x):
    """2 x, the product made by _doubled_into: a jit kernel called while this one traces is inlined."""
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    _doubled_into(tile, tile)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def inner_kernel_on_a_grid(x):
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    _doubled_into[2](tile, tile)
    return tile


@beta.jit
def negated_row_max(x):
    """-max of each row, reduced with NumPy's np.max as AWS's SD-attention tutorial names it."""
    tile = bnl.load(x)
    out = bnl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=bisa.tensor_reduce(np.max, data=tile, axis=(1,), negate=True))
    return out
