"""nki.collectives: kernels that all-reduce, all-gather, reduce-scatter, all-to-all, permute and read their
rank, on one rank (no torch.distributed) and on every rank of a 2-rank job, against torch computed on the
known inputs; and each rule the verifier checks, broken once."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import nki.collectives as ncc
import nki_collective_kernels as k
from dist_launch import free_port
from torch_neuronx.nki.trace import NkiError

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_rank_collectives_return_the_rank_own_data(dtype):
    x = k.rank_input(0, dtype).to("neuron")
    summed, gathered, share, exchanged, rank = k.every_collective(x, ncc.ReplicaGroup([[0]]))
    for result in (summed, gathered, share, exchanged):
        assert torch.equal(result.cpu(), x.cpu())
    assert rank.cpu().item() == 0
    assert torch.equal(k.permuted(x, ((0, 0),)).cpu(), x.cpu())


def test_replica_groups():
    assert ncc.ReplicaGroup.from_partition_op(8, ncc.rg_partition_op.div, 4) == ncc.ReplicaGroup([[0, 1, 2, 3],
                                                                                                   [4, 5, 6, 7]])
    assert ncc.ReplicaGroup.from_partition_op(8, ncc.rg_partition_op.mod, 4).rank_lists == ((0, 4), (1, 5), (2, 6),
                                                                                              (3, 7))
    assert ncc.ReplicaGroup.from_partition_op(4, ncc.rg_partition_op.bitwise_and, 0).size == 4
    for bad in ([[0, 1], [1, 2]], [[0, 1], [2]], [[]]):
        with pytest.raises(ValueError, match="ReplicaGroup"):
            ncc.ReplicaGroup(bad)


def test_a_group_beyond_the_job_is_an_error_naming_the_rank():
    x = k.rank_input(0, torch.float32).to("neuron")
    with pytest.raises(RuntimeError, match=r"names rank 1, but this job has 1 rank\(s\)"):
        k.every_collective(x, ncc.ReplicaGroup([[0, 1]]))


@pytest.mark.parametrize("kernel,message", [
    (k.gather_from_psum, r"cannot read PSUM \('.*' as src\); it must be HBM or SBUF"),
    (k.reduce_into_other_dtype, "src is float32 and dst bfloat16; a collective does not cast"),
    (k.gather_too_narrow, "dst must be src with 2 times its size along dim 0"),
    (k.reduce_by_multiply, "op must be nl.add, nl.maximum or nl.minimum, not multiply"),
    (k.all_to_all_in_sbuf, "its tensors must be in HBM"),
    (k.ring_on_channel_one, r"channel_ids must be 0, 1, ... one per channel \(1\), not \[1\]"),
])
def test_each_rule_fires(kernel, message):
    with pytest.raises(NkiError, match=message):
        kernel(k.rank_input(0, torch.float32).to("neuron"))


def _expected(rank: int, dtype, order: list) -> list:
    """What `rank` gets from every_collective over the rank-list `order` (which holds it)."""
    inputs = {r: k.rank_input(r, dtype) for r in order}
    place = order.index(rank)
    rows = inputs[rank].shape[0] // len(order)
    chunks = {r: x.split(rows) for r, x in inputs.items()}
    largest = torch.stack(list(inputs.values())).amax(dim=0)
    return [sum(inputs.values()),
            torch.cat([inputs[r] for r in order], dim=1),
            largest[place * rows:(place + 1) * rows],
            torch.cat([chunks[r][place] for r in order]),
            torch.tensor([[rank]], dtype=torch.int32)]


def _launch(world: int, out) -> list:
    """Each rank's results from one run of nki_collective_kernels.worker on `world` ranks."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    ranks = [subprocess.Popen([sys.executable, os.path.join(HERE, "nki_collective_kernels.py"), str(r), str(world),
                               str(port), str(out / f"rank{r}.pt")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    logs = []
    for p in ranks:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in ranks:
                q.kill()
            pytest.fail("the ranks did not finish within 240 s")
    assert all(p.returncode == 0 for p in ranks), "\n".join(logs)
    return [torch.load(out / f"rank{r}.pt") for r in range(world)]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return _launch(WORLD, tmp_path_factory.mktemp("collectives"))


def _variable_expected(world: int, key, rank: int):
    """dst and metadata after all_to_all_v / all_gather_v, from AWS's description of them: each member's chunk
    (its column for this rank, or column 0 for all_gather_v) at its slot or row 3's offset, row 2 the counts."""
    order, rows, dst_elements, gather, known, displaced = k.variable_cases(world)[key]
    out, counts = [-1.0] * dst_elements, []
    for place, sender in enumerate(order):
        column = 0 if gather else order.index(rank)
        count, first = rows[sender][0][column], rows[sender][1][column]
        at = rows[rank][3][place] if displaced else place * (dst_elements // len(order))
        out[at:at + count] = k.variable_input(sender)[0, first:first + count].tolist()
        counts.append(count)
    table = [list(row) for row in rows[rank]]
    if not known:
        table[2] = counts
    return torch.tensor([out]), torch.tensor(table, dtype=torch.int64)


def _check_variable(results, world: int) -> None:
    for rank in range(world):
        for key, (out, table) in results[rank]["variable"].items():
            if key == "prepared":  # all_to_all_v_prepare/_trigger: the first case, row 0 zeroed between them
                expected_out, expected_table = _variable_expected(world, (str([0, 1]), False, False), rank)
                expected_table[0] = 0
                assert torch.equal(out, expected_out) and torch.equal(table, expected_table), f"rank {rank}: prepared"
                continue
            expected_out, expected_table = _variable_expected(world, key, rank)
            assert torch.equal(out, expected_out), f"rank {rank}, case {key}: dst"
            assert torch.equal(table, expected_table), f"rank {rank}, case {key}: metadata"


def test_variable_chunks_on_two_ranks(job):
    # all_to_all_v on [0, 1] and [1, 0], receive counts written or known, equal slots or row 3's offsets.
    _check_variable(job, WORLD)
    # One case by hand: rank 1 gets rank 0's x[4:7] at 0 and its own x[0:4] at 5 (slots of 10 // 2).
    out, table = job[1]["variable"][(str([0, 1]), False, False)]
    assert out.tolist() == [[4.0, 5.0, 6.0, -1.0, -1.0, 100.0, 101.0, 102.0, 103.0, -1.0]]
    assert table[2].tolist() == [3, 4]


def _check_ring(results, order: list) -> None:
    """Member i's data reaches member i + 1 each step around the rank-list `order`."""
    for rank in range(len(order)):
        def before(steps):
            return order[(order.index(rank) - steps) % len(order)]
        once, again, pair_sum, place, *ids = results[rank]["ring"]
        assert int(place.item()) == order.index(rank), f"rank {rank}: its place in the rank-list"
        assert torch.equal(once, k.variable_input(before(1))), f"rank {rank}: one step"
        assert torch.equal(again, torch.cat([k.variable_input(before(1)), k.variable_input(before(2))])), \
            f"rank {rank}: the second step's two channels"
        assert torch.equal(pair_sum, k.variable_input(before(1)) + k.variable_input(before(2))), \
            f"rank {rank}: the reduced step"
        assert [int(i.item()) for i in ids] == [rank, before(1), before(2)], f"rank {rank}: ranks processed"


def test_ring_permute_on_two_ranks(job):
    _check_ring(job, [0, 1])


def test_ring_permute_on_one_rank_keeps_its_data():
    x = k.variable_input(0).to("neuron")
    once, again, pair_sum, place, *ids = k.ring_steps(x, ncc.ReplicaGroup([[0]]))
    assert int(place.cpu().item()) == 0
    assert torch.equal(once.cpu(), x.cpu()) and torch.equal(again.cpu(), torch.cat([x.cpu()] * 2))
    assert torch.equal(pair_sum.cpu(), 2 * x.cpu())
    assert [int(i.cpu().item()) for i in ids] == [0, 0, 0]


def test_variable_chunks_on_one_rank():
    x = k.variable_input(0).to("neuron")
    metadata = torch.tensor([[3], [2], [0]], dtype=torch.int64).to(torch.uint32).to("neuron")
    out, table = k.variable_chunks(x, metadata, 5, ncc.ReplicaGroup([[0]]), False, False, False)
    assert out.cpu().tolist() == [[2.0, 3.0, 4.0, -1.0, -1.0]]
    assert table.cpu().to(torch.int64).tolist() == [[3], [2], [3]]


@pytest.mark.parametrize("rows, group, gather, displaced, kind, message", [
    ([[5], [6], [0]], [[0]], False, False, IndexError, "all_to_all_v: the chunk of member 0 .* elements 6 to 11, "
                                                       "is past src's 8"),
    ([[4], [0], [0]], [[0]], False, False, IndexError, "member 0 sends 4 elements to elements 0 to 4 of dst, past its "
                                                       "slot of 3"),
    ([[1], [0], [0]], [[0]], False, True, NkiError, "the metadata must hold 4 rows of 1"),
    ([[1], [0], [0]], [[0]], True, False, NkiError, "all_gather_v runs on rank-lists of 4 ranks"),
])
def test_variable_chunk_errors(rows, group, gather, displaced, kind, message):
    metadata = torch.tensor(rows, dtype=torch.int64).to(torch.uint32).to("neuron")
    with pytest.raises(kind, match=message):
        k.variable_chunks(k.variable_input(0).to("neuron"), metadata, 3, ncc.ReplicaGroup(group), gather, False,
                          displaced)


@pytest.mark.parametrize("misuse, message", [
    ("twice", r"all_to_all_v_trigger: NkiInstruction\(all_to_all_v, triggered\) was triggered already"),
    ("overlap", "all_to_all_v_prepare: the all_to_all_v prepared before has not been triggered"),
    ("dangling", r"the all_to_all_v_prepare at nki_collective_kernels.py:\d+ was never triggered"),
])
def test_prepare_and_trigger_pair_up(misuse, message):
    metadata = torch.tensor([[3], [2], [0]], dtype=torch.int64).to(torch.uint32).to("neuron")
    with pytest.raises(NkiError, match=message):
        k.variable_chunks_prepared(k.variable_input(0).to("neuron"), metadata, 5, ncc.ReplicaGroup([[0]]), misuse)


def test_variable_chunk_metadata_must_be_uint32():
    metadata = torch.tensor([[1], [0], [0]], dtype=torch.int32).to("neuron")
    with pytest.raises(NkiError, match="the metadata must be uint32, not int32"):
        k.all_to_all_v_with(k.variable_input(0).to("neuron"), metadata)


def test_four_ranks_in_groups_of_two(tmp_path):
    """Rank-lists [[0, 1], [2, 3]] and [[0, 2], [1, 3]]: each a torch.distributed group of its own; and
    all_gather_v on the 4 ranks (rank r broadcasts r + 1 elements)."""
    results = _launch(4, tmp_path)
    _check_variable(results, 4)
    _check_ring(results, k.RING_4)
    assert results[3]["variable"]["gather"][0][0, 16:24].tolist() == [202.0, 203.0, 204.0] + [-1.0] * 5
    names = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "rank_id"]
    for op, rank_lists in (("div", [[0, 1], [2, 3]]), ("mod", [[0, 2], [1, 3]])):
        for rank in range(4):
            order = next(ranks for ranks in rank_lists if rank in ranks)
            for name, result, expected in zip(names, results[rank][op], _expected(rank, torch.float32, order)):
                assert torch.equal(result, expected), f"rank {rank}, {name}, rank-lists {rank_lists}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
def test_two_ranks_match_torch(job, dtype, order):
    names = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "rank_id"]
    for rank in range(WORLD):
        got = job[rank][(str(dtype), str([order]))]
        for name, result, expected in zip(names, got, _expected(rank, dtype, order)):
            assert torch.equal(result, expected.to(result.dtype)), f"rank {rank}, {name}, rank-list {order}"


def test_two_ranks_permute_and_select_by_rank(job):
    inputs = [k.rank_input(r, torch.float32) for r in range(WORLD)]
    assert torch.equal(job[0]["swap"], inputs[1]) and torch.equal(job[1]["swap"], inputs[0])
    assert torch.equal(job[0]["one way"], inputs[0]) and torch.equal(job[1]["one way"], inputs[0])
    for rank in range(WORLD):
        assert torch.equal(job[rank]["own row"], torch.arange(rank * 8, rank * 8 + 8, dtype=torch.float32)[None])
