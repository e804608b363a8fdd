"""NKI kernels of the kinds AWS's tutorials teach, written for these tests:
tiled addition over an SPMD grid, a transpose, matmuls from one tile to
fully tiled (current API and beta), a ragged masked kernel, RMSNorm and a
scan. Imported through the names Trainium code uses (`nki`, `neuronxcc.nki`)."""
import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as beta
import neuronxcc.nki.isa as bisa
import neuronxcc.nki.language as bnl

P = 128


@nki.jit
def add_grid(a, b):
    """Each program instance adds one 128-row block (launched as add_grid[rows // 128])."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    x = nl.load(a[i * P:(i + 1) * P, :])
    y = nl.load(b[i * P:(i + 1) * P, :])
    nl.store(out[i * P:(i + 1) * P, :], value=nl.add(x, y))
    return out


@nki.jit
def transpose_tile(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    flipped = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(flipped, tile)
    result = nl.ndarray(flipped.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=result, src=flipped)
    nisa.dma_copy(dst=out, src=result)
    return out


@nki.jit
def matmul_tiled(lhsT, rhs):
    """out[M, N] = lhsT.T @ rhs, K accumulated in PSUM (nc_matmul's accumulate=None)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // P):
        for n in nl.affine_range(N // 512):
            acc = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // P):
                a = nl.ndarray((P, P), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((P, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * P:(k + 1) * P, m * P:(m + 1) * P])
                nisa.dma_copy(dst=b, src=rhs[k * P:(k + 1) * P, n * 512:(n + 1) * 512])
                nisa.nc_matmul(acc, a, b)
            res = nl.ndarray((P, 512), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * P:(m + 1) * P, n * 512:(n + 1) * 512], src=res)
    return out


@beta.jit
def matmul_beta(lhsT, rhs):
    """The beta API: values returned by instructions, `psum += nc_matmul(...)`, nl.matmul."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = bnl.ndarray((M, N), dtype=lhsT.dtype, buffer=bnl.shared_hbm)
    for m in bnl.affine_range(M // P):
        for n in bnl.affine_range(N // 512):
            res = bnl.zeros((P, 512), bnl.float32, buffer=bnl.psum)
            for k in bnl.affine_range(K // P):
                a = bnl.load(lhsT[k * P:(k + 1) * P, m * P:(m + 1) * P])
                b = bnl.load(rhs[k * P:(k + 1) * P, n * 512:(n + 1) * 512])
                if k % 2 == 0:
                    res += bisa.nc_matmul(a, b)
                else:
                    res += bnl.matmul(a, b, transpose_x=True)
            bnl.store(out[m * P:(m + 1) * P, n * 512:(n + 1) * 512], value=bnl.copy(res, dtype=out.dtype))
    return out


@beta.jit
def exp_ragged(x):
    """Rows in 128-row tiles, the last one cut by a mask (the row count need not divide by 128)."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    rows, cols = x.shape
    i_p = bnl.arange(P)[:, None]
    i_f = bnl.arange(cols)[None, :]
    for t in bnl.affine_range((rows + P - 1) // P):
        tile = bnl.load(x[t * P + i_p, i_f], mask=(t * P + i_p < rows))
        bnl.store(out[t * P + i_p, i_f], value=bnl.exp(tile), mask=(t * P + i_p < rows))
    return out


@nki.jit
def rmsnorm(x, weight, eps=1e-6):
    """x [rows, hidden] * rsqrt(mean(x^2) + eps) * weight, 128 rows at a time."""
    rows, hidden = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.load(weight.reshape((1, hidden)).broadcast_to((P, hidden)))
    for t in nl.affine_range(rows // P):
        tile = nl.load(x[t * P:(t + 1) * P, :])
        squares = nl.multiply(tile, tile, dtype=nl.float32)
        mean = nl.mean(squares, axis=1, keepdims=True)
        scale = nl.rsqrt(nl.add(mean, eps))
        normed = nl.ndarray((P, hidden), dtype=nl.float32)
        nisa.tensor_scalar(normed, tile, op0=nl.multiply, operand0=scale)
        nl.store(out[t * P:(t + 1) * P, :], value=nl.multiply(normed, w, dtype=x.dtype))
    return out


@nki.jit
def decay_scan(decay, inputs):
    """h[t] = decay[t] * h[t-1] + inputs[t] along the free axis, h[-1] = 0."""
    out = nl.ndarray(decay.shape, dtype=decay.dtype, buffer=nl.shared_hbm)
    d = nl.load(decay)
    u = nl.load(inputs)
    h = nl.ndarray(decay.shape, dtype=nl.float32)
    nisa.tensor_tensor_scan(h, d, u, initial=0.0, op0=nl.multiply, op1=nl.add)
    nl.store(out, value=nl.copy(h, dtype=decay.dtype))
    return out


@nki.jit
def add_in_place(a, b):
    """Writes a + b into a (HBM inputs are writable, as on the device)."""
    x = nl.load(a)
    nl.store(a, value=nl.add(x, nl.load(b)))


@nki.jit
def multiply(a, b):
    """a * b element-wise, rows in 128-partition tiles."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(a.shape[0] // P):
        rows = slice(t * P, (t + 1) * P)
        nl.store(out[rows, :], value=nl.multiply(nl.load(a[rows, :]), nl.load(b[rows, :])))
    return out


@nki.jit
def repeated_matmul(stationary, moving, repeats):
    """One pair of tiles, multiplied `repeats` times into one PSUM tile: bound by the Tensor engine."""
    out = nl.ndarray((stationary.shape[1], moving.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    s, m = nl.load(stationary), nl.load(moving)
    acc = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    for _ in range(repeats):
        nisa.nc_matmul(acc, s, m)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def tensor_tensor_op(a, b, op):
    """op(a, b) of one [P, F] tile on the vector engine (op: an nl or NumPy ALU operator)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=y, src=b)
    result = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=result, data1=x, data2=y, op=op)
    nisa.dma_copy(dst=out, src=result)
    return out


@beta.jit
def remainders_beta(a, b):
    """[nl.mod(a, b), nl.fmod(a, b)] through the beta API's functions."""
    out = bnl.ndarray((2,) + tuple(a.shape), dtype=a.dtype, buffer=bnl.shared_hbm)
    x, y = bnl.load(a), bnl.load(b)
    bnl.store(out[0], value=bnl.mod(x, y))
    bnl.store(out[1], value=bnl.fmod(x, y))
    return out


@nki.jit
def copy_through_sbuf(x):
    """HBM -> SBUF -> HBM in [128, F] tiles: bound by DMA."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[0] // P):
        nl.store(out[t * P:(t + 1) * P, :], value=nl.load(x[t * P:(t + 1) * P, :]))
    return out


@beta.jit
def average_pool_2x2(x):
    """x [C, H, W] -> [C, H/2, W/2]: a 5-D index grid puts each 2x2 window on the trailing axes."""
    channels, height, width = x.shape
    out = bnl.ndarray((channels, height // 2, width // 2), dtype=x.dtype, buffer=bnl.shared_hbm)
    i_c = bnl.arange(channels)[:, None, None, None, None]
    i_h = bnl.arange(height // 2)[None, :, None, None, None]
    i_w = bnl.arange(width // 2)[None, None, :, None, None]
    d_h = bnl.arange(2)[None, None, None, :, None]
    d_w = bnl.arange(2)[None, None, None, None, :]
    windows = bnl.load(x[i_c, 2 * i_h + d_h, 2 * i_w + d_w])
    sums = bnl.sum(windows, axis=(3, 4))
    bnl.store(out, value=bnl.multiply(sums, 0.25))
    return out


@nki.jit
def attention_forward(q, k, v):
    """softmax(q k^T / sqrt(d)) v for one head, 128 queries and keys, head size d <= 128."""
    seq, d = q.shape
    out = nl.ndarray((seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    q_t = nl.copy(nl.transpose(nl.load(q)))   # [d, seq]
    k_t = nl.copy(nl.transpose(nl.load(k)))
    scores = nl.multiply(nl.matmul(q_t, k_t, transpose_x=True), 1.0 / (d ** 0.5))  # [seq, seq]
    row_max = nl.max(scores, axis=1, keepdims=True)
    weights = nl.exp(nl.subtract(scores, row_max))
    total = nl.sum(weights, axis=1, keepdims=True)
    probs = nl.multiply(weights, nl.reciprocal(total))
    probs_t = nl.copy(nl.transpose(probs))     # keys on the partitions
    result = nl.matmul(probs_t, nl.load(v), transpose_x=True)   # [seq, d]
    nl.store(out, value=nl.copy(result, dtype=q.dtype))
    return out


@nki.jit
def matmul_one_tile(lhsT, rhs):
    """Step 1: one [128, 128] x [128, 512] product, nl.matmul into PSUM."""
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    product = nl.matmul(nl.load(lhsT), nl.load(rhs), transpose_x=True)
    nl.store(out, value=nl.copy(product, dtype=out.dtype))
    return out


@nki.jit
def matmul_blocked(lhsT, rhs):
    """Step 4: each [K, 128] column block of lhsT and [K, 512] block of rhs loaded once into SBUF and
    reused by every product that needs it; K accumulated in PSUM, results staged in SBUF per row block."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    k_tiles, m_tiles, n_tiles = K // P, M // P, N // 512
    rhs_tiles = nl.ndarray((P, k_tiles * n_tiles * 512), dtype=rhs.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(k_tiles):
        for n in nl.affine_range(n_tiles):
            at = (k * n_tiles + n) * 512
            nisa.dma_copy(dst=rhs_tiles[:, at:at + 512], src=rhs[k * P:(k + 1) * P, n * 512:(n + 1) * 512])
    for m in nl.affine_range(m_tiles):
        lhs_tiles = nl.ndarray((P, k_tiles * P), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            nisa.dma_copy(dst=lhs_tiles[:, k * P:(k + 1) * P], src=lhsT[k * P:(k + 1) * P, m * P:(m + 1) * P])
        row_block = nl.ndarray((P, N), dtype=out.dtype, buffer=nl.sbuf)
        for n in nl.affine_range(n_tiles):
            acc = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.sequential_range(k_tiles):
                at = (k * n_tiles + n) * 512
                nisa.nc_matmul(acc, lhs_tiles[:, k * P:(k + 1) * P], rhs_tiles[:, at:at + 512])
            nisa.tensor_copy(dst=row_block[:, n * 512:(n + 1) * 512], src=acc)
        nisa.dma_copy(dst=out[m * P:(m + 1) * P, :], src=row_block)
    return out


@nki.jit
def mean_and_variance(x):
    """Each row's mean and population variance: bn_stats over 512-column chunks, one bn_aggr over them all."""
    rows, cols = x.shape
    out = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x, dtype=nl.float32)
    chunks = (cols + nl.tile_size.bn_stats_fmax - 1) // nl.tile_size.bn_stats_fmax
    stats = nl.ndarray((rows, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        first = c * nl.tile_size.bn_stats_fmax
        nisa.bn_stats(stats[:, c * 6:(c + 1) * 6], tile[:, first:min(cols, first + nl.tile_size.bn_stats_fmax)])
    result = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(result, stats)
    nl.store(out, value=result)
    return out


@nki.jit
def top8(x):
    """Each row's 8 largest values (descending) and where they are: max8, then nc_find_index8."""
    rows, _ = x.shape
    values = nl.ndarray((rows, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    indices = nl.ndarray((rows, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    best = nl.ndarray((rows, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.max8(best, tile)
    where = nl.ndarray((rows, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(where, tile, best)
    nl.store(values, value=best)
    nl.store(indices, value=where)
    return values, indices


@nki.jit
def find_index8(data, vals):
    out = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    where = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(where, nl.load(data), nl.load(vals))
    nl.store(out, value=where)
    return out


@nki.jit
def top_k_rounds(x, rounds):
    """The 8 * rounds largest values of each row and where they are, as NKI top-k kernels find them: max8,
    then nc_match_replace8 knocks those out (with their indices) for the next round."""
    rows, _ = x.shape
    values = nl.ndarray((rows, 8 * rounds), dtype=x.dtype, buffer=nl.shared_hbm)
    indices = nl.ndarray((rows, 8 * rounds), dtype=nl.uint32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    for r in range(rounds):
        best = nl.ndarray((rows, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.max8(best, tile)
        where = nl.ndarray((rows, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(tile, tile, best, imm=-1e30, dst_idx=where)  # in place, as the kernels do
        nl.store(values[:, r * 8:(r + 1) * 8], value=best)
        nl.store(indices[:, r * 8:(r + 1) * 8], value=where)
    return values, indices


@nki.jit
def match_replace8(data, vals, imm):
    replaced = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    indices = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    where = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=out, data=nl.load(data), vals=nl.load(vals), imm=imm, dst_idx=where)
    nl.store(replaced, value=out)
    nl.store(indices, value=where)
    return replaced, indices


@nki.jit
def select_reduce_number(x, keep):
    """x where keep is nonzero, else -100, and each row's maximum of that (select_reduce)."""
    picked = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    best = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    top = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=out, predicate=nl.load(keep), on_true=nl.load(x), on_false=-100.0, reduce_res=top,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)
    nl.store(picked, value=out)
    nl.store(best, value=top)
    return picked, best


@nki.jit
def band_of_columns(x, low, high):
    """range_select: x[p, j] where low[p] <= j + 4 < high[p], else -30000, and each row's maximum."""
    picked = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    best = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    top = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=out, on_true_tile=nl.load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=nl.load(low), bound1=nl.load(high), reduce_cmd=nisa.reduce_cmd.reset_reduce,
                      reduce_res=top, reduce_op=nl.maximum, range_start=4.0, on_false_value=-30000.0)
    nl.store(picked, value=out)
    nl.store(best, value=top)
    return picked, best


@nki.jit
def cumulative(x, op0, imm0, op1, rounds):
    """tensor_scalar_cumulative over `rounds` column blocks of x: the first resets the accumulator, the
    rest continue from the engine's registers (reduce_cmd=reduce)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    width = x.shape[1] // rounds
    tile = nl.load(x)
    res = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for r in range(rounds):
        part = slice(r * width, (r + 1) * width)
        nisa.tensor_scalar_cumulative(res[:, part], tile[:, part], op0, op1, imm0,
                                      reduce_cmd=nisa.reduce_cmd.reset_reduce if r == 0 else nisa.reduce_cmd.reduce)
    nl.store(out, value=res)
    return out


@nki.jit
def cumulative_from(x, start):
    """tensor_scalar_cumulative with reduce_cmd=load_reduce: a running sum of 2 * x from `start`."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    res = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(res, nl.load(x), nl.multiply, nl.add, 2.0, imm1=start,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce)
    nl.store(out, value=res)
    return out


@beta.jit
def causal_row_beta(x, row_end):
    """The beta API: x[p, j] where j <= row_end[p] (and j >= 0), else fp32's lowest."""
    picked = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    zero = bnl.zeros((x.shape[0], 1), dtype=bnl.float32, buffer=bnl.sbuf)
    bnl.store(picked, value=bisa.range_select(on_true_tile=bnl.load(x), comp_op0=bnl.greater_equal,
                                              comp_op1=bnl.less_equal, bound0=zero, bound1=bnl.load(row_end)))
    return picked


@beta.jit
def select_reduce_row_fill(x, drop, fill):
    """The beta API: x where drop is zero (reverse_pred), else the row's own fill value."""
    picked = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.sbuf)
    bisa.select_reduce(dst=out, predicate=bnl.load(drop), on_true=bnl.load(x), on_false=bnl.load(fill),
                       reverse_pred=True)
    bnl.store(picked, value=out)
    return picked


@beta.jit
def match_replace8_beta(data, vals):
    replaced = bnl.ndarray(data.shape, dtype=data.dtype, buffer=bnl.shared_hbm)
    bnl.store(replaced, value=bisa.nc_match_replace8(data=bnl.load(data), vals=bnl.load(vals), imm=0.0))
    return replaced


@nki.jit
def scaled_residual(x, residual, shift):
    """(x * 0.5) + residual, and shift[p] - x[p] minus residual: scalar_tensor_tensor both ways round."""
    first = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    second = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a, r, s = nl.load(x), nl.load(residual), nl.load(shift)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(t, a, nl.multiply, 0.5, nl.add, r)
    nl.store(first, value=t)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(u, data=a, op0=nl.subtract, operand0=s, reverse0=True, op1=nl.subtract, operand1=r)
    nl.store(second, value=u)
    return first, second


@beta.jit
def top8_beta(x):
    """The beta API's max8 and nc_find_index8, which return their tiles."""
    values = bnl.ndarray((x.shape[0], 8), dtype=x.dtype, buffer=bnl.shared_hbm)
    indices = bnl.ndarray((x.shape[0], 8), dtype=bnl.uint32, buffer=bnl.shared_hbm)
    tile = bnl.load(x)
    best = bisa.max8(src=tile)
    bnl.store(values, value=best)
    bnl.store(indices, value=bisa.nc_find_index8(data=tile, vals=best))
    return values, indices


@nki.jit
def bn_stats_raw(x):
    out = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(stats, nl.load(x))
    nl.store(out, value=stats)
    return out


@nki.jit
def partition_sum_and_max(x):
    """Sums and maxima over the partitions of x [partitions, F], as rows 0 and 1 of a [2, F] result."""
    features = x.shape[1]
    out = nl.ndarray((2, features), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    total = nl.ndarray((1, features), dtype=x.dtype, buffer=nl.sbuf)
    largest = nl.ndarray((1, features), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(total, nl.add, tile)
    nisa.tensor_partition_reduce(largest, nl.maximum, tile)
    nl.store(out[0:1, :], value=total)
    nl.store(out[1:2, :], value=largest)
    return out


@beta.jit
def partition_sum_beta(x):
    """The beta API: the instruction returns its one-partition result (AWS's example passes np.add)."""
    import numpy as np

    out = bnl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=bisa.tensor_partition_reduce(np.add, bnl.load(x)))
    return out


@nki.jit
def causal_mask(scores):
    """scores [queries, keys] with every key after its query replaced by -9984: affine_select keeps an element
    where query index - key index >= 0."""
    keys = scores.shape[1]
    out = nl.ndarray(scores.shape, dtype=scores.dtype, buffer=nl.shared_hbm)
    tile = nl.load(scores)
    masked = nl.ndarray(scores.shape, dtype=scores.dtype, buffer=nl.sbuf)
    nisa.affine_select(dst=masked, pattern=[[-1, keys]], offset=0, channel_multiplier=1, on_true_tile=tile,
                       on_false_value=-9984.0, cmp_op=nl.greater_equal)
    nl.store(out, value=masked)
    return out


@beta.jit
def causal_mask_beta(scores):
    """The beta API's affine_select: the predicate is a comparison of index expressions, key <= query."""
    queries, keys = scores.shape
    out = bnl.ndarray(scores.shape, dtype=scores.dtype, buffer=bnl.shared_hbm)
    i_q, i_k = bnl.arange(queries)[:, None], bnl.arange(keys)[None, :]
    masked = bisa.affine_select(i_k <= i_q, bnl.load(scores), -9984.0)
    bnl.store(out, value=masked)
    return out


@beta.jit
def affine_select_beta(x, offset):
    """x [P, 4, 8] kept where 2 * p - 8 * a + b + offset > 0 (several variables on one side, over an mgrid)."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    i_p, i_a, i_b = bnl.mgrid[0:x.shape[0], 0:4, 0:8]
    bnl.store(out, value=bisa.affine_select(2 * i_p - 8 * i_a + i_b + offset > 0, bnl.load(x), 0.5))
    return out


@nki.jit
def affine_select_grid(x, offset, multiplier):
    """x [P, 4, 8] kept where offset + p * multiplier + 8 * a - b == 0 (a pattern over two free axes)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    picked = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.affine_select(picked, [[8, 4], [-1, 8]], offset, multiplier, tile, 0.5)
    nl.store(out, value=picked)
    return out


@nki.jit(platform_target="trn3")
def softmax_numerators(x):
    """exp(x - row max) and its row sums with nisa.exponential (NeuronCore-v4): the max a [P, 1] tile, the
    sums from the Vector engine's registers."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    row_max = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(row_max, nl.maximum, tile, axis=1, keepdims=True)
    numerators = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    total = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(numerators, tile, max_value=row_max, reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nl.store(out, value=numerators)
    nl.store(sums, value=total)
    return out, sums


@nki.jit(platform_target="trn3")
def exponential_sums_loaded(x, shift, start):
    """Row sums of exp(x - shift) over two column halves, the registers first loaded with `start`
    (reduce_cmd.load_reduce), then accumulating (reduce_cmd.reduce)."""
    rows, cols = x.shape
    sums = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    half = cols // 2
    total = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    first = nl.load(x[:, :half])
    second = nl.load(x[:, half:])
    scratch = nl.ndarray((rows, half), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(scratch, first, max_value=shift, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=start)
    nisa.exponential(scratch, second, max_value=shift, reduce_res=total, reduce_cmd=nisa.reduce_cmd.reduce)
    nl.store(sums, value=total)
    return sums


@nki.jit
def copy_where(dst_init, src, predicate):
    """dst_init where predicate is 0, src elsewhere (nisa.tensor_copy_predicated with a tile)."""
    out = nl.ndarray(dst_init.shape, dtype=dst_init.dtype, buffer=nl.shared_hbm)
    tile = nl.load(dst_init)
    nisa.tensor_copy_predicated(tile, nl.load(src), nl.load(predicate))
    nl.store(out, value=tile)
    return out


@nki.jit
def fill_where_zero(dst_init, predicate, value):
    """dst_init where predicate is nonzero, `value` elsewhere (a number, reverse_pred=True)."""
    out = nl.ndarray(dst_init.shape, dtype=dst_init.dtype, buffer=nl.shared_hbm)
    tile = nl.load(dst_init)
    nisa.tensor_copy_predicated(tile, value, nl.load(predicate), reverse_pred=True)
    nl.store(out, value=tile)
    return out


@nki.jit
def nonzero_positions(x, index_offset, padding):
    """nonzero_with_count over each partition of x (free axes flattened); dst starts as 7 everywhere, so
    the partitions the GpSimd cores do not handle show that they kept it."""
    found = nl.ndarray((x.shape[0], x.shape[1] * x.shape[2] + 1), dtype=nl.int32, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    out = nl.ndarray((x.shape[0], 1, x.shape[1] * x.shape[2] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(out, 7)
    nisa.nonzero_with_count(dst=out, src=tile, index_offset=index_offset, padding_val=padding)
    nisa.dma_copy(dst=found, src=out.reshape((x.shape[0], x.shape[1] * x.shape[2] + 1)))
    return found


@nki.jit
def shuffle_partitions(x, shuffle_mask):
    """nc_stream_shuffle of a tile onto itself, every quadrant by the same mask."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nisa.nc_stream_shuffle(src=tile, dst=tile, shuffle_mask=shuffle_mask)
    nl.store(out, value=tile)
    return out


@beta.jit
def shuffle_into_zeros_beta(x, shuffle_mask):
    """The beta API: nc_stream_shuffle into another tile, which keeps its zeros where the mask says 255."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    moved = bnl.zeros(x.shape, dtype=x.dtype, buffer=bnl.sbuf)
    bisa.nc_stream_shuffle(bnl.load(x), moved, shuffle_mask)
    bnl.store(out, value=moved)
    return out


@nki.jit
def column_nonzeros(x):
    """Row positions of each of x's 8 columns' nonzeros ([128, 8] in, [8, 129] out: positions, -1 padding,
    count), the way a GpSimd kernel lays it out: column c moved to free position 16c, a transpose puts it
    on partition 16c, where one GpSimd core finds its nonzeros; a shuffle brings the odd cores' results
    (partitions 16, 48, ...) to the first partition of each quadrant."""
    found = nl.ndarray((8, x.shape[0] + 1), dtype=nl.int32, buffer=nl.shared_hbm)
    columns = nl.load(x)
    spread = nl.ndarray((x.shape[0], P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(spread, 0.0)
    for c in nl.static_range(8):
        nisa.tensor_copy(dst=spread[:, 16 * c:16 * c + 1], src=columns[:, c:c + 1])
    flipped = nl.ndarray((P, x.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(flipped, spread)
    rows = nl.ndarray((P, x.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=rows, src=flipped)
    result = nl.ndarray((P, x.shape[0] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=result, src=rows, index_offset=0, padding_val=-1)
    for q in nl.static_range(4):
        nisa.dma_copy(dst=found[2 * q:2 * q + 1, :], src=result[32 * q:32 * q + 1, :])
    nisa.nc_stream_shuffle(src=result, dst=result, shuffle_mask=[16] + [255] * 31)
    for q in nl.static_range(4):
        nisa.dma_copy(dst=found[2 * q + 1:2 * q + 2, :], src=result[32 * q:32 * q + 1, :])
    return found


@nki.jit
def identity_and_sigmoid_gelu(x):
    """nl.shared_identity_matrix as a transpose's moving tile, then nl.gelu_apprx_sigmoid of the result."""
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    identity = nl.shared_identity_matrix(x.shape[0], dtype=nl.float32)
    flipped = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=flipped, stationary=nl.load(x), moving=identity)
    nl.store(out, value=nl.gelu_apprx_sigmoid(flipped))
    return out


@nki.jit
def gather_in_partitions(data, indices):
    """nc_n_gather: each partition's elements of data (free axes flattened) picked by that partition's indices."""
    out = nl.ndarray((data.shape[0], indices.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
    picked = nl.ndarray(out.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=picked, data=nl.load(data), indices=nl.load(indices))
    nl.store(out, value=picked)
    return out


@nki.jit
def segment_bounds(ids, out_dtype):
    """sequence_bounds of a [1, n] tile of segment ids: [1, 2, n], the starts then the ends."""
    bounds = nl.ndarray((1, 2, ids.shape[1]), dtype=out_dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(ids.shape, dtype=ids.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=ids)
    out = nl.ndarray((1, 2, ids.shape[1]), dtype=out_dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=out, segment_ids=tile)
    nisa.dma_copy(dst=bounds, src=out)
    return bounds


@beta.jit
def segment_bounds_beta(ids):
    """The beta API: sequence_bounds returns its [1, 2, n] tile in the ids' dtype."""
    bounds = bnl.ndarray((1, 2, ids.shape[1]), dtype=ids.dtype, buffer=bnl.shared_hbm)
    bnl.store(bounds, value=bisa.sequence_bounds(segment_ids=bnl.load(ids)))
    return bounds


def _gathered(index, per_index, valid):
    return (16 * index.shape[1] if valid is None else valid), per_index


@nki.jit
def gather_locally(data, index, per_index, valid):
    """local_gather of data [P, ...] by uint16 indices [P, k] into [P, indices x per_index]."""
    indices, n = _gathered(index, per_index, valid)
    out = nl.ndarray((data.shape[0], indices * n), dtype=data.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=data)
    idx = nl.ndarray(index.shape, dtype=index.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=index)
    got = nl.ndarray((data.shape[0], indices * n), dtype=data.dtype, buffer=nl.sbuf)
    nisa.local_gather(dst=got, src_buffer=src, index=idx, num_elem_per_idx=per_index, num_valid_indices=valid)
    nisa.dma_copy(dst=out, src=got)
    return out


@beta.jit
def gather_locally_beta(data, index, per_index, valid):
    """The beta API: local_gather returns a [P, indices, per_index] tile."""
    indices, n = _gathered(index, per_index, valid)
    out = bnl.ndarray((data.shape[0], indices, n), dtype=data.dtype, buffer=bnl.shared_hbm)
    bnl.store(out, value=bisa.local_gather(bnl.load(data), bnl.load(index), per_index, valid))
    return out
