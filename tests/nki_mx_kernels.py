"""Microscaling (MX) kernels for NeuronCore-v4, written for these tests in the
forms AWS's mxfp-matmul tutorial teaches: packed data read from HBM through
`.ap(dtype=...)`, scales spread over the SBUF quadrants by DMA, quantize_mx on
chip, nc_matmul_mx into PSUM."""
import nki
import nki.isa as nisa
import nki.language as nl

QUADRANT = 32  # SBUF partitions per quadrant
GROUP = 8      # partitions that share a scale


def spread_scales(scales_hbm, partitions):
    """Contiguous [P / 8, F] scales into the SBUF tile nc_matmul_mx reads: above 32 partitions, the scales of
    quadrant q go to its first four partitions (32q..32q+3)."""
    rows, columns = scales_hbm.shape
    if partitions <= QUADRANT:
        tile = nl.ndarray((rows, columns), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=scales_hbm)
        return tile
    tile = nl.ndarray((partitions, columns), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=tile, value=0)
    per_quadrant = QUADRANT // GROUP
    for q in range(rows // per_quadrant):
        nisa.dma_copy(dst=tile.ap(pattern=[[columns, per_quadrant], [1, columns]], offset=q * QUADRANT * columns),
                      src=scales_hbm.ap(pattern=[[columns, per_quadrant], [1, columns]],
                                        offset=q * per_quadrant * columns))
    return tile


def gather_scales(out_hbm, tile, partitions):
    """The inverse of spread_scales: the scales a quantize_mx wrote, contiguous in HBM."""
    rows, columns = out_hbm.shape
    if partitions <= QUADRANT:
        nisa.dma_copy(dst=out_hbm, src=tile)
        return
    per_quadrant = QUADRANT // GROUP
    for q in range(rows // per_quadrant):
        nisa.dma_copy(dst=out_hbm.ap(pattern=[[columns, per_quadrant], [1, columns]],
                                     offset=q * per_quadrant * columns),
                      src=tile.ap(pattern=[[columns, per_quadrant], [1, columns]], offset=q * QUADRANT * columns))


def scale_tile(partitions, columns):
    return nl.ndarray((partitions if partitions > QUADRANT else partitions // GROUP, columns), dtype=nl.uint8,
                      buffer=nl.sbuf)


def load_packed(data_hbm, mx_dtype, k0, partitions, columns):
    """Rows k0.. of an HBM tensor of packed elements (held as unsigned integers), read as mx_dtype."""
    tile = nl.ndarray((partitions, columns), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=data_hbm.ap(dtype=mx_dtype, pattern=[[columns, partitions], [1, columns]],
                                            offset=k0 * columns))
    return tile


@nki.jit(platform_target="trn3")
def matmul_mx(stationary, stationary_scales, moving, moving_scales, stationary_dtype, moving_dtype, tiles,
              psum_dtype=nl.float32):
    """[M, N] = the sum over `tiles` contraction tiles of K partitions of stationary[K, M].T @ moving[K, N],
    packed MX data with contiguous [K / 8, F] scales per tile, accumulated in one PSUM tile."""
    K = stationary_scales.shape[0] * GROUP // tiles
    M, N = stationary_scales.shape[1], moving_scales.shape[1]
    result = nl.ndarray((M, N), dtype=psum_dtype, buffer=nl.psum)
    for t in range(tiles):
        s = load_packed(stationary, stationary_dtype, t * K, K, M)
        m = load_packed(moving, moving_dtype, t * K, K, N)
        rows = slice(t * K // GROUP, (t + 1) * K // GROUP)
        nisa.nc_matmul_mx(dst=result, stationary=s, moving=m,
                          stationary_scale=spread_scales(stationary_scales[rows, :], K),
                          moving_scale=spread_scales(moving_scales[rows, :], K))
    out_tile = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_tile, src=result)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_tile)
    return out


@nki.jit(platform_target="trn3")
def quantize_mx(x, mx_dtype):
    """x [P, F] (bf16/fp16) quantized on chip: the packed data [P, F / 4] and contiguous scales [P / 8, F / 4]."""
    P, F = x.shape
    src = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((P, F // 4), dtype=mx_dtype, buffer=nl.sbuf)
    scales = scale_tile(P, F // 4)
    nisa.quantize_mx(dst=data, src=src, dst_scale=scales)
    data_out = nl.ndarray((P, F // 4), dtype=mx_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=data_out, src=data)
    scales_out = nl.ndarray((P // GROUP, F // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    gather_scales(scales_out, scales, P)
    return data_out, scales_out


@nki.jit(platform_target="trn3")
def quantized_product(a, b, mx_dtype):
    """a[K, M] and b[K, N] (bf16), interleaved and quantized on chip, multiplied with nc_matmul_mx: a.T @ b.
    The contraction axis becomes K / 4 partitions of 4 values each: value j of partition k is row j * K / 4 + k,
    gathered by a strided tensor_copy."""
    K, M = a.shape
    N = b.shape[1]
    k = K // 4
    products = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    quantized = []
    for operand, F in ((a, M), (b, N)):
        blocks = nl.ndarray((k, 4, F), dtype=operand.dtype, buffer=nl.sbuf)  # block j of rows in partition k
        nisa.dma_copy(dst=blocks, src=operand.ap(pattern=[[F, k], [k * F, 4], [1, F]], offset=0))
        interleaved = nl.ndarray((k, F, 4), dtype=operand.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=interleaved, src=blocks.ap(pattern=[[4 * F, k], [1, F], [F, 4]], offset=0))
        data = nl.ndarray((k, F), dtype=mx_dtype, buffer=nl.sbuf)
        scales = scale_tile(k, F)
        nisa.quantize_mx(dst=data, src=interleaved.reshape((k, 4 * F)), dst_scale=scales)
        quantized.append((data, scales))
    (s, s_scales), (m, m_scales) = quantized
    nisa.nc_matmul_mx(dst=products, stationary=s, moving=m, stationary_scale=s_scales, moving_scale=m_scales)
    out_tile = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_tile, src=products)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_tile)
    return out


# Kernels that break a rule of the MX instructions.

@nki.jit  # the topology's platform: trn2 unless told otherwise
def matmul_mx_on_trn2(data, scales):
    tile = load_packed(data, nl.float8_e5m2_x4, 0, 32, 8)
    scale = spread_scales(scales, 32)
    result = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=result, stationary=tile, moving=tile, stationary_scale=scale, moving_scale=scale)
    return None


def _loaded(x):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    return src


@nki.jit(platform_target="trn3")
def quantize_mx_of_32_partitions(x, mx_dtype):
    """quantize_mx of x [32, F] into mx_dtype: refused for fp4 targets and for fp32 sources."""
    data = nl.ndarray((32, x.shape[1] // 4), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.quantize_mx(dst=data, src=_loaded(x), dst_scale=scale_tile(32, x.shape[1] // 4))
    return None


@nki.jit(platform_target="trn3")
def quantize_mx_with_compact_scales_of_64_partitions(x):
    data = nl.ndarray((64, x.shape[1] // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scales = nl.ndarray((8, x.shape[1] // 4), dtype=nl.uint8, buffer=nl.sbuf)  # needs 36 partitions
    nisa.quantize_mx(dst=data, src=_loaded(x), dst_scale=scales)
    return None


@nki.jit(platform_target="trn3")
def add_packed_values(data, scales):
    tile = load_packed(data, nl.float8_e5m2_x4, 0, 32, 8)
    twice = nl.ndarray((32, 8), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=twice, data1=tile, data2=tile, op=nl.add)
    return None


@nki.jit(platform_target="trn3")
def matmul_mx_over_48_partitions(data, scales):
    tile = load_packed(data, nl.float8_e5m2_x4, 0, 48, 8)
    scale = nl.ndarray((48, 8), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=scale, value=127)
    result = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=result, stationary=tile, moving=tile, stationary_scale=scale, moving_scale=scale)
    return None


@nki.jit(platform_target="trn3")
def matmul_mx_from_sbuf_words(stationary, stationary_scales, moving, moving_scales):
    """As matmul_mx (one tile, e5m2), the packed data loaded into SBUF as uint32 words and read there as
    float8_e5m2_x4 through .ap(dtype=...)."""
    K, M = stationary.shape
    N = moving.shape[1]
    views = []
    for data, F in ((stationary, M), (moving, N)):
        words = nl.ndarray((K, F), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=words, src=data)
        views.append(words.ap(dtype=nl.float8_e5m2_x4, pattern=[[F, K], [1, F]], offset=0))
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=result, stationary=views[0], moving=views[1],
                      stationary_scale=spread_scales(stationary_scales, K),
                      moving_scale=spread_scales(moving_scales, K))
    out_tile = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_tile, src=result)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_tile)
    return out
