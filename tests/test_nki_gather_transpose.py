"""nisa.dma_transpose of an indirect source (AWS's gather-transpose): rows of an HBM tensor picked by a uint32
index tile read column by column, transposed into SBUF, against torch's indexing; out-of-range rows raise or
are skipped; AWS's limits refused by name."""
from __future__ import annotations

import pytest
import torch

import nki_dma_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError

N = "neuron"


def _table(rows, width, dtype=torch.bfloat16, seed=0):
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _ids(values):
    return torch.as_tensor(values, dtype=torch.int64).to(torch.uint32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_one_index_column_as_the_documented_example(dtype):
    """out[p, j] = table[idx[j, 0], p]: 128 rows of a 500-row table, repeats included."""
    table = _table(500, 128, dtype)
    picks = torch.randint(0, 500, (128, 1), generator=torch.Generator().manual_seed(1))
    picks[5, 0] = picks[90, 0]
    got = k.gather_transpose(table.to(N), _ids(picks).to(N), 128).cpu()
    assert torch.equal(got, table[picks[:, 0]].T)


def test_two_index_columns_are_read_column_by_column():
    """AWS's worked numbers: idx[:, 0] = 0..127 and idx[:, 1] = 200..327 make column 130 of dst row 202."""
    table = _table(400, 64, seed=2)
    ids = torch.stack([torch.arange(128), torch.arange(200, 328)], 1)
    got = k.gather_transpose(table.to(N), _ids(ids).to(N), 256).cpu()
    assert torch.equal(got[:, 130], table[202])
    assert torch.equal(got, table[ids.T.flatten()].T)


def test_fewer_rows_than_indices_take_the_first_in_column_order():
    table = _table(300, 32, seed=3)
    ids = torch.randint(0, 300, (128, 2), generator=torch.Generator().manual_seed(4))
    got = k.gather_transpose(table.to(N), _ids(ids).to(N), 160).cpu()
    assert torch.equal(got, table[ids.T.flatten()[:160]].T)


def test_the_four_axis_form_permutes_3_1_2_0():
    table = torch.randn(50, 1, 3, 16).to(torch.bfloat16)
    ids = torch.randint(0, 50, (32, 1), generator=torch.Generator().manual_seed(5))
    got = k.gather_transpose_4d(table.to(N), _ids(ids).to(N)).cpu()
    assert torch.equal(got, table[ids[:, 0]].permute(3, 1, 2, 0))


def test_an_index_past_the_table_raises_or_is_skipped():
    table = _table(100, 16, seed=6)
    ids = torch.arange(16).reshape(16, 1)
    ids[3, 0] = 100
    with pytest.raises(IndexError, match="index 100 .*reaches outside the source"):
        k.gather_transpose(table.to(N), _ids(ids).to(N), 16)
    got = k.gather_transpose(table.to(N), _ids(ids).to(N), 16, oob_skip=True).cpu()
    kept = [j for j in range(16) if j != 3]
    assert torch.equal(got[:, kept], table[ids[kept, 0]].T)
    assert torch.equal(got[:, 3], torch.full((16,), -1.0, dtype=torch.bfloat16))  # the skipped row: untouched


@pytest.mark.parametrize("what,table_dtype,ids_shape,message", [
    ("fp32", torch.float32, (16, 1), "moves 2-byte elements"),
    ("int32_ids", torch.bfloat16, (16, 1), "2-axis uint32 SBUF tile"),
    ("rows", torch.bfloat16, (32, 1), "a multiple of 16 rows"),
    ("few_indices", torch.bfloat16, (8, 1), r"16 to 128 partitions"),
    ("two_columns_of_64", torch.bfloat16, (64, 2), r"128 with more than one column"),
    ("hwdge", torch.bfloat16, (16, 1), "dge_mode unknown or swdge"),
])
def test_aws_limits_are_refused_by_name(what, table_dtype, ids_shape, message):
    table = _table(64, 16, table_dtype)
    ids = torch.zeros(ids_shape, dtype=torch.int64)
    ids = ids.to(torch.int32) if what == "int32_ids" else _ids(ids)
    with pytest.raises(NkiError, match=message):
        k.gather_transpose_misuse(table.to(N), ids.to(N), what)
