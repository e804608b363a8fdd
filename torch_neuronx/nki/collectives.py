"""nki.collectives: data exchanged between the ranks of a job (the NeuronCores that run the same kernel),
from inside a kernel: all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute, the
variable-length all_to_all_v and all_gather_v, the ring permute collective_permute_implicit (and the rank a
ring step brings) and rank_id, over the rank-lists of a ReplicaGroup.

Each records one `collective` instruction per (src, dst) pair; the C++ executor packs what it sends and the
run's communicator (communicator.py) exchanges it with the other ranks over torch.distributed, so a kernel
launched by every rank of a torchrun job (one process per NeuronCore) behaves as on Trainium. Without
torch.distributed the job has one rank, 0. Checked as AWS's API reference states: src and dst both in HBM
or both in SBUF (all_to_all and collective_permute: HBM), one dtype, shapes that fit the group's size."""
from __future__ import annotations

from enum import Enum
from typing import Sequence

from .isa import alu_of
from .language import _emit
from .trace import NkiError, View, current

# The kinds, as nki_runtime/Collectives.h numbers them.
(ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, PERMUTE, RANK_ID, ALL_TO_ALL_V, ALL_GATHER_V, RING_PERMUTE,
 RING_RANK_ID, RING_PERMUTE_REDUCE, GROUP_INDEX) = range(12)
_RING_CHANNELS = 4  # AWS: at most 4 channels (for a replica group of every device of a node; 2 for others)
RECV_COUNTS_KNOWN, HAS_RECV_DISPLACEMENTS = 1, 2  # their flags
_REDUCTIONS = ("add", "maximum", "minimum")
_REDUCED_DTYPES = ("float32", "bfloat16", "float16", "int32", "uint8")


class rg_partition_op(Enum):  # noqa: N801  AWS's name
    """How ReplicaGroup.from_partition_op numbers a rank's rank-list: op(rank, operand)."""
    bitwise_and = "bitwise_and"
    div = "div"
    mod = "mod"


class ReplicaGroup:
    """The ranks a collective runs on, as rank-lists of one length: it runs within each list, all lists at
    once; a rank is in at most one list. ReplicaGroup([[0, 1, 2, 3], [4, 5, 6, 7]])."""

    def __init__(self, rank_lists: Sequence[Sequence[int]]):
        lists = tuple(tuple(int(r) for r in ranks) for ranks in rank_lists)
        seen = [r for ranks in lists for r in ranks]
        if not lists or any(not ranks for ranks in lists):
            raise ValueError(f"ReplicaGroup: {rank_lists!r} has an empty rank-list")
        if len({len(ranks) for ranks in lists}) != 1:
            raise ValueError(f"ReplicaGroup: the rank-lists of {rank_lists!r} differ in length")
        if len(set(seen)) != len(seen) or min(seen) < 0:
            raise ValueError(f"ReplicaGroup: {rank_lists!r} names a rank twice, or a negative rank")
        self.rank_lists = lists

    @staticmethod
    def from_partition_op(world_size: int, op: rg_partition_op, operand: int) -> "ReplicaGroup":
        """Ranks [0, world_size) with the same op(rank, operand) form one rank-list (in order of that value)."""
        key = {rg_partition_op.bitwise_and: lambda r: r & operand, rg_partition_op.div: lambda r: r // operand,
               rg_partition_op.mod: lambda r: r % operand}[rg_partition_op(op)]
        lists: dict = {}
        for rank in range(world_size):
            lists.setdefault(key(rank), []).append(rank)
        return ReplicaGroup([lists[k] for k in sorted(lists)])

    @property
    def size(self) -> int:
        """Ranks per rank-list."""
        return len(self.rank_lists[0])

    def __eq__(self, other) -> bool:
        return isinstance(other, ReplicaGroup) and other.rank_lists == self.rank_lists

    def __hash__(self) -> int:
        return hash(self.rank_lists)

    def __repr__(self) -> str:
        return f"ReplicaGroup({[list(ranks) for ranks in self.rank_lists]})"


def _group(replica_group, name: str) -> ReplicaGroup:
    if isinstance(replica_group, ReplicaGroup):
        return replica_group
    try:
        return ReplicaGroup(replica_group)
    except (TypeError, ValueError) as error:
        raise current().error(f"{name}: replica_group must be a ReplicaGroup (or its rank-lists): {error}") from None


def _pairs(srcs, dsts, name: str, hbm_only: bool, single: bool = False):
    srcs, dsts = list(srcs), list(dsts)
    if not srcs or len(srcs) != len(dsts) or not all(isinstance(v, View) for v in srcs + dsts):
        raise current().error(f"{name}: srcs and dsts must be lists of as many tensors, one dst per src")
    if single and len(srcs) != 1:
        raise current().error(f"{name}: takes exactly one src and one dst (no coalescing)")
    buffers = {v.buffer for v in srcs + dsts}
    if hbm_only and buffers != {"hbm"}:
        raise current().error(f"{name}: its tensors must be in HBM, not {sorted(buffers)}")
    if len(srcs) > 1 and buffers != {"hbm"}:
        raise current().error(f"{name}: several tensors at once (coalesced) must all be in HBM")
    return list(zip(srcs, dsts))


def _emit_collective(kind: int, dim: int, group: ReplicaGroup, pairs, op: str = "bypass") -> None:
    ranks = [float(r) for ranks in group.rank_lists for r in ranks]
    for src, dst in pairs:
        _emit("collective", "dma", dst, (src,), None, op0=op,
              coefficients=[kind, dim, len(group.rank_lists), group.size] + ranks)


def _reduction(op, name: str, pairs) -> str:
    alu = alu_of(op)
    if alu not in _REDUCTIONS:
        raise current().error(f"{name}: op must be nl.add, nl.maximum or nl.minimum, not {alu}")
    odd = sorted({v.dtype for pair in pairs for v in pair} - set(_REDUCED_DTYPES))
    if odd:
        raise current().error(f"{name}: reduces {', '.join(_REDUCED_DTYPES)} data, not {', '.join(odd)}")
    return alu


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None) -> None:
    """Each dst = op (nl.add, nl.maximum, nl.minimum) over its src on every rank of this rank's list."""
    pairs = _pairs(srcs, dsts, "all_reduce", False)
    _emit_collective(ALL_REDUCE, 0, _group(replica_group, "all_reduce"), pairs, _reduction(op, "all_reduce", pairs))


def all_gather(srcs, dsts, replica_group, collective_dim: int, priority=None, name=None) -> None:
    """Each dst = the srcs of this rank's list side by side along collective_dim, in list order (HBM: dim 0;
    SBUF: 2-D tiles, dim 0 or 1)."""
    pairs = _pairs(srcs, dsts, "all_gather", False)
    _check_dim("all_gather", collective_dim, pairs, sbuf_dims=(0, 1))
    _emit_collective(ALL_GATHER, collective_dim, _group(replica_group, "all_gather"), pairs)


def reduce_scatter(srcs, dsts, replica_group, collective_dim: int, op, priority=None, name=None) -> None:
    """Each dst = this rank's part (its place in its list, along dim 0) of op over the list's srcs."""
    pairs = _pairs(srcs, dsts, "reduce_scatter", False)
    _check_dim("reduce_scatter", collective_dim, pairs, sbuf_dims=(0,))
    _emit_collective(REDUCE_SCATTER, 0, _group(replica_group, "reduce_scatter"), pairs,
                     _reduction(op, "reduce_scatter", pairs))


def all_to_all(srcs, dsts, replica_group, collective_dim: int, priority=None, name=None) -> None:
    """Part j of each src (along dim 0) goes to the j-th rank of this rank's list; part j of dst comes from it."""
    pairs = _pairs(srcs, dsts, "all_to_all", True)
    _check_dim("all_to_all", collective_dim, pairs, sbuf_dims=())
    _emit_collective(ALL_TO_ALL, 0, _group(replica_group, "all_to_all"), pairs)


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None) -> None:
    """src of rank s goes to dst of rank t, for each (s, t); a rank no pair targets keeps its dst."""
    pairs = _pairs(srcs, dsts, "collective_permute", True, single=True)
    try:
        routes = [(int(s), int(t)) for s, t in source_target_pairs]
    except (TypeError, ValueError):
        raise current().error(f"collective_permute: source_target_pairs must be (source, target) rank pairs, not "
                              f"{source_target_pairs!r}") from None
    targets = [t for _, t in routes]
    if len(set(targets)) != len(targets) or len({s for s, _ in routes}) != len(routes) or \
            any(r < 0 for pair in routes for r in pair):
        raise current().error(f"collective_permute: {routes} sends twice from a rank or twice to one")
    coefficients = [PERMUTE, 0, len(routes), 2] + [float(r) for pair in routes for r in pair]
    src, dst = pairs[0]
    _emit("collective", "dma", dst, (src,), None, coefficients=coefficients)


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known: bool = False,
                 has_rdispls: bool = False, priority=None, name=None) -> None:
    """Chunks of lengths known as the kernel runs: src and dst as flat buffers, the uint32 metadata tensor
    [3 or 4, members] (HBM, or [1, rows, members] in SBUF) giving per member j of this rank's list the count
    (row 0) and src offset (row 1) of the chunk sent to j. Member s's chunk lands at s * (dst elements /
    members), or at row 3's offset with has_rdispls; row 2 gets the counts received unless recv_counts_known.
    dst elements no chunk reaches keep their values."""
    _variable("all_to_all_v", ALL_TO_ALL_V, srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
              has_rdispls)


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known: bool = False,
                 has_rdispls: bool = False, priority=None, name=None) -> None:
    """all_to_all_v with one chunk (column 0 of rows 0 and 1) sent to every member; as AWS's, on rank-lists of
    4 ranks and without receive offsets."""
    group = _gather_v_group("all_gather_v", replica_group, has_rdispls)
    _variable("all_gather_v", ALL_GATHER_V, srcs, dsts, group, metadata_tensor, recv_counts_known, False)


def _gather_v_group(what: str, replica_group, has_rdispls: bool) -> ReplicaGroup:
    if has_rdispls:
        raise current().error(f"{what}: has_rdispls=True is not supported (AWS's all_gather_v places each chunk in "
                              "its equal slot of dst)")
    group = _group(replica_group, what)
    if group.size != 4:
        raise current().error(f"{what} runs on rank-lists of 4 ranks (one chip at LNC=2, as AWS documents), not "
                              f"{group.size}")
    return group


class NkiInstruction:
    """What a collective's _prepare returns (SDK 2.34): the transfer its _trigger carries out, with the
    metadata as it was at the prepare."""

    def __init__(self, what: str, carry_out, where: str = ""):
        self.what, self._carry_out, self.triggered, self.where = what, carry_out, False, where

    def __repr__(self) -> str:
        return f"NkiInstruction({self.what}{', triggered' if self.triggered else ''})"


def all_to_all_v_prepare(srcs, dsts, replica_group, metadata_tensor, recv_counts_known: bool = False,
                         has_rdispls: bool = False, priority=None, name=None) -> NkiInstruction:
    """The first half of all_to_all_v: reads the metadata now; all_to_all_v_trigger moves the data."""
    return _prepare("all_to_all_v", ALL_TO_ALL_V, srcs, dsts, _group(replica_group, "all_to_all_v_prepare"),
                    metadata_tensor, recv_counts_known, has_rdispls)


def all_gather_v_prepare(srcs, dsts, replica_group, metadata_tensor, recv_counts_known: bool = False,
                         has_rdispls: bool = False, priority=None, name=None) -> NkiInstruction:
    """The first half of all_gather_v: reads the metadata now; all_gather_v_trigger moves the data."""
    group = _gather_v_group("all_gather_v_prepare", replica_group, has_rdispls)
    return _prepare("all_gather_v", ALL_GATHER_V, srcs, dsts, group, metadata_tensor, recv_counts_known, False)


def all_to_all_v_trigger(prepare_instr, name=None) -> NkiInstruction:
    return _trigger("all_to_all_v", prepare_instr)


def all_gather_v_trigger(prepare_instr, name=None) -> NkiInstruction:
    return _trigger("all_gather_v", prepare_instr)


def _prepare(what: str, kind: int, srcs, dsts, group, metadata, counts_known: bool, displaced: bool):
    from .language import ndarray
    trace = current()
    pending = trace.prepared_collective
    if pending is not None and not pending.triggered:
        raise trace.error(f"{what}_prepare: the {pending.what} prepared before has not been triggered (prepares "
                          "share one slot: each is followed by its trigger before the next)")
    if not isinstance(metadata, View):
        raise trace.error(f"{what}_prepare: metadata_tensor must be a uint32 tensor, not {type(metadata).__name__}")
    snapshot = ndarray(metadata.shape, metadata.dtype, "sbuf" if metadata.buffer == "sbuf" else "private_hbm")
    _emit("dma_copy", "dma", snapshot, (metadata,), None)

    def carry_out():
        _variable(what, kind, srcs, dsts, group, snapshot, counts_known, displaced)
        if not counts_known:  # the counts received go to the metadata the kernel gave
            rows = (slice(2, 3), slice(None)) if metadata.ndim == 2 else (slice(None), slice(2, 3), slice(None))
            _emit("dma_copy", "dma", metadata[rows], (snapshot[rows],), None)

    trace.prepared_collective = NkiInstruction(what, carry_out, trace.where())
    return trace.prepared_collective


def check_all_triggered(trace) -> None:
    """At the end of a trace: a prepare whose trigger never came would leave its transfer undone."""
    pending = trace.prepared_collective
    if pending is not None and not pending.triggered:
        raise NkiError(f"kernel '{trace.kernel}': the {pending.what}_prepare at {pending.where} was never "
                       f"triggered ({pending.what}_trigger moves the data)")


def _trigger(what: str, prepared) -> NkiInstruction:
    if not isinstance(prepared, NkiInstruction) or prepared.what != what:
        raise current().error(f"{what}_trigger takes what {what}_prepare returned, not {prepared!r}")
    if prepared.triggered:
        raise current().error(f"{what}_trigger: {prepared!r} was triggered already (one trigger per prepare)")
    prepared.triggered = True
    prepared._carry_out()
    return prepared


def _variable(name: str, kind: int, srcs, dsts, replica_group, metadata, counts_known: bool, displaced: bool):
    (src, dst), = _pairs(srcs, dsts, name, True, single=True)
    if not isinstance(metadata, View):
        raise current().error(f"{name}: metadata_tensor must be a uint32 tensor, not {type(metadata).__name__}")
    group = _group(replica_group, name)
    flags = (RECV_COUNTS_KNOWN if counts_known else 0) | (HAS_RECV_DISPLACEMENTS if displaced else 0)
    ranks = [float(r) for ranks in group.rank_lists for r in ranks]
    _emit("collective", "dma", dst, (src, metadata), None,
          coefficients=[kind, flags, len(group.rank_lists), group.size] + ranks)


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=(0,), priority=None,
                                name=None) -> None:
    """Around the ring of each rank-list: member i's src goes to member i + 1's dst (the last's to the first),
    on each channel (one src and one dst each, in HBM or SBUF, of one dtype and size)."""
    _ring("collective_permute_implicit", [srcs_by_channel], dsts_by_channel, replica_group, channel_ids)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op,
                                       channel_ids=(0,), priority=None, name=None) -> None:
    """collective_permute_implicit of op(srcs0, srcs1) (nl.add, nl.maximum, nl.minimum), element by element."""
    _ring("collective_permute_implicit_reduce", [srcs0_by_channel, srcs1_by_channel], dsts_by_channel,
          replica_group, channel_ids, op)


def _ring(what: str, sources_by_channel, dsts_by_channel, replica_group, channel_ids, op=None) -> None:
    sources, dsts = [list(s) for s in sources_by_channel], list(dsts_by_channel)
    channels = len(dsts)
    if not 1 <= channels <= _RING_CHANNELS or any(len(s) != channels for s in sources):
        raise current().error(f"{what}: the srcs and dsts list 1 to {_RING_CHANNELS} channels alike, not "
                              f"{[len(s) for s in sources]} and {channels}")
    if list(channel_ids) != list(range(channels)):
        raise current().error(f"{what}: channel_ids must be 0, 1, ... one per channel ({channels}), not "
                              f"{list(channel_ids)}")
    group = _group(replica_group, what)
    ranks = [float(r) for ranks in group.rank_lists for r in ranks]
    for channel in range(channels):
        operands = [list(s[channel]) for s in sources] + [list(dsts[channel])]
        if any(len(o) != 1 for o in operands):
            raise current().error(f"{what}: channel {channel} must hold exactly one tensor in each list")
        pairs = [p for s in sources for p in _pairs(s[channel], dsts[channel], what, False, single=True)]
        kind, alu = RING_PERMUTE, "bypass"
        if op is not None:
            kind, alu = RING_PERMUTE_REDUCE, _reduction(op, what, pairs)
        dst = pairs[0][1]
        _emit("collective", "dma", dst, [src for src, _ in pairs], None, op0=alu,
              coefficients=[kind, 0, len(group.rank_lists), group.size] + ranks)


def collective_permute_implicit_current_processing_rank_id(iteration_id: int, replica_group, channel_id: int = 0,
                                                           name=None):
    """The rank whose data this rank holds after `iteration_id` ring steps of collective_permute_implicit:
    its own at 0, then its predecessors' in its rank-list, in a register (an NkiScalar)."""
    from .device_loops import new_register
    from .device_scalars import NkiScalar
    what = "collective_permute_implicit_current_processing_rank_id"
    if isinstance(iteration_id, bool) or not isinstance(iteration_id, int) or iteration_id < 0:
        raise current().error(f"{what}: iteration_id must be a Python int >= 0 (a loop's counter as the kernel is "
                              f"traced), not {iteration_id!r}")
    if not 0 <= int(channel_id) < _RING_CHANNELS:
        raise current().error(f"{what}: channel_id {channel_id!r} is not a channel (0 to {_RING_CHANNELS - 1})")
    group = _group(replica_group, what)
    register = new_register(NkiScalar)
    ranks = [float(r) for ranks in group.rank_lists for r in ranks]
    _emit("collective", "dma", register.view(), (), None,
          coefficients=[RING_RANK_ID, iteration_id, len(group.rank_lists), group.size] + ranks)
    return register


def self_index_in_replica_group(replica_group, name=None):
    """This rank's place in its rank-list of replica_group, in a register (an NkiScalar), read as the kernel
    runs; a rank in no rank-list is an error then."""
    from .device_loops import new_register
    from .device_scalars import NkiScalar
    group = _group(replica_group, "self_index_in_replica_group")
    register = new_register(NkiScalar)
    ranks = [float(r) for ranks in group.rank_lists for r in ranks]
    _emit("collective", "dma", register.view(), (), None,
          coefficients=[GROUP_INDEX, 0, len(group.rank_lists), group.size] + ranks)
    return register


def rank_id(name=None):
    """This rank's id, in a register (an NkiScalar: an offset for .ap(scalar_offset=...), scalar_alu, ...)."""
    from .device_loops import new_register
    from .device_scalars import NkiScalar
    register = new_register(NkiScalar)
    _emit("collective", "dma", register.view(), (), None, coefficients=[RANK_ID, 0, 1, 1, 0])
    return register


def _check_dim(name: str, dim, pairs, sbuf_dims) -> None:
    on_chip = pairs[0][0].buffer != "hbm"
    allowed = sbuf_dims if on_chip else (0,)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim not in allowed:
        where = "SBUF" if on_chip else "HBM"
        raise current().error(f"{name}: collective_dim {dim!r} on {where} tensors; it takes {list(allowed)}")
    if on_chip and any(v.ndim != 2 for pair in pairs for v in pair):
        raise current().error(f"{name}: SBUF collectives take 2-D tiles (a partition and one free dim)")
