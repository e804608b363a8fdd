"""Kernels written for these tests with tensor indirection (NkiTensor.indirect, NeuronCore-v4), in the
forms AWS's tensor-indirection tutorial and NKI library kernels use it."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit(platform_target="trn3")
def gather_columns_as_the_tutorial(data, index):
    """out = data[:, index[0]]: the [1, n] index reshaped into 16-row columns, transposed on the Vector
    engine and repeated for each group of 16 partitions (AWS's snake order), then one tensor_copy."""
    rows, n = data.shape[0], index.shape[1]
    out = nl.ndarray((rows, n), dtype=data.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(tile, data)
    flat = nl.ndarray((1, n), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.dma_copy(flat, index)
    sixteens = nl.ndarray((n // 16, 16), dtype=nl.uint16, buffer=nl.sbuf)
    for k in range(n // 16):
        nisa.dma_copy(sixteens[k:k + 1, :], flat[0:1, 16 * k:16 * k + 16])
    column_major = nl.ndarray((16, n // 16), dtype=nl.uint16, buffer=nl.sbuf)
    nisa.nc_transpose(column_major, sixteens, engine=nisa.vector_engine)
    offsets = nl.ndarray((rows, n // 16), dtype=nl.uint16, buffer=nl.sbuf)
    for g in range(rows // 16):
        nisa.dma_copy(offsets[16 * g:16 * g + 16, :], column_major)
    gathered = nl.ndarray((rows, n), dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(gathered, tile.indirect(offsets, num_elem=n), engine=nisa.vector_engine)
    nisa.dma_copy(out, gathered)
    return out


@nki.jit(platform_target="trn3")
def gather_columns(data, offsets, n: int, engine: str):
    """tensor_copy of the n columns the ready-made index tile picks, on `engine`."""
    out = nl.ndarray((data.shape[0], n), dtype=data.dtype, buffer=nl.shared_hbm)
    tile, index = nl.load(data), nl.load(offsets)
    gathered = nl.ndarray((data.shape[0], n), dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(gathered, tile.indirect(index, num_elem=n), engine=engine)
    nl.store(out, gathered)
    return out


@nki.jit(platform_target="trn3")
def scatter_columns(values, offsets, columns: int, fill: float):
    """A [P, columns] tile set to `fill`, then values written into the columns the index picks (Scalar
    engine, an SBUF dst)."""
    rows, n = values.shape
    out = nl.ndarray((rows, columns), dtype=values.dtype, buffer=nl.shared_hbm)
    target = nl.ndarray((rows, columns), dtype=values.dtype, buffer=nl.sbuf)
    nisa.memset(target, fill)
    src, index = nl.load(values), nl.load(offsets)
    nisa.tensor_copy(target.indirect(index, num_elem=n), src, engine=nisa.scalar_engine)
    nl.store(out, target)
    return out


@nki.jit(platform_target="trn3")
def gathered_arithmetic(a, b, offsets, n: int):
    """Gathered columns of `a` through four instructions: + b (tensor_tensor), exp (activation), * 2 + 1
    (tensor_scalar) and the row sums (tensor_reduce)."""
    rows = a.shape[0]
    sums_out = nl.ndarray((rows, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    added_out = nl.ndarray((rows, n), dtype=nl.float32, buffer=nl.shared_hbm)
    tile, other, index = nl.load(a), nl.load(b), nl.load(offsets)
    added = nl.ndarray((rows, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(added, tile.indirect(index, num_elem=n), other, op=nl.add)
    exps = nl.ndarray((rows, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(exps, op=nl.exp, data=tile.indirect(index, num_elem=n))
    scaled = nl.ndarray((rows, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(scaled, tile.indirect(index, num_elem=n), nl.multiply, 2.0, op1=nl.add, operand1=1.0)
    sums = nl.ndarray((rows, 3), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(sums[:, 0:1], nl.add, tile.indirect(index, num_elem=n), axis=1, keepdims=True)
    nisa.tensor_reduce(sums[:, 1:2], nl.add, exps, axis=1, keepdims=True)
    nisa.tensor_reduce(sums[:, 2:3], nl.add, scaled, axis=1, keepdims=True)
    nl.store(sums_out, sums)
    nl.store(added_out, added)
    return added_out, sums_out


@nki.jit(platform_target="trn3")
def matmul_of_gathered_columns(stationary, moving, moving_offsets, dst_offsets, n: int, columns: int):
    """nc_matmul with its moving tile gathered (the Tensor engine's groups of 32 partitions) and its
    result scattered into `columns` PSUM columns set to zero first."""
    k, m = stationary.shape
    out = nl.ndarray((m, columns), dtype=nl.float32, buffer=nl.shared_hbm)
    s, mv = nl.load(stationary), nl.load(moving)
    moving_index, dst_index = nl.load(moving_offsets), nl.load(dst_offsets)
    result = nl.ndarray((m, columns), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(result, 0.0)
    nisa.nc_matmul(result.indirect(dst_index, num_elem=n), s, mv.indirect(moving_index, num_elem=n))
    copied = nl.ndarray((m, columns), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(copied, result)
    nl.store(out, copied)
    return out


@nki.jit(platform_target="trn3")
def misuse(data, offsets, case: str):
    """One misuse of an .indirect() view per case (the tests expect each refused)."""
    rows, n = data.shape[0], 4
    out = nl.ndarray((rows, n), dtype=data.dtype, buffer=nl.shared_hbm)
    tile, index = nl.load(data), nl.load(offsets)
    dense = nl.ndarray((rows, n), dtype=data.dtype, buffer=nl.sbuf)
    nisa.memset(dense, 0.0)
    if case == "store":
        nl.store(out, tile.indirect(index, num_elem=n))
        return out
    if case == "data2":
        nisa.tensor_tensor(dense, dense, tile.indirect(index, num_elem=n), op=nl.add)
    elif case == "gpsimd_copy":
        nisa.tensor_copy(dense, tile.indirect(index, num_elem=n), engine=nisa.gpsimd_engine)
    elif case == "int32_index":
        wide = nl.ndarray(offsets.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(wide, index)
        nisa.tensor_copy(dense, tile.indirect(wide, num_elem=n))
    elif case == "hbm_data":
        nisa.tensor_copy(dense, data.indirect(index, num_elem=n))
    elif case == "fp32_matmul":
        result = nl.ndarray((rows, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(result, tile, tile.indirect(index, num_elem=n))
    elif case == "too_few_index_columns":
        count = 16 * offsets.shape[1] + 1
        wide = nl.ndarray((rows, count), dtype=data.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(wide, tile.indirect(index, num_elem=count))
        nisa.tensor_copy(dense, wide[:, 0:n])
    elif case == "memset":
        nisa.memset(tile.indirect(index, num_elem=n), 1.0)
    nl.store(out, dense)
    return out


@nki.jit
def gather_on_trn2(data, offsets):
    tile, index = nl.load(data), nl.load(offsets)
    out = nl.ndarray((data.shape[0], 4), dtype=data.dtype, buffer=nl.shared_hbm)
    dense = nl.ndarray((data.shape[0], 4), dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dense, tile.indirect(index, num_elem=4))
    nl.store(out, dense)
    return out
