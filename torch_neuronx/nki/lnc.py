"""nki.lnc: what the two physical NeuronCores of a logical one (LNC=2 on trn2/trn3) say to each other:
nki.lnc.sendrecv, sendrecv_compute and core_barrier. The nki.isa names of these are AWS's deprecated
wrappers (isa.py).

The emulator traces a launch's instances one after another, so a kernel's two cores are its two grid
instances (`kernel[2]`, or `kernel[nl.nc(2)]`): rank 0 and rank 1. Each collective call is recorded where
it happens; once both instances are traced, `interleave` orders the program so that both cores have done
everything before their Nth collective when it runs (AWS pairs them by program order): rank 0's part, rank
1's part, the exchange, and so on. A barrier is that order and nothing more. Unmatched collectives (a
deadlock on the hardware) and collectives inside a device loop or branch are refused while tracing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from .trace import View, current

_REDUCTIONS = ("add", "maximum", "minimum")


@dataclass
class Collective:
    kind: str
    instance: int
    at: int  # the rank's instructions before it: trace.instructions[:at]
    line: int
    views: dict = field(default_factory=dict)
    op: str = ""


def _rank(kind: str) -> int:
    trace = current()
    if trace.version < 3:
        raise trace.error(f"{kind} runs on NeuronCore-v3 (trn2) and newer; the kernel is checked for "
                          f"NeuronCore-v{trace.version}")
    instances = 1
    for g in trace.grid:
        instances *= g
    if instances != 2:
        raise trace.error(f"{kind}: the two physical cores of a logical NeuronCore are a launch of two instances "
                          f"here (kernel[2] or kernel[nl.nc(2)]), not a grid of {list(trace.grid) or [1]}")
    if trace.sequencer_depth:
        raise trace.error(f"{kind} inside a device loop or an nl.if_else side is not emulated: call it at the "
                          "kernel's top level (Python loops are fine)")
    return trace.grid_instance


def _record(kind: str, views: dict, op: str = "") -> None:
    trace = current()
    trace.collectives.append(Collective(kind, trace.grid_instance, len(trace.instructions), trace.line(),
                                        views, op))


def _peer(kind: str, rank: int, send_to_rank, recv_from_rank) -> None:
    peer = 1 - rank
    if send_to_rank != peer or recv_from_rank != peer:
        raise current().error(f"{kind} on rank {rank}: send_to_rank and recv_from_rank must be the other core "
                              f"({peer}) of the logical NeuronCore, not {send_to_rank} and {recv_from_rank}")


def _pair_of_tiles(kind: str, src: View, dst: View, memories) -> None:
    trace = current()
    for role, view in (("src", src), ("dst", dst)):
        if not isinstance(view, View):
            raise trace.error(f"{kind}'s {role} must be a tensor, not {type(view).__name__}")
        private = view.buffer != "hbm" or view.decl.argument < 0
        if view.buffer not in memories or not private:
            raise trace.error(f"{kind}'s {role} must be in {' or private '.join(m.upper() for m in memories)}, not "
                              f"{'shared ' if not private else ''}{view.buffer.upper()}")
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise trace.error(f"{kind}: src {list(src.shape)} {src.dtype} and dst {list(dst.shape)} {dst.dtype} must "
                          "have one shape and dtype")
    if src.buffer != dst.buffer:
        raise trace.error(f"{kind}: src and dst must be in one memory, not {src.buffer.upper()} and "
                          f"{dst.buffer.upper()}")


def sendrecv(src: View, dst: View, send_to_rank, recv_from_rank, dma_engine=None, name=None, priority=None,
             **_) -> None:
    """This core's src goes to the other core's dst while the other's src comes into this core's dst."""
    rank = _rank("sendrecv")
    _peer("sendrecv", rank, send_to_rank, recv_from_rank)
    _pair_of_tiles("sendrecv", src, dst, ("sbuf", "hbm"))
    _record("sendrecv", {"src": src, "dst": dst})


def sendrecv_compute(src: View, dst: View, send_to_rank, recv_from_rank, reduce_op, name=None, priority=None,
                     **_) -> None:
    """dst = reduce_op(this core's src, the other core's src), on both cores (nl.add, maximum, minimum)."""
    from .isa import alu_of
    rank = _rank("sendrecv_compute")
    _peer("sendrecv_compute", rank, send_to_rank, recv_from_rank)
    _pair_of_tiles("sendrecv_compute", src, dst, ("sbuf",))
    op = alu_of(reduce_op)
    if op not in _REDUCTIONS:
        raise current().error(f"sendrecv_compute reduces with nl.add, nl.maximum or nl.minimum, not {op}")
    _record("sendrecv_compute", {"src": src, "dst": dst}, op)


def core_barrier(data: View, cores=(0, 1), engine=None, name=None, **_) -> None:
    """Neither core goes on before both reach the barrier (the writes to `data` before it are seen after)."""
    _rank("core_barrier")
    trace = current()
    if tuple(cores) != (0, 1):
        raise trace.error(f"core_barrier synchronises cores=(0, 1), the two of a logical NeuronCore, not {cores!r}")
    if not isinstance(data, View) or data.buffer != "hbm" or data.decl.argument < 0:
        raise trace.error("core_barrier's data must be a tensor in shared HBM (an argument or nl.shared_hbm)")
    _record("core_barrier", {})


# ---- ordering the traced program -------------------------------------------------------------------------

def _instance_range(trace, instance: int):
    indices = [i for i, ins in enumerate(trace.instructions) if ins["grid_instance"] == instance]
    if not indices:
        return 0, 0
    return indices[0], indices[-1] + 1


def _moved_jumps(instruction: dict, old_start: int, new_start: int) -> dict:
    """An instruction of a segment that moved from old_start to new_start: its device-loop and branch
    indices follow it (they stay within the segment)."""
    slot = {"loop_begin": 1, "loop_end": 1, "branch": 0}.get(instruction["name"])
    if slot is not None and old_start != new_start:
        instruction = dict(instruction, coefficients=list(instruction["coefficients"]))
        instruction["coefficients"][slot] += new_start - old_start
    return instruction


def _exchange(trace, pair: List[Collective]) -> None:
    """The instructions of one matched collective, for both ranks; the peer's data is received into a tile
    of its own first, so that a dst that is also a src is read before it is written."""
    from .language import _emit, ndarray
    from .isa import tensor_tensor
    if pair[0].kind == "core_barrier":
        return
    received = []
    for rank in (0, 1):
        trace.grid_instance = rank
        peer = pair[1 - rank].views["src"]
        staged = ndarray(peer.shape, peer.dtype, buffer="private_hbm" if peer.buffer == "hbm" else "sbuf")
        _emit("dma_copy", "dma", staged, (peer,), None)
        received.append(staged)
    for rank in (0, 1):
        trace.grid_instance = rank
        mine = pair[rank].views
        if pair[rank].kind == "sendrecv":
            _emit("dma_copy", "dma", mine["dst"], (received[rank],), None)
        else:
            tensor_tensor(mine["dst"], mine["src"], received[rank], op=pair[rank].op)


def interleave(trace) -> None:
    """Orders a two-core trace around its collectives (see the module's doc); nothing to do without them."""
    calls = trace.collectives
    if not calls:
        return
    by_rank = [[c for c in calls if c.instance == rank] for rank in (0, 1)]
    kinds = [[c.kind for c in calls_of] for calls_of in by_rank]
    if kinds[0] != kinds[1]:
        raise trace.error(f"the two cores' collectives do not pair up (rank 0: {kinds[0]}, rank 1: {kinds[1]}): "
                          "on the hardware the core that waits for a partner never goes on")
    ranges = [_instance_range(trace, rank) for rank in (0, 1)]
    if ranges[0][1] > ranges[1][0] or ranges[0][1] - ranges[0][0] + ranges[1][1] - ranges[1][0] != \
            len(trace.instructions):
        raise AssertionError("the tracer ran the two instances interleaved")  # it traces them in turn
    cuts = [[ranges[r][0]] + [max(c.at, ranges[r][0]) for c in by_rank[r]] + [ranges[r][1]] for r in (0, 1)]
    old, trace.instructions = trace.instructions, []
    for k in range(len(by_rank[0]) + 1):
        for rank in (0, 1):
            first, end = cuts[rank][k], cuts[rank][k + 1]
            start = len(trace.instructions)
            trace.instructions.extend(_moved_jumps(ins, first, start) for ins in old[first:end])
        if k < len(by_rank[0]):
            emitted = len(trace.instructions)
            _exchange(trace, [by_rank[0][k], by_rank[1][k]])
            for ins in trace.instructions[emitted:]:
                ins["line"] = by_rank[ins["grid_instance"]][k].line
    trace.grid_instance = 1
