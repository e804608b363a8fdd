"""Kernels that break one rule of the NeuronCore each (tests/test_nki.py checks the error)."""
import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as beta
import neuronxcc.nki.isa as bisa
import neuronxcc.nki.language as bnl


@nki.jit
def too_many_partitions(x):
    return nl.load(x)  # x has 256 rows: a 256-partition tile


@nki.jit
def psum_too_wide():
    nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)


@nki.jit
def moving_too_wide(a, b):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 1024), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a), nl.load(b))
    return out


@nki.jit
def engine_reads_hbm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=tile, src=x)
    nl.store(out, value=tile)
    return out


@nki.jit
def carried_dependency(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.load(x)
    for _ in nl.affine_range(3):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=acc, op=nl.multiply)  # each iteration reads the last
    nl.store(out, value=acc)
    return out


@nki.jit
def slice_out_of_bounds(x):
    return nl.load(x[0:128, 64:192])  # x has 128 columns


@nki.jit
def sbuf_overflow(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = [nl.zeros((128, 4096), dtype=nl.float32) for _ in range(15)]  # 15 x 16 KiB live per partition
    total = tiles[0]
    for t in tiles[1:]:
        nisa.tensor_tensor(dst=total, data1=total, data2=t, op=nl.add)
    nl.store(out, value=total[:, 0:x.shape[1]])
    return out


@nki.jit
def integer_matmul(a, b):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a), nl.load(b))
    return out


@nki.jit
def read_before_write(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    never_written = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nl.store(out, value=nl.add(nl.load(x), never_written))
    return out


@nki.jit
def nine_psum_banks(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    banks = [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]  # 8 banks per partition
    total = nl.copy(banks[0])
    for bank in banks[1:]:
        total = nl.add(total, bank)
    nl.store(out, value=total[:, 0:x.shape[1]])
    return out


@nki.jit
def gpsimd_reads_psum(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(x.shape, dtype=nl.float32, buffer=nl.psum)
    tile = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=tile, src=acc, engine=nisa.engine.gpsimd)
    nl.store(out, value=tile)
    return out


@nki.jit
def bn_stats_too_wide(x):
    stats = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(stats, nl.load(x))  # x has 600 columns: bn_stats takes at most 512


@nki.jit
def find_index8_into_floats(x):
    where = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    tile = nl.load(x)
    nisa.nc_find_index8(where, tile, tile[:, 0:8])


@nki.jit
def match_replace8_with_four_vals(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    tile = nl.load(x)
    nisa.nc_match_replace8(out, tile, tile[:, 0:4], imm=0.0)


@nki.jit
def select_reduce_with_a_uint32_predicate(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    keep = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(keep, 1)
    nisa.select_reduce(out, keep, nl.load(x), 0.0)


@nki.jit
def range_select_with_an_add(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    bound = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(bound, 3.0)
    nisa.range_select(out, nl.load(x), nl.add, nl.less, bound, bound)


@nki.jit(platform_target="trn1")
def range_select_on_trn1(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    bound = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(bound, 3.0)
    nisa.range_select(out, nl.load(x), nl.greater_equal, nl.less, bound, bound)


@nki.jit
def cumulative_division(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(out, nl.load(x), nl.add, nl.divide, 1.0)


@nki.jit
def partition_reduce_into_two_partitions(x):
    total = nl.ndarray((2, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(total, nl.add, nl.load(x))  # the result is one partition


@nki.jit
def affine_select_from_psum(x):
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.memset(acc, 1.0)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(out, [[1, x.shape[1]]], 0, 0, acc, 0.0)  # GpSimd reads SBUF only


@beta.jit
def predicate_as_mask(x):
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    i_p, i_f = bnl.arange(x.shape[0])[:, None], bnl.arange(x.shape[1])[None, :]
    bnl.store(out[i_p, i_f], value=bnl.load(x[i_p, i_f]), mask=(i_f <= i_p))  # masks bound one variable each
    return out


@beta.jit
def combined_predicates(x):
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    i_p, i_f = bnl.arange(x.shape[0])[:, None], bnl.arange(x.shape[1])[None, :]
    bnl.store(out, value=bisa.affine_select((i_f <= i_p) & (i_f > 2), bnl.load(x), 0.0))
    return out


@nki.jit(platform_target="trn2")
def exponential_on_trn2(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nisa.exponential(tile, tile)
    nl.store(out, value=tile)
    return out


@nki.jit
def float_predicate(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nisa.tensor_copy_predicated(tile, 1.0, tile)
    nl.store(out, value=tile)
    return out


@nki.jit
def float_into_integers(x, predicate):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    nisa.tensor_copy_predicated(tile, 1.5, nl.load(predicate))
    nl.store(out, value=tile)
    return out


@nki.jit(platform_target="trn1")
def nonzero_with_count_on_trn1(x):
    tile = nl.load(x)
    out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(out, tile)


@nki.jit
def nonzero_with_count_into_floats(x):
    tile = nl.load(x)
    out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nonzero_with_count(out, tile)


@nki.jit
def nonzero_with_count_without_the_count_slot(x):
    tile = nl.load(x)
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(out, tile)


@nki.jit
def nonzero_with_count_from_partition_8(x):
    tile = nl.load(x)
    out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(out[8:24], tile[8:24])


@nki.jit
def shuffle_from_past_the_tile(x):
    tile = nl.load(x)
    nisa.nc_stream_shuffle(tile, tile, [20] + [255] * 31)


@nki.jit
def shuffle_with_a_short_mask(x):
    tile = nl.load(x)
    nisa.nc_stream_shuffle(tile, tile, [0, 1, 2])


@nki.jit
def shuffle_into_another_dtype(x):
    tile = nl.load(x)
    other = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(other, tile, list(range(32)))


@nki.jit
def gather_with_int32_indices(x):
    tile = nl.load(x)
    indices = nl.ndarray((x.shape[0], 4), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(indices, 0)
    out = nl.ndarray((x.shape[0], 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(out, tile, indices)


@nki.jit
def sequence_bounds_over_two_partitions(x):
    tile = nl.load(x[0:2])
    out = nl.ndarray((2, 2, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=out, segment_ids=tile)


@nki.jit
def sequence_bounds_without_the_ends(x):
    tile = nl.load(x[0:1])
    out = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=out, segment_ids=tile)


def _local_gather_into(x, index_dtype, per_index, out_elements, partitions=None):
    rows = partitions or x.shape[0]
    tile = nl.load(x[0:rows])
    index = nl.ndarray((rows, 2), dtype=index_dtype, buffer=nl.sbuf)
    nisa.memset(index, 0)
    out = nl.ndarray((rows, out_elements), dtype=x.dtype, buffer=nl.sbuf)
    nisa.local_gather(out, tile, index, num_elem_per_idx=per_index)


@nki.jit
def local_gather_with_int32_indices(x):
    _local_gather_into(x, nl.int32, 1, 32)


@nki.jit
def local_gather_three_elements_per_index(x):
    _local_gather_into(x, nl.uint16, 3, 96)


@nki.jit
def local_gather_over_eight_partitions(x):
    _local_gather_into(x, nl.uint16, 1, 32, partitions=8)


@nki.jit
def local_gather_into_a_short_dst(x):
    _local_gather_into(x, nl.uint16, 2, 32)
