"""Kernels written for these tests with AWS's tile grids (nl.tiles, nl.blocks, nl.alloc_tiles,
nl.empty_like of a grid), in the forms AWS's tile-grid tutorials use."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy_by_tiles(src, tile_rows: int, tile_columns: int):
    """Each tile through SBUF into the same tile of the output (remainder tiles included)."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles = nl.tiles(src, tile_shape=(tile_rows, tile_columns))
    out_tiles = nl.tiles(out, tile_shape=(tile_rows, tile_columns))
    for i in range(src_tiles.shape[0]):
        for j in range(src_tiles.shape[1]):
            on_chip = nl.ndarray(src_tiles[i, j].element_shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=on_chip.data, src=src_tiles[i, j].data)
            nisa.dma_copy(dst=out_tiles[i, j].data, src=on_chip.data)
    return out


@nki.jit
def scale_by_tiles(src, factor: float):
    """empty_like of a tile, scaled on the vector engine."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(128, 64)), nl.tiles(out, tile_shape=(128, 64))
    for i in nl.affine_range(src_tiles.shape[0]):
        for j in nl.affine_range(src_tiles.shape[1]):
            tile = nl.empty_like(src_tiles[i, j], buffer=nl.sbuf)
            nisa.dma_copy(tile.data, src_tiles[i, j].data)
            nisa.tensor_scalar(tile.data, tile.data, nl.multiply, factor)
            nisa.dma_copy(out_tiles[i, j].data, tile.data)
    return out


@nki.jit
def copy_by_tile_rows(src):
    """One DMA per row of tiles, each tile of the row then doubled in place through nl.tiles of the row."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(64, 32)), nl.tiles(out, tile_shape=(64, 32))
    for i in range(src_tiles.shape[0]):
        row = nl.empty_like(src_tiles[i], buffer=nl.sbuf)
        nisa.dma_copy(dst=row.data, src=src_tiles[i].data)
        row_tiles = nl.tiles(row)
        for j in range(row_tiles.shape[0]):
            nisa.tensor_scalar(row_tiles[j].data, row_tiles[j].data, nl.multiply, 2.0)
        nisa.dma_copy(dst=out_tiles[i].data, src=row.data)
    return out


@nki.jit
def copy_by_blocks(src):
    """Blocks of 2 x 2 tiles moved by one DMA each, through a block grid in SBUF of one row of tiles."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_blocks = nl.blocks(src, tile_shape=(32, 16), block_shape=(1, 2))
    out_blocks = nl.blocks(out, tile_shape=(32, 16), block_shape=(1, 2))
    for i in range(src_blocks.shape[0]):
        for j in range(src_blocks.shape[1]):
            block = nl.empty_like(src_blocks[i, j], buffer=nl.sbuf)
            nisa.dma_copy(dst=block.data, src=src_blocks[i, j].data)
            inner = nl.tiles(block)
            for t in range(inner.shape[1]):
                nisa.tensor_scalar(inner[0, t].data, inner[0, t].data, nl.add, float(t))
            nisa.dma_copy(dst=out_blocks[i, j].data, src=block.data)
    return out


@nki.jit
def transpose_by_tiles(src):
    """Each tile transposed by DMA into the swapped tile of the output."""
    rows, columns = src.shape
    out = nl.ndarray((columns, rows), dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(32, 32)), nl.tiles(out, tile_shape=(32, 32))
    for i in range(src_tiles.shape[0]):
        for j in range(src_tiles.shape[1]):
            flipped = nl.empty_like(src_tiles[i, j], buffer=nl.sbuf, transpose_axes=(1, 0))
            nisa.dma_transpose(dst=flipped.data, src=src_tiles[i, j].data)
            nisa.dma_copy(dst=out_tiles[j, i].data, src=flipped.data)
    return out


@nki.jit
def matmul_by_tiles(lhs_t, rhs):
    """lhs_t.T @ rhs, one [128, 512] output tile at a time, accumulated over K in PSUM."""
    out = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    lhs_tiles, rhs_tiles = nl.tiles(lhs_t, tile_shape=(128, 128)), nl.tiles(rhs, tile_shape=(128, 512))
    out_tiles = nl.tiles(out, tile_shape=(128, 512))
    for m in range(out_tiles.shape[0]):
        for n in range(out_tiles.shape[1]):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(lhs_tiles.shape[0]):
                lhs = nl.empty_like(lhs_tiles[k, m], buffer=nl.sbuf)
                rhs_tile = nl.empty_like(rhs_tiles[k, n], buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs.data, src=lhs_tiles[k, m].data)
                nisa.dma_copy(dst=rhs_tile.data, src=rhs_tiles[k, n].data)
                nisa.nc_matmul(dst=acc, stationary=lhs.data, moving=rhs_tile.data, accumulate=k > 0)
            result = nl.empty_like(out_tiles[m, n], buffer=nl.sbuf)
            nisa.tensor_copy(dst=result.data, src=acc)
            nisa.dma_copy(dst=out_tiles[m, n].data, src=result.data)
    return out


@nki.jit
def gather_rows_by_tiles(data, indices):
    """out[r] = data[indices[r, 0]], 128 index rows at a time (the last tile shorter)."""
    out = nl.ndarray((indices.shape[0], data.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
    data_tiles = nl.tiles(data, tile_shape=(128, 64))
    index_tiles = nl.tiles(indices, tile_shape=(128, 1))
    out_tiles = nl.tiles(out, tile_shape=(128, 64))
    for i in range(out_tiles.shape[0]):
        index_view = index_tiles[i, 0]
        index_sbuf = nl.empty_like(index_view.data, buffer=nl.sbuf)
        nisa.dma_copy(dst=index_sbuf, src=index_view.data)
        for j in range(out_tiles.shape[1]):
            rows = data_tiles[index_sbuf, j]
            on_chip = nl.empty_like(rows, buffer=nl.sbuf)
            nisa.dma_copy(dst=on_chip.data, src=rows.data)
            nisa.dma_copy(dst=out_tiles[i, j].data, src=on_chip.data)
    return out


@nki.jit
def tile_chosen_on_device(src, which):
    """The row of tiles whose index `which` ([1, 1] int32 in HBM) holds, read as the kernel runs."""
    out = nl.ndarray((32, src.shape[1]), dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles = nl.tiles(src, tile_shape=(32, 16))
    index = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=which)
    for j in range(src_tiles.shape[1]):
        tile = nl.empty_like(src_tiles[index, j], buffer=nl.sbuf)
        nisa.dma_copy(dst=tile.data, src=src_tiles[index, j].data)
        nisa.dma_copy(dst=nl.tiles(out, tile_shape=(32, 16))[0, j].data, src=tile.data)
    return out


@nki.jit
def batched_tiles(src):
    """A [B, M, N] tensor: the leading dim untiled, one slab per index."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(16, 32)), nl.tiles(out, tile_shape=(16, 32))
    for b in range(src_tiles.shape[0]):
        for i in range(src_tiles.shape[1]):
            for j in range(src_tiles.shape[2]):
                tile = nl.empty_like(src_tiles[b, i, j], buffer=nl.sbuf)
                nisa.dma_copy(dst=tile.data, src=src_tiles[b, i, j].data)
                nisa.tensor_scalar(tile.data, tile.data, nl.add, float(b))
                nisa.dma_copy(dst=out_tiles[b, i, j].data, src=tile.data)
    return out


@nki.jit
def sharded_columns(src, shards: int, interleaved: bool):
    """Each shard of the columns of tiles (nl.contiguous_indices / nl.interleaved_indices) gets its number."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(8, 1)), nl.tiles(out, tile_shape=(8, 1))
    pick = nl.interleaved_indices if interleaved else nl.contiguous_indices
    for shard in range(shards):
        columns = pick(src_tiles.shape[1], shard_id=shard, num_shards=shards)
        selection = src_tiles[0, columns]
        tile = nl.empty_like(selection, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile.data, src=selection.data)
        nisa.tensor_scalar(tile.data, tile.data, nl.add, float(shard))
        nisa.dma_copy(dst=out_tiles[0, columns].data, src=tile.data)
    return out


@nki.jit
def through_a_tall_on_chip_grid(src):
    """A [64, 40] tensor into an SBUF grid of [32, 16] tiles (two rows of tiles: stored side by side) a
    tile at a time, then out a row of tiles at a time."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    src_tiles, out_tiles = nl.tiles(src, tile_shape=(32, 16)), nl.tiles(out, tile_shape=(32, 16))
    grid = nl.alloc_tiles(tile_shape=(32, 16), element_shape=src.shape, buffer=nl.sbuf, dtype=src.dtype)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            nisa.dma_copy(dst=grid[i, j].data, src=src_tiles[i, j].data)
            nisa.tensor_scalar(grid[i, j].data, grid[i, j].data, nl.add, float(10 * i + j))
    for i in range(grid.shape[0]):
        nisa.dma_copy(dst=out_tiles[i].data, src=grid[i].data)
    return out


@nki.jit
def grid_misuse(src, how: str):
    """One mistake each, for the errors' tests."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    tiles = nl.tiles(src, tile_shape=(32, 32))
    if how == "no_tile_shape":
        nl.tiles(src)
    elif how == "short_tile_shape":
        nl.tiles(src, tile_shape=(32,))
    elif how == "index_out_of_range":
        tiles[tiles.shape[0], 0]
    elif how == "too_many_indices":
        tiles[0, 0, 0]
    elif how == "gapped_data":
        nisa.dma_copy(dst=out, src=nl.tiles(src, tile_shape=(8, 32))[0:4:2, :].data)
    elif how == "tall_on_chip_data":
        grid = nl.alloc_tiles(tile_shape=(32, 32), element_shape=(64, 64), buffer=nl.sbuf, dtype=src.dtype)
        nisa.dma_copy(dst=grid.data, src=src[0:64, 0:64])
    elif how == "grid_as_operand":
        nisa.dma_copy(dst=out, src=tiles)
    elif how == "negative_step":
        tiles[::-1, 0]
    return out
