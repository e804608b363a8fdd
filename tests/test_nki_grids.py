"""AWS's tile grids (nl.tiles, nl.blocks, nl.alloc_tiles, nl.empty_like of a grid; NKI of SDK 2.33):
kernels that move and compute through them against torch, the grids' geometry against hand counts, and
each misuse refused by name."""
from __future__ import annotations

import pytest
import torch

import nki_grid_kernels as k  # noqa: E402
from torch_neuronx.nki import grids
from torch_neuronx.nki.trace import NkiError

N = "neuron"


def _randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("shape, tile", [((256, 512), (128, 256)), ((200, 300), (128, 256)), ((7, 5), (4, 2))])
def test_copy_by_tiles_includes_the_remainder_tiles(shape, tile):
    x = _randn(*shape)
    assert torch.equal(k.copy_by_tiles(x.to(N), *tile).cpu(), x)


def test_scale_by_tiles_on_the_vector_engine():
    x = _randn(256, 200, seed=1)
    torch.testing.assert_close(k.scale_by_tiles(x.to(N), 3.0).cpu(), x * 3.0)


def test_a_row_of_tiles_is_one_view_and_its_tiles_are_its_parts():
    x = _randn(160, 96, seed=2)  # 3 rows of tiles (the last 32 rows), 3 tiles of 32 columns each
    torch.testing.assert_close(k.copy_by_tile_rows(x.to(N)).cpu(), x * 2)


def test_blocks_move_several_tiles_and_their_tiles_compute():
    x = _randn(64, 80, seed=3)  # tiles [32, 16]: 2 x 5; blocks of 1 x 2 tiles: 2 x 3, the last block one tile
    expected = x.clone()
    for j0 in range(0, 80, 32):
        expected[:, j0 + 16:j0 + 32] += 1.0  # the second tile of each block
    torch.testing.assert_close(k.copy_by_blocks(x.to(N)).cpu(), expected)


@pytest.mark.parametrize("shape", [(64, 96), (96, 64)])
def test_transpose_by_tiles(shape):
    x = _randn(*shape, seed=4)
    assert torch.equal(k.transpose_by_tiles(x.to(N)).cpu(), x.t())


def test_matmul_by_tiles_against_torch():
    lhs_t, rhs = _randn(256, 128, dtype=torch.bfloat16, seed=5), _randn(256, 1024, dtype=torch.bfloat16, seed=6)
    got = k.matmul_by_tiles(lhs_t.to(N), rhs.to(N)).cpu()
    torch.testing.assert_close(got.float(), lhs_t.float().t() @ rhs.float(), rtol=2e-2, atol=2e-1)


def test_gather_rows_by_index_tiles_with_a_short_last_tile():
    data = _randn(512, 128, seed=7)
    indices = torch.randint(0, 512, (200, 1), generator=torch.Generator().manual_seed(8), dtype=torch.int32)
    got = k.gather_rows_by_tiles(data.to(N), indices.to(N)).cpu()
    assert torch.equal(got, data[indices[:, 0].long()])


@pytest.mark.parametrize("which", [0, 2])
def test_a_tile_chosen_on_the_device(which):
    x = _randn(96, 48, seed=9)
    got = k.tile_chosen_on_device(x.to(N), torch.tensor([[which]], dtype=torch.int32).to(N)).cpu()
    assert torch.equal(got, x[32 * which:32 * which + 32])


def test_an_on_chip_grid_taller_than_its_tiles():
    x = _randn(64, 40, seed=12)  # tiles [32, 16]: 2 x 3, the last column of tiles 8 wide
    expected = x.clone()
    for i in range(2):
        for j in range(3):
            expected[32 * i:32 * i + 32, 16 * j:16 * j + 16] += 10 * i + j
    torch.testing.assert_close(k.through_a_tall_on_chip_grid(x.to(N)).cpu(), expected)


def test_leading_dims_are_untiled_slabs():
    x = _randn(3, 40, 70, seed=10)
    expected = x + torch.arange(3.0).view(3, 1, 1)
    torch.testing.assert_close(k.batched_tiles(x.to(N)).cpu(), expected)


@pytest.mark.parametrize("interleaved", [False, True])
def test_shards_of_a_grid_dim(interleaved):
    x = _randn(8, 10, seed=11)
    shard_of = [s for s in range(3) for _ in range([4, 3, 3][s])] if not interleaved else [c % 3 for c in range(10)]
    expected = x + torch.tensor(shard_of, dtype=torch.float32)
    torch.testing.assert_close(k.sharded_columns(x.to(N), 3, interleaved).cpu(), expected)


def test_shard_helpers_match_hand_counts():
    import nki.language as nl
    assert [nl.contiguous_indices(10, shard_id=s, num_shards=3) for s in range(3)] == [
        slice(0, 4), slice(4, 7), slice(7, 10)]
    assert nl.interleaved_indices(10, shard_id=1, num_shards=3) == slice(1, 10, 3)
    with pytest.raises(ValueError):
        nl.contiguous_indices(2, shard_id=0, num_shards=3)
    with pytest.raises(TypeError):
        nl.interleaved_indices(10.0, shard_id=0, num_shards=2)


def test_geometry_of_a_grid_and_its_selections():
    """shape, element_shape, tile/block shapes, steps and remainders for a [200, 300] tensor in [128, 256]
    tiles (2 x 2, the last row 72 rows, the last column 44 columns), counted by hand."""
    from torch_neuronx.nki.trace import TensorDecl, View
    tensor = View.whole(TensorDecl(0, "x", "hbm", "float32", (200, 300), argument=0, line=0))
    tiles = grids.tiles(tensor, tile_shape=(128, 256))
    assert tiles.shape == (2, 2) and tiles.tile_shape == (128, 256) and tiles.element_shape == (200, 300)
    assert tiles.index_step_elements == (128, 256) and tiles.is_remainder
    assert tiles[0, 0].shape == () and tiles[0, 0].element_shape == (128, 256) and not tiles[0, 0].is_remainder
    assert tiles[1, 1].element_shape == (72, 44) and tiles[1, 1].is_remainder
    assert tiles[1].shape == (2,) and tiles[1].element_shape == (72, 300)
    assert tiles[:, 1].element_shape == (200, 44)
    assert tiles[1, 1].data.shape == (72, 44) and tiles[1, 1].data.offset == 128 * 300 + 256
    blocks = grids.blocks(tensor, tile_shape=(64, 128), block_shape=(2, 2))
    assert blocks.shape == (2, 2) and blocks.block_shape == (2, 2) and blocks.index_step_elements == (128, 256)
    inner = grids.tiles(blocks[1, 1])
    assert inner.shape == (2, 1) and inner.element_shape == (72, 44) and inner[1, 0].element_shape == (8, 44)
    gapped = grids.tiles(tensor, tile_shape=(8, 1))[:, 1:300:7]
    assert gapped.shape == (25, 43) and gapped.index_step_elements == (8, 7)
    assert gapped.data.strides == (300, 7) and gapped.is_data_representable
    assert not grids.tiles(tensor, tile_shape=(8, 2))[:, ::2].is_data_representable
    one_of_gapped = grids.tiles(tensor, tile_shape=(8, 300))[0:10:2][1]
    assert one_of_gapped.data.shape == (8, 300) and one_of_gapped.data.offset == 2 * 8 * 300


@pytest.mark.parametrize("how, kind, words", [
    ("no_tile_shape", ValueError, "needs tile_shape"),
    ("short_tile_shape", ValueError, "at least 2 positive entries"),
    ("index_out_of_range", ValueError, "index 1 is outside its 1 cells"),
    ("too_many_indices", ValueError, "3 indices for a grid of 2 dims"),
    ("gapped_data", ValueError, "not one access pattern"),
    ("tall_on_chip_data", ValueError, "more than one row of tiles"),
    ("grid_as_operand", NkiError, ".data"),
    ("negative_step", ValueError, "positive steps"),
])
def test_misuse_is_refused_by_name(how, kind, words):
    with pytest.raises(kind) as raised:
        k.grid_misuse(_randn(32, 64).to(N), how)
    assert words in str(raised.value) and "nki_grid_kernels.py" in str(raised.value), str(raised.value)
