"""The ranks' side of nki.collectives as a kernel runs: the C++ executor hands each collective instruction's
bytes to exchange(), which carries it out with the other ranks over torch.distributed (one process per
NeuronCore, as torchrun launches a Trainium job) and returns what this rank receives.

A rank-list becomes a torch.distributed group the first time a collective uses it: every rank creates the
groups of a replica group together, in list order, as new_group requires. torch orders a group's members by
rank; a rank-list may order them otherwise, so parts are reordered between the two. Reductions run in the
data's dtype; moves go as bytes. Without torch.distributed the job is one rank, 0."""
from __future__ import annotations

import torch

from .collectives import (ALL_GATHER, ALL_GATHER_V, ALL_REDUCE, ALL_TO_ALL, ALL_TO_ALL_V, PERMUTE, RANK_ID,
                          GROUP_INDEX, REDUCE_SCATTER, RING_PERMUTE, RING_PERMUTE_REDUCE, RING_RANK_ID)

_GROUPS: dict = {}  # (the default group, rank-lists of a replica group) -> a torch.distributed group for each
_REDUCE_OPS = {"add": "SUM", "maximum": "MAX", "minimum": "MIN"}


def _world():
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _within_job(what: str, ranks, world: int) -> None:
    beyond = [r for r in ranks if r >= world]
    if beyond:
        raise RuntimeError(f"nki.collectives: {what} names rank {beyond[0]}, but this job has {world} rank(s) "
                           f"(torch.distributed {'is' if torch.distributed.is_initialized() else 'is not'} "
                           "initialized)")


def _my_list(rank_lists, rank: int, world: int) -> tuple:
    _within_job(f"the replica group {[list(l) for l in rank_lists]}", [r for ranks in rank_lists for r in ranks],
                world)
    mine = [ranks for ranks in rank_lists if rank in ranks]
    if not mine:
        raise RuntimeError(f"nki.collectives: rank {rank} is in no rank-list of {[list(l) for l in rank_lists]}")
    return mine[0]


def _process_group(rank_lists, mine, world: int):
    if sorted(mine) == list(range(world)):
        return None  # the default group
    from torch.distributed.distributed_c10d import _get_default_group
    key = (id(_get_default_group()), rank_lists)  # groups of a destroyed default group are gone with it
    groups = _GROUPS.get(key)
    if groups is None:
        groups = _GROUPS[key] = {ranks: torch.distributed.new_group(list(ranks)) for ranks in rank_lists}
    return groups[mine]


def _device():
    """Where the exchanged tensors live: neuron when the default group has a backend for it, else the CPU."""
    from torch.distributed.distributed_c10d import _get_default_group
    if any(d.type == "neuron" for d in _get_default_group()._device_types):
        return torch.device("neuron", torch.neuron.current_device())
    return torch.device("cpu")


def _parts(tensor: torch.Tensor, order) -> torch.Tensor:
    """The equal parts of a flat tensor, in the given order of part indices."""
    parts = tensor.chunk(len(order))
    return torch.cat([parts[i] for i in order])


def exchange(coefficients: list, op: str, dtype: torch.dtype, sent: bytes) -> bytes:
    """One collective instruction: coefficients as nki_runtime/Collectives.h lays them out."""
    kind, count, length = int(coefficients[0]), int(coefficients[2]), int(coefficients[3])
    ranks = [int(r) for r in coefficients[4:]]
    rank, world = _world()
    if kind == RANK_ID:
        return torch.tensor([rank], dtype=torch.int32).numpy().tobytes()
    if kind == PERMUTE:
        return _permute([tuple(ranks[i:i + 2]) for i in range(0, 2 * count, 2)], rank, world, sent)
    rank_lists = tuple(tuple(ranks[i * length:(i + 1) * length]) for i in range(count))
    mine = _my_list(rank_lists, rank, world)
    if kind == GROUP_INDEX:
        return torch.tensor([mine.index(rank)], dtype=torch.int32).numpy().tobytes()
    if kind == RING_RANK_ID:  # the member `iteration` places before this one, around the ring
        place = (mine.index(rank) - int(coefficients[1])) % len(mine)
        return torch.tensor([mine[place]], dtype=torch.int32).numpy().tobytes()
    if len(mine) == 1:
        return sent
    if kind in (RING_PERMUTE, RING_PERMUTE_REDUCE):  # the reduction happened before sending
        routes = [(ranks_of[i], ranks_of[(i + 1) % len(ranks_of)]) for ranks_of in rank_lists
                  for i in range(len(ranks_of))]
        return _permute(routes, rank, world, sent)
    if kind in (ALL_TO_ALL_V, ALL_GATHER_V):
        return _variable(kind, mine, mine.index(rank), _process_group(rank_lists, mine, world), dtype, sent)
    as_dtype = kind in (ALL_REDUCE, REDUCE_SCATTER)
    data = torch.frombuffer(bytearray(sent), dtype=dtype if as_dtype else torch.uint8)
    dist = torch.distributed
    group, device = _process_group(rank_lists, mine, world), _device()
    by_rank = sorted(mine)  # torch's order of the group's members
    data = data.to(device)
    if kind == ALL_REDUCE:
        dist.all_reduce(data, op=getattr(dist.ReduceOp, _REDUCE_OPS[op]), group=group)
        received = data
    elif kind == ALL_GATHER:
        gathered = torch.empty(data.numel() * len(mine), dtype=data.dtype, device=device)
        dist.all_gather_into_tensor(gathered, data, group=group)
        received = _parts(gathered, [by_rank.index(r) for r in mine])
    elif kind == REDUCE_SCATTER:
        received = torch.empty(data.numel() // len(mine), dtype=data.dtype, device=device)
        dist.reduce_scatter_tensor(received, _parts(data, [mine.index(r) for r in by_rank]),
                                   op=getattr(dist.ReduceOp, _REDUCE_OPS[op]), group=group)
    elif kind == ALL_TO_ALL:
        out = torch.empty_like(data)
        dist.all_to_all_single(out, _parts(data, [mine.index(r) for r in by_rank]), group=group)
        received = _parts(out, [by_rank.index(r) for r in mine])
    else:
        raise RuntimeError(f"nki.collectives: unknown collective kind {kind}")
    return received.cpu().contiguous().view(torch.uint8).numpy().tobytes()


def _permute(routes, rank: int, world: int, sent: bytes) -> bytes:
    _within_job(f"collective_permute {routes}", [r for pair in routes for r in pair], world)
    send_to = [t for s, t in routes if s == rank]
    receive_from = [s for s, t in routes if t == rank]
    if send_to == [rank]:
        return sent
    dist = torch.distributed
    device = _device() if world > 1 else torch.device("cpu")
    data = torch.frombuffer(bytearray(sent), dtype=torch.uint8).to(device)
    received = torch.empty_like(data)
    ops = [dist.P2POp(dist.isend, data, t) for t in send_to] + \
          [dist.P2POp(dist.irecv, received, s) for s in receive_from]
    if ops:
        for work in dist.batch_isend_irecv(ops):
            work.wait()
    return received.cpu().numpy().tobytes() if receive_from else b""


def _variable(kind: int, mine: tuple, me: int, group, dtype: torch.dtype, sent: bytes) -> bytes:
    """all_to_all_v / all_gather_v: every member's counts first (an all_gather), then the chunks, each padded
    to the longest so that torch's equal-part collectives carry them; what comes back is the count from each
    member, then its chunk, in list order (nki_runtime/Collectives.h); `me` is this rank's place in `mine`."""
    dist, device = torch.distributed, _device()
    n, size = len(mine), torch.empty((), dtype=dtype).element_size()
    by_rank = sorted(mine)
    chunks = n if kind == ALL_TO_ALL_V else 1
    header = torch.frombuffer(bytearray(sent[:4 * chunks]), dtype=torch.int32).to(torch.int64)  # uint32 counts
    everyone = torch.empty(n * chunks, dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(everyone, header.to(device), group=group)
    counts = everyone.cpu().reshape(n, chunks)[[by_rank.index(r) for r in mine]] & 0xFFFFFFFF  # [sender, chunk]
    widest = int(counts.max()) * size
    payload, at = torch.zeros(chunks, max(widest, 1), dtype=torch.uint8), 4 * chunks
    for j in range(chunks):
        length = int(header[j] & 0xFFFFFFFF) * size
        if length:
            payload[j, :length] = torch.frombuffer(bytearray(sent[at:at + length]), dtype=torch.uint8)
        at += length
    if kind == ALL_TO_ALL_V:
        out = torch.empty_like(payload, device=device)
        dist.all_to_all_single(out, payload[[mine.index(r) for r in by_rank]].to(device), group=group)
        received, lengths = out.cpu()[[by_rank.index(r) for r in mine]], counts[:, me]
    else:
        out = torch.empty(n, payload.shape[1], dtype=torch.uint8, device=device)
        dist.all_gather_into_tensor(out, payload[0].to(device), group=group)
        received, lengths = out.cpu()[[by_rank.index(r) for r in mine]], counts[:, 0]
    parts = [lengths.to(torch.int32).numpy().tobytes()]
    parts += [received[s, :int(lengths[s]) * size].numpy().tobytes() for s in range(n)]
    return b"".join(parts)
