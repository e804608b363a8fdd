"""Kernels with nki.collectives, in the forms AWS's API reference and NKI library show, and the worker that
runs them on every rank of a torch.distributed job (`python nki_collective_kernels.py RANK WORLD PORT OUT`)."""
import sys
from datetime import timedelta

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl


@nki.jit
def every_collective(x, group):
    """x [128, F] on each rank: its all_reduce (add, HBM), all_gather (SBUF, along the free dim),
    reduce_scatter (maximum, HBM, dim 0), all_to_all (HBM, dim 0) and the rank's id."""
    parts, (rows, cols) = group.size, x.shape
    summed = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[summed], replica_group=group, op=nl.add)

    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    wide = nl.ndarray((rows, cols * parts), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather(srcs=[tile], dsts=[wide], replica_group=group, collective_dim=1)
    gathered = nl.ndarray((rows, cols * parts), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=gathered, src=wide)

    share = nl.ndarray((rows // parts, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.reduce_scatter(srcs=[x], dsts=[share], replica_group=group, collective_dim=0, op=nl.maximum)

    exchanged = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all(srcs=[x], dsts=[exchanged], replica_group=group, collective_dim=0)

    rank = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.scalar_store(rank, ncc.rank_id())
    return summed, gathered, share, exchanged, rank


@nki.jit
def permuted(x, pairs):
    """x sent along (source, target) pairs; a rank no pair targets returns its own x."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    ncc.collective_permute(srcs=[x], dsts=[out], source_target_pairs=pairs)
    return out


@nki.jit
def own_rank_row(table):
    """Row rank_id() of table [W, F], selected on the device by the register rank_id returns."""
    row = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    width = table.shape[1]
    nisa.dma_copy(dst=row, src=table.ap([[width, 1], [1, width]], offset=0, scalar_offset=ncc.rank_id() * width))
    out = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


def _dst_and_metadata(x, metadata, dst_elements: int):
    """Inside a kernel: a [1, dst_elements] dst set to -1, and a copy of the metadata the collective may write."""
    out = nl.ndarray((1, dst_elements), dtype=x.dtype, buffer=nl.shared_hbm)
    fill = nl.ndarray((1, dst_elements), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(fill, -1.0)
    nisa.dma_copy(dst=out, src=fill)
    table = nl.ndarray(metadata.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=table, src=metadata)
    return out, table


@nki.jit
def variable_chunks(x, metadata, dst_elements: int, group, gather: bool, counts_known: bool, displaced: bool):
    """all_to_all_v (or all_gather_v) of x [1, S] into a [1, dst_elements] dst set to -1 first; returns dst
    and the metadata as the collective left it (row 2 written unless counts_known)."""
    out, table = _dst_and_metadata(x, metadata, dst_elements)
    collective = ncc.all_gather_v if gather else ncc.all_to_all_v
    collective(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=table, recv_counts_known=counts_known,
               has_rdispls=displaced)
    return out, table


@nki.jit
def ring_steps(x, group):
    """x [1, 8] one step around the ring in HBM; then, on two channels of SBUF tiles, x and the step's result
    one more step; their sum one step (collective_permute_implicit_reduce); this rank's place in the
    rank-list; and the ranks whose data iterations 0, 1 and 2 process."""
    once = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit(srcs_by_channel=[[x]], dsts_by_channel=[[once]], replica_group=group)
    tiles = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf) for _ in range(4)]
    nisa.dma_copy(dst=tiles[0], src=x)
    nisa.dma_copy(dst=tiles[1], src=once)
    ncc.collective_permute_implicit(srcs_by_channel=[[tiles[0]], [tiles[1]]], dsts_by_channel=[[tiles[2]], [tiles[3]]],
                                    replica_group=group, channel_ids=[0, 1])
    again = nl.ndarray((2, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=again[0:1, :], src=tiles[2])
    nisa.dma_copy(dst=again[1:2, :], src=tiles[3])
    summed = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[tiles[0]]], srcs1_by_channel=[[tiles[1]]],
                                           dsts_by_channel=[[summed]], replica_group=group, op=nl.add)
    pair_sum = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=pair_sum, src=summed)
    place = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.scalar_store(place, ncc.self_index_in_replica_group(group))
    ids = [place]
    for iteration in range(3):
        rank = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.scalar_store(rank, ncc.collective_permute_implicit_current_processing_rank_id(iteration, group))
        ids.append(rank)
    return (once, again, pair_sum, *ids)


@nki.jit
def variable_chunks_prepared(x, metadata, dst_elements: int, group, misuse: str = ""):
    """all_to_all_v in two halves (SDK 2.34): prepared, then its metadata's send counts zeroed, then
    triggered; the transfer follows the metadata as the prepare read it. misuse: "twice" triggers it
    twice, "overlap" prepares again before the trigger, "dangling" never triggers it."""
    out, table = _dst_and_metadata(x, metadata, dst_elements)
    prepared = ncc.all_to_all_v_prepare(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=table)
    if misuse == "overlap":
        ncc.all_to_all_v_prepare(srcs=[x], dsts=[out], replica_group=group, metadata_tensor=table)
    zeros = nl.ndarray((1, metadata.shape[1]), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(zeros, 0)
    nisa.dma_copy(dst=table[0:1, :], src=zeros)
    if misuse != "dangling":
        ncc.all_to_all_v_trigger(prepared)
    if misuse == "twice":
        ncc.all_to_all_v_trigger(prepared)
    return out, table


# ---- kernels that break a rule; each call must raise NkiError naming it

@nki.jit
def ring_on_channel_one(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit(srcs_by_channel=[[x]], dsts_by_channel=[[out]],
                                    replica_group=ncc.ReplicaGroup([[0]]), channel_ids=[1])
    return out


@nki.jit
def all_to_all_v_with(x, metadata):
    """all_to_all_v on one rank with the metadata as given (of any dtype)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all_v(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0]]), metadata_tensor=metadata)
    return out


@nki.jit
def gather_from_psum(x):
    tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=tile, value=0.0)
    wide = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    ncc.all_gather(srcs=[tile], dsts=[wide], replica_group=ncc.ReplicaGroup([[0, 1]]), collective_dim=1)
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=wide)
    return out


@nki.jit
def reduce_into_other_dtype(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0]]), op=nl.add)
    return out


@nki.jit
def gather_too_narrow(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # two ranks need twice the rows
    ncc.all_gather(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0, 1]]), collective_dim=0)
    return out


@nki.jit
def reduce_by_multiply(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([[0]]), op=nl.multiply)
    return out


@nki.jit
def all_to_all_in_sbuf(x):
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    other = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_to_all(srcs=[tile], dsts=[other], replica_group=ncc.ReplicaGroup([[0]]), collective_dim=0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=other)
    return out


RING_4 = [0, 2, 1, 3]  # the ring of the 4-rank test: 0 -> 2 -> 1 -> 3 -> 0


def variable_input(rank: int):
    """x [1, 8] = 100 rank + 0..7."""
    import torch
    return (torch.arange(8, dtype=torch.float32) + 100 * rank)[None]


def variable_cases(world: int) -> dict:
    """Metadata per case and rank: (rank-list, rows [send counts, send offsets, 77s, receive offsets], dst
    elements, gather, counts_known, displaced)."""
    if world == 4:  # all_gather_v: rank r sends r + 1 elements from offset 2 (only column 0 counts)
        return {"gather": ([0, 1, 2, 3], {r: [[r + 1] * 4, [2] * 4, [0] * 4] for r in range(4)}, 32, True, False,
                           False)}
    sends = {0: [[2, 3], [0, 4]], 1: [[1, 4], [7, 0]]}  # per rank: counts and offsets of its chunk for each column
    displacements = {0: [3, 0], 1: [6, 1]}
    cases = {}
    for order in ([0, 1], [1, 0]):
        for known in (False, True):
            for displaced in (False, True):
                rows = {r: sends[r] + [[77, 77], displacements[r]] for r in range(2)}
                cases[(str(order), known, displaced)] = (order, rows, 10, False, known, displaced)
    return cases


def run_variable_cases(rank: int, world: int, device) -> dict:
    import torch
    results = {}
    for key, (order, rows, dst_elements, gather, known, displaced) in variable_cases(world).items():
        metadata = torch.tensor(rows[rank], dtype=torch.int64).to(torch.uint32).to(device)
        out, table = variable_chunks(variable_input(rank).to(device), metadata, dst_elements, ncc.ReplicaGroup([order]),
                                     gather, known, displaced)
        results[key] = (out.cpu(), table.cpu().to(torch.int64))
    if world == 2:  # the first case again in two halves: the same dst, row 0 zeroed between them
        order, rows, dst_elements, *_ = variable_cases(world)[(str([0, 1]), False, False)]
        metadata = torch.tensor(rows[rank], dtype=torch.int64).to(torch.uint32).to(device)
        out, table = variable_chunks_prepared(variable_input(rank).to(device), metadata, dst_elements,
                                              ncc.ReplicaGroup([order]))
        results["prepared"] = (out.cpu(), table.cpu().to(torch.int64))
    return results


def rank_input(rank: int, dtype, rows: int = 128, cols: int = 64):
    """What rank `rank` sends: distinct on every rank and every element, exact in bf16."""
    import torch
    values = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) % 97 + 100 * rank
    return values.to(dtype)


def worker(rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    device = torch.device("neuron", rank)
    results = {}
    if world > 2:  # rank-lists smaller than the job: one torch.distributed group each
        x = rank_input(rank, torch.float32).to(device)
        for op in (ncc.rg_partition_op.div, ncc.rg_partition_op.mod):
            group = ncc.ReplicaGroup.from_partition_op(world, op, 2)
            results[op.name] = [t.cpu() for t in every_collective(x, group)]
        results["variable"] = run_variable_cases(rank, world, device)
        results["ring"] = [t.cpu() for t in ring_steps(variable_input(rank).to(device), ncc.ReplicaGroup([RING_4]))]
        dist.destroy_process_group()
        torch.save(results, out)
        return
    for dtype in (torch.float32, torch.bfloat16):
        x = rank_input(rank, dtype).to(device)
        for order in ([list(range(world))], [list(reversed(range(world)))]):
            results[(str(dtype), str(order))] = [t.cpu() for t in every_collective(x, ncc.ReplicaGroup(order))]
    x = rank_input(rank, torch.float32).to(device)
    results["swap"] = permuted(x, ((0, 1), (1, 0))).cpu()
    results["one way"] = permuted(x, ((0, 1),)).cpu()
    results["own row"] = own_rank_row(torch.arange(world * 8, dtype=torch.float32).reshape(world, 8)
                                      .to(device)).cpu()
    results["variable"] = run_variable_cases(rank, world, device)
    results["ring"] = [t.cpu() for t in ring_steps(variable_input(rank).to(device), ncc.ReplicaGroup([[0, 1]]))]
    dist.destroy_process_group()
    torch.save(results, out)


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
