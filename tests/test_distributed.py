"""The "neuron" torch.distributed backend on 2 ranks of one host.

One launch of 2 ranks (torch.multiprocessing, TCP rendezvous without libuv, as
Debian's torch needs) runs every check below in order; each rank records each
check's outcome and the tests report them one by one. Each rank uses its own
core, neuron:rank. Every result is compared exactly with a reference computed
locally from all ranks' known inputs, in the same rank order as the backend.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from datetime import timedelta

import pytest
import torch

from dist_launch import SHM_DIR, free_port, save_results, shm_segments

WORLD = 2
LAUNCH_TIMEOUT = 120
# 1 MiB slots, so the larger tensors below take several steps.
CHILD_ENV = {"TORCH_NEURONX_DIST_SLOT_MB": "1"}
_BASELINE_SEGMENTS: set[str] = set()  # in a rank: the segments that existed before the launch
BIG = 300_007  # float32 elements: more than one slot, not a multiple of anything

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


# ---------------------------------------------------------------- references

def rank_input(rank: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """What `rank` contributes: distinct per rank, small enough not to overflow much, exact in every dtype."""
    base = torch.arange(n, dtype=torch.int64) % 13 + rank * 3 + 1
    if dtype == torch.bool:
        return (base + rank) % 3 == 0
    return base.to(dtype) if not dtype.is_floating_point else (base.to(torch.float32) / 4).to(dtype)


def meaningful(dtype: torch.dtype, op: str) -> bool:
    if op in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point
    return not (op == "AVG" and dtype == torch.bool)


def reference_reduce(inputs: list[torch.Tensor], op: str) -> torch.Tensor:
    acc = inputs[0].clone()
    for other in inputs[1:]:
        if op in ("SUM", "AVG"):
            acc.add_(other)
        elif op == "PRODUCT":
            acc.mul_(other)
        elif op == "MIN":
            torch.minimum(acc, other, out=acc)
        elif op == "MAX":
            torch.maximum(acc, other, out=acc)
        else:
            getattr(acc, {"BAND": "bitwise_and_", "BOR": "bitwise_or_", "BXOR": "bitwise_xor_"}[op])(other)
    if op == "AVG":
        acc = acc.div_(len(inputs)) if acc.is_floating_point() else acc.div_(len(inputs), rounding_mode="trunc")
    return acc


def assert_same(result: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert result.dtype == expected.dtype, f"{what}: dtype {result.dtype} != {expected.dtype}"
    assert torch.equal(result.cpu(), expected), f"{what}: got {result.cpu()[:8]}, expected {expected[:8]}"


# ---------------------------------------------------------------- checks (run on every rank)

def check_default_backend(rank, dev):
    """init_process_group() with no backend picks "neuron" when the accelerator is neuron."""
    import torch.distributed as dist

    from torch_neuronx._C import _NeuronBackend

    # torch names a group created without a backend "undefined" on every device
    # type; what matters is the backend that serves the accelerator.
    assert dist.get_backend() in ("undefined", "neuron"), dist.get_backend()
    assert dist.get_backend_config() == "neuron:neuron", dist.get_backend_config()
    assert isinstance(dist.group.WORLD._get_backend(dev), _NeuronBackend)
    t = torch.full((4,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    assert_same(t, torch.full((4,), 3.0), "all_reduce on the default group")


def check_segment_unlinked(rank, dev):
    """Once every rank has opened the segment its name is gone, so no exit can leave it behind."""
    import torch.distributed as dist

    dist.barrier()  # rank 0 unlinks just after the last rank attached; a barrier orders that
    leftovers = sorted(shm_segments() - _BASELINE_SEGMENTS)
    assert not leftovers, f"segments still linked after init: {leftovers}"


def check_broadcast(rank, dev):
    import torch.distributed as dist

    for root in range(WORLD):
        for n, dtype in ((BIG, torch.float32), (33, torch.uint8), (5, torch.int64), (0, torch.float32)):
            t = rank_input(rank, n, dtype).to(dev)
            dist.broadcast(t, src=root)
            assert_same(t, rank_input(root, n, dtype), f"broadcast from {root} of {n} {dtype}")


def check_all_reduce_ops(rank, dev):
    import torch.distributed as dist

    for dtype in DTYPES:
        for op in OPS:
            if not meaningful(dtype, op):
                continue
            t = rank_input(rank, 37, dtype).to(dev)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            expected = reference_reduce([rank_input(r, 37, dtype) for r in range(WORLD)], op)
            assert_same(t, expected, f"all_reduce {op} {dtype}")


def check_all_reduce_large_and_strided(rank, dev):
    import torch.distributed as dist

    t = rank_input(rank, BIG, torch.float32).to(dev)
    dist.all_reduce(t)
    assert_same(t, reference_reduce([rank_input(r, BIG, torch.float32) for r in range(WORLD)], "SUM"), "large")
    # Large tensors take the sliced algorithm (each rank reduces a slice); every op and several chunks.
    for op, dtype in (("AVG", torch.float32), ("MAX", torch.bfloat16), ("PRODUCT", torch.int64), ("BXOR", torch.int32),
                      ("MIN", torch.bool)):
        t = rank_input(rank, BIG, dtype).to(dev)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        assert_same(t, reference_reduce([rank_input(r, BIG, dtype) for r in range(WORLD)], op), f"large {op} {dtype}")
    # A non-contiguous view (a transposed matrix) is reduced in place.
    base = rank_input(rank, 64 * 48, torch.bfloat16).view(64, 48)
    view = base.to(dev).t()
    dist.all_reduce(view, op=dist.ReduceOp.MAX)
    expected = reference_reduce([rank_input(r, 64 * 48, torch.bfloat16).view(64, 48).t() for r in range(WORLD)], "MAX")
    assert not view.is_contiguous()
    assert_same(view, expected, "transposed all_reduce")


def check_cpu_tensors(rank, dev):
    import torch.distributed as dist

    t = rank_input(rank, 1000, torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert_same(t, reference_reduce([rank_input(r, 1000, torch.int64) for r in range(WORLD)], "MAX"), "cpu all_reduce")
    objects = [None] * WORLD
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(WORLD)], objects


def check_all_reduce_coalesced(rank, dev):
    import torch.distributed as dist

    tensors = [rank_input(rank, n, torch.float32).to(dev) for n in (3, 1000, BIG)]
    dist.all_reduce_coalesced(tensors)
    for n, t in zip((3, 1000, BIG), tensors):
        assert_same(t, reference_reduce([rank_input(r, n, torch.float32) for r in range(WORLD)], "SUM"), f"coalesced {n}")


def check_all_gather(rank, dev):
    import torch.distributed as dist

    for n, dtype in ((BIG, torch.float32), (17, torch.bfloat16), (9, torch.bool)):
        x = rank_input(rank, n, dtype).to(dev)
        outputs = [torch.empty_like(x) for _ in range(WORLD)]
        outputs[rank] = x  # transformers' tensor parallelism aliases its own slot
        dist.all_gather(outputs, x)
        for r in range(WORLD):
            assert_same(outputs[r], rank_input(r, n, dtype), f"all_gather {dtype} from {r}")
    # Non-contiguous outputs: columns of a wider tensor.
    wide = torch.zeros(8, 2 * WORLD, device=dev)
    dist.all_gather(list(wide.chunk(WORLD, dim=1)), torch.full((8, 2), float(rank), device=dev))
    expected = torch.cat([torch.full((8, 2), float(r)) for r in range(WORLD)], dim=1)
    assert_same(wide, expected, "all_gather into column chunks")


def check_all_gather_into_tensor(rank, dev):
    import torch.distributed as dist

    x = rank_input(rank, BIG, torch.float32).to(dev)
    out = torch.empty(WORLD * BIG, device=dev)
    dist.all_gather_into_tensor(out, x)
    assert_same(out, torch.cat([rank_input(r, BIG, torch.float32) for r in range(WORLD)]), "all_gather_into_tensor")


def check_reduce_scatter(rank, dev):
    import torch.distributed as dist

    full = [rank_input(r, 6 * WORLD * 5, torch.float32).view(6, WORLD * 5) for r in range(WORLD)]
    out = torch.empty(6, 5, device=dev)
    # Non-contiguous inputs, as transformers' tensor parallelism passes them.
    dist.reduce_scatter(out, list(full[rank].to(dev).chunk(WORLD, dim=-1)))
    expected = reference_reduce([f.chunk(WORLD, dim=-1)[rank] for f in full], "SUM")
    assert_same(out, expected.contiguous(), "reduce_scatter of column chunks")
    for op, dtype in (("MAX", torch.int32), ("AVG", torch.bfloat16), ("BXOR", torch.uint8)):
        ins = [rank_input(rank, 11, dtype).to(dev) for _ in range(WORLD)]
        out = torch.empty(11, dtype=dtype, device=dev)
        dist.reduce_scatter(out, ins, op=getattr(dist.ReduceOp, op))
        assert_same(out, reference_reduce([rank_input(r, 11, dtype) for r in range(WORLD)], op), f"reduce_scatter {op}")


def check_reduce_scatter_tensor(rank, dev):
    import torch.distributed as dist

    inputs = [rank_input(r, WORLD * BIG, torch.float32) for r in range(WORLD)]
    out = torch.empty(BIG, device=dev)
    dist.reduce_scatter_tensor(out, inputs[rank].to(dev))
    expected = reference_reduce([i[rank * BIG:(rank + 1) * BIG] for i in inputs], "SUM")
    assert_same(out, expected, "reduce_scatter_tensor")


def check_barrier_and_future(rank, dev):
    import torch.distributed as dist

    dist.barrier()
    t = torch.ones(3, device=dev) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed() and work.is_success()
    # DDP communication hooks chain on the future's value: the output tensors.
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2).wait()
    assert_same(doubled, torch.full((3,), 6.0), "future value")


def check_async_overlap(rank, dev):
    """async_op=True returns at once: the caller works on while a peer is late, and wait() gives the result."""
    import torch.distributed as dist

    dist.barrier()
    t = torch.full((1000,), float(rank + 1), device=dev)
    if rank == 1:
        time.sleep(1.0)  # rank 0's all_reduce cannot finish before this
    work = dist.all_reduce(t, async_op=True)
    if rank == 0:
        assert not work.is_completed(), "an async all_reduce completed before its peer joined"
        assert (torch.ones(4, device=dev) * 3).sum().item() == 12  # device work meanwhile
    assert work.wait()
    assert work.is_completed() and work.is_success()
    assert_same(t, torch.full((1000,), 3.0), "async all_reduce")


def check_async_in_order(rank, dev):
    """Collectives in flight complete in the order they were issued: waiting on the last waits for all."""
    import torch.distributed as dist

    big = rank_input(rank, BIG, torch.float32).to(dev)
    small = torch.arange(10, device=dev) + 100 * rank
    peak = torch.tensor([rank * 7.0], device=dev)
    works = [dist.all_reduce(big, async_op=True), dist.broadcast(small, src=1, async_op=True),
             dist.all_reduce(peak, op=dist.ReduceOp.MAX, async_op=True)]
    works[-1].wait()
    assert all(w.is_completed() for w in works), "a later collective completed before an earlier one"
    assert_same(big, reference_reduce([rank_input(r, BIG, torch.float32) for r in range(WORLD)], "SUM"), "first")
    assert_same(small, torch.arange(10) + 100, "second")
    assert_same(peak, torch.tensor([7.0 * (WORLD - 1)]), "third")


def check_premul_sum(rank, dev):
    """ReduceOp.PREMUL_SUM (FSDP2's gradient divide factor): sum of inputs scaled first; inputs stay unchanged."""
    import torch.distributed as dist

    inputs = [rank_input(r, 1000, torch.float32) for r in range(WORLD)]
    t = inputs[rank].to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.PREMUL_SUM(0.25))
    assert_same(t, reference_reduce([x * 0.25 for x in inputs], "SUM"), "all_reduce PREMUL_SUM")

    factor = torch.tensor(0.5, device=dev)  # a tensor factor, as NCCL also takes
    full = [rank_input(r, 200 * WORLD, torch.float32) for r in range(WORLD)]
    source = full[rank].to(dev)
    out = torch.empty(200, device=dev)
    dist.reduce_scatter_tensor(out, source, op=dist.ReduceOp.PREMUL_SUM(factor))
    expected = reference_reduce([x * 0.5 for x in full], "SUM")[rank * 200:(rank + 1) * 200]
    assert_same(out, expected, "reduce_scatter_tensor PREMUL_SUM")
    assert_same(source, full[rank], "reduce_scatter_tensor input after PREMUL_SUM")

    kept = inputs[rank].to(dev)
    dist.reduce(kept, dst=0, op=dist.ReduceOp.PREMUL_SUM(0.25))
    assert_same(kept, reference_reduce([x * 0.25 for x in inputs], "SUM") if rank == 0 else inputs[rank], "reduce")
    with pytest.raises(RuntimeError, match="PREMUL_SUM needs floating-point tensors"):
        dist.all_reduce(torch.ones(2, dtype=torch.int64, device=dev), op=dist.ReduceOp.PREMUL_SUM(2.0))


def check_mismatch_raises(rank, dev):
    """Different sizes on different ranks: the same clear error on every rank, and the group stays usable."""
    import torch.distributed as dist

    t = torch.ones(10 + rank, device=dev)
    with pytest.raises(RuntimeError, match=r"(?s)mismatched collectives.*rank 0: all_reduce of 10 Float.*rank 1: "
                                           r"all_reduce of 11 Float"):
        dist.all_reduce(t)
    with pytest.raises(RuntimeError, match="BAND needs an integer or bool tensor"):
        dist.all_reduce(torch.ones(2, device=dev), op=dist.ReduceOp.BAND)
    # Bad arguments on one rank only: it raises at the call, and the other raises at once, not at the timeout.
    start = time.monotonic()
    outs = [torch.empty(3, device=dev) for _ in range(WORLD - (1 if rank == 0 else 0))]
    message = "all_gather: expected 2 output tensors, got 1"
    if rank == 1:
        message = "rank 0 raised in its all_gather instead of joining this all_gather: " + message
    with pytest.raises(RuntimeError, match=message):
        dist.all_gather(outs, torch.ones(3, device=dev))
    assert time.monotonic() - start < 30, "the peer of a rank with bad arguments waited for the timeout (60 s)"
    # An async collective raises at wait(), not at the call.
    work = dist.all_reduce(torch.ones(5 + rank, device=dev), async_op=True)
    with pytest.raises(RuntimeError, match="mismatched collectives"):
        work.wait()
    assert work.is_completed() and not work.is_success()
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    assert_same(t, torch.full((4,), 2.0), "all_reduce after a mismatch")


def check_missing_rank_times_out(rank, dev):
    """Rank 1 never joins an all_reduce: rank 0 raises within the group's timeout, naming rank 1."""
    import torch.distributed as dist

    group = dist.new_group(timeout=timedelta(seconds=3))
    dist.barrier()
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match=r"all_reduce timed out after 3000 ms.*waited for rank 1"):
            dist.all_reduce(torch.ones(4, device=dev), group=group)
        elapsed = time.monotonic() - start
        assert 2.5 < elapsed < 8, elapsed
        with pytest.raises(dist.DistBackendError, match="unusable after an earlier failure"):
            dist.all_reduce(torch.ones(4, device=dev), group=group)
    dist.barrier()  # rank 1 waits here, alive, until rank 0 is done


def check_dead_rank_detected(rank, dev):
    """Rank 1 exits without leaving the group (see _worker): rank 0 raises long before the 30 s timeout."""
    import torch.distributed as dist

    group = dist.new_group(timeout=timedelta(seconds=30))
    dist.barrier(group=group)
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match=r"all_reduce failed: rank 1 \(pid \d+\) exited"):
            dist.all_reduce(torch.ones(4, device=dev), group=group)
        assert time.monotonic() - start < 10


def check_reduce(rank, dev):
    import torch.distributed as dist

    for root in range(WORLD):
        for n, dtype, op in ((BIG, torch.float32, "SUM"), (37, torch.int32, "MAX"), (19, torch.bfloat16, "AVG")):
            t = rank_input(rank, n, dtype).to(dev)
            dist.reduce(t, dst=root, op=getattr(dist.ReduceOp, op))
            expected = reference_reduce([rank_input(r, n, dtype) for r in range(WORLD)], op)
            # The root gets the result; the others keep their input, as with NCCL and Gloo.
            assert_same(t, expected if rank == root else rank_input(rank, n, dtype), f"reduce {op} to {root}")


def check_gather(rank, dev):
    import torch.distributed as dist

    for root in range(WORLD):
        x = rank_input(rank, BIG, torch.float32).to(dev)
        outputs = [torch.empty_like(x) for _ in range(WORLD)] if rank == root else None
        dist.gather(x, outputs, dst=root)
        if rank == root:
            for r in range(WORLD):
                assert_same(outputs[r], rank_input(r, BIG, torch.float32), f"gather to {root} from {r}")
        x = rank_input(rank, 10, torch.int64).to(dev)
        out = torch.empty(WORLD * 10, dtype=torch.int64, device=dev) if rank == root else None
        dist.gather_single(x, out, dst=root)
        if rank == root:
            assert_same(out, torch.cat([rank_input(r, 10, torch.int64) for r in range(WORLD)]), "gather_single")


def check_scatter(rank, dev):
    import torch.distributed as dist

    for root in range(WORLD):
        for n, dtype in ((BIG, torch.float32), (7, torch.uint8)):
            inputs = [rank_input(r + 5, n, dtype).to(dev) for r in range(WORLD)] if rank == root else None
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.scatter(out, inputs, src=root)
            assert_same(out, rank_input(rank + 5, n, dtype), f"scatter {dtype} from {root}")


def a2a_piece(src: int, dst: int, rows: int, cols: int, dtype=torch.float32) -> torch.Tensor:
    """What rank src sends rank dst in the all_to_all checks: distinct per pair."""
    return (rank_input(src * 7 + dst, rows * cols, torch.int64) + 100 * src + 10 * dst).to(dtype).view(rows, cols)


def check_all_to_all_single(rank, dev):
    import torch.distributed as dist

    # Equal splits, large enough for several steps.
    rows = BIG // 3
    x = torch.cat([a2a_piece(rank, d, rows, 3) for d in range(WORLD)]).to(dev)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    assert_same(out, torch.cat([a2a_piece(s, rank, rows, 3) for s in range(WORLD)]), "all_to_all_single even")
    # Uneven split sizes (rows of the first dimension), one of them empty.
    sends = lambda s, d: (s + 1) * 3 + d * 5 if (s, d) != (1, 0) else 0  # noqa: E731
    x = torch.cat([a2a_piece(rank, d, sends(rank, d), 4, torch.int64) for d in range(WORLD)]).to(dev)
    out = torch.empty(sum(sends(s, rank) for s in range(WORLD)), 4, dtype=torch.int64, device=dev)
    dist.all_to_all_single(out, x, output_split_sizes=[sends(s, rank) for s in range(WORLD)],
                           input_split_sizes=[sends(rank, d) for d in range(WORLD)])
    expected = torch.cat([a2a_piece(s, rank, sends(s, rank), 4, torch.int64) for s in range(WORLD)])
    assert_same(out, expected, "all_to_all_single with split sizes")


def check_all_to_all_list(rank, dev):
    import torch.distributed as dist

    sizes = lambda s, d: 1000 * (s + 1) + 300_000 * d  # noqa: E731  pieces of different lengths
    inputs = [a2a_piece(rank, d, sizes(rank, d), 1).flatten().to(dev) for d in range(WORLD)]
    outputs = [torch.empty(sizes(s, rank), device=dev) for s in range(WORLD)]
    dist.all_to_all(outputs, inputs)
    for s in range(WORLD):
        assert_same(outputs[s], a2a_piece(s, rank, sizes(s, rank), 1).flatten(), f"all_to_all from {s}")


def check_all_to_all_mismatch_raises(rank, dev):
    """Split sizes that disagree between ranks: the same error on every rank, and the group stays usable."""
    import torch.distributed as dist

    x = torch.zeros(4, device=dev)
    out = torch.empty(4, device=dev)
    splits = [2, 2] if rank == 0 else [1, 3]
    with pytest.raises(RuntimeError, match=r"(?s)split sizes disagree.*rank 0 sends 2 elements to rank 1, which "
                                           r"expects 1"):
        dist.all_to_all_single(out, x, output_split_sizes=splits, input_split_sizes=splits)
    dist.all_to_all_single(out, torch.full((4,), float(rank), device=dev))
    assert_same(out, torch.tensor([0.0, 0.0, 1.0, 1.0]), "all_to_all_single after a mismatch")


def check_coalesced_single_tensor(rank, dev):
    """allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced, as FSDP2 and coalescing managers call them."""
    import torch.distributed as dist

    sizes = (5, BIG, 0)
    ins = [rank_input(rank, n, torch.float32).to(dev) for n in sizes]
    outs = [torch.empty(WORLD * n, device=dev) for n in sizes]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for n, o in zip(sizes, outs):
        assert_same(o, torch.cat([rank_input(r, n, torch.float32) for r in range(WORLD)]), f"coalesced gather {n}")
    full = [[rank_input(r, WORLD * n, torch.float32) for n in sizes] for r in range(WORLD)]
    outs = [torch.empty(n, device=dev) for n in sizes]
    with dist._coalescing_manager():
        for o, f in zip(outs, full[rank]):
            dist.reduce_scatter_tensor(o, f.to(dev))
    for k, (n, o) in enumerate(zip(sizes, outs)):
        expected = reference_reduce([full[r][k][rank * n:(rank + 1) * n] for r in range(WORLD)], "SUM")
        assert_same(o, expected, f"coalesced reduce_scatter {n}")


def check_send_recv(rank, dev):
    import torch.distributed as dist

    peer = 1 - rank
    # Tags out of order: rank 0 sends tags 1, 2, 3; rank 1 receives 3, 1, 2.
    if rank == 0:
        for tag in (1, 2, 3):
            dist.send(rank_input(tag, 50, torch.int64).to(dev), dst=1, tag=tag)
    else:
        for tag in (3, 1, 2):
            t = torch.empty(50, dtype=torch.int64, device=dev)
            dist.recv(t, src=0, tag=tag)
            assert_same(t, rank_input(tag, 50, torch.int64), f"recv tag {tag}")
    # Both ranks send a message larger than the channel before receiving (a deadlock without draining).
    dist.send(rank_input(rank, 3 * BIG, torch.float32).to(dev), dst=peer)
    t = torch.empty(3 * BIG, device=dev)
    dist.recv(t, src=peer)
    assert_same(t, rank_input(peer, 3 * BIG, torch.float32), "large exchange")
    # batch_isend_irecv (run op by op on this backend), with a non-contiguous tensor and an empty one.
    got, empty = torch.empty(6, 4, device=dev).t(), torch.empty(0, device=dev)
    ops = [dist.P2POp(dist.isend, rank_input(rank, 24, torch.float32).view(4, 6).to(dev), peer),
           dist.P2POp(dist.irecv, got, peer),
           dist.P2POp(dist.isend, torch.empty(0, device=dev), peer), dist.P2POp(dist.irecv, empty, peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert_same(got, rank_input(peer, 24, torch.float32).view(4, 6), "batch_isend_irecv")
    # recv from any source returns the sender's rank.
    if rank == 1:
        dist.send(torch.full((3,), 7.0, device=dev), dst=0, tag=4)
    else:
        t = torch.empty(3, device=dev)
        assert dist.recv(t, tag=4) == 1
        assert_same(t, torch.full((3,), 7.0), "recv from any source")
    # A recv whose tensor does not fit the message raises; the message stays for a recv that fits.
    if rank == 0:
        dist.send(torch.ones(5, device=dev), dst=1, tag=6)
    else:
        with pytest.raises(RuntimeError, match=r"rank 0 sent 5 Float elements with tag 6, but the recv tensor has 4"):
            dist.recv(torch.empty(4, device=dev), src=0, tag=6)
        t = torch.empty(5, device=dev)
        dist.recv(t, src=0, tag=6)
        assert_same(t, torch.ones(5), "recv after a mismatch")
    dist.barrier()


def check_recv_times_out(rank, dev):
    """A recv whose message never comes raises within the group's timeout, naming the rank and tag."""
    import torch.distributed as dist

    group = dist.new_group(timeout=timedelta(seconds=2))
    dist.barrier()
    if rank == 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError, match=r"recv timed out after 2000 ms.*waited for rank 1 to send a "
                                                        r"message with tag 9"):
            dist.recv(torch.empty(2, device=dev), src=1, tag=9, group=group)
        assert 1.5 < time.monotonic() - start < 6
    dist.barrier()


# ---------------------------------------------------------------- DDP

def _ddp_model(unused: bool) -> torch.nn.Module:
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, 4)
            self.unused = torch.nn.Linear(16, 4) if unused else None

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    return Net()


def _check_ddp(rank, dev, hook=None, unused=False, steps=4, batch=6):
    """DDP over the neuron backend, one data shard per rank, matches single-process training on the whole batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    world = dist.get_world_size()
    torch.manual_seed(1)
    reference = _ddp_model(unused)
    model = _ddp_model(unused)
    model.load_state_dict(reference.state_dict())
    ddp = DDP(model.to(dev), find_unused_parameters=unused)
    if hook is not None:
        ddp.register_comm_hook(state=None, hook=hook)
    data = torch.randn(steps, world * batch, 8)
    target = torch.randn(steps, world * batch, 4)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    shard = slice(rank * batch, (rank + 1) * batch)
    for step in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(data[step, shard].to(dev)), target[step, shard].to(dev)).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(data[step]), target[step]).backward()
        ref_opt.step()
    for (name, p), ref in zip(ddp.module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().flatten() for p in ddp.module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(g.cpu(), gathered[0].cpu()) for g in gathered), "ranks' parameters differ"


def check_ddp(rank, dev):
    _check_ddp(rank, dev)


def check_ddp_comm_hook(rank, dev):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    _check_ddp(rank, dev, hook=default_hooks.allreduce_hook)


def check_ddp_find_unused_parameters(rank, dev):
    _check_ddp(rank, dev, unused=True)


CHECKS = [check_broadcast, check_all_reduce_ops, check_all_reduce_large_and_strided, check_cpu_tensors,
          check_all_reduce_coalesced, check_all_gather, check_all_gather_into_tensor, check_reduce_scatter,
          check_reduce_scatter_tensor, check_barrier_and_future, check_async_overlap, check_async_in_order,
          check_premul_sum, check_mismatch_raises, check_reduce, check_gather,
          check_scatter, check_all_to_all_single, check_all_to_all_list, check_all_to_all_mismatch_raises,
          check_coalesced_single_tensor, check_send_recv, check_recv_times_out, check_ddp, check_ddp_comm_hook,
          check_ddp_find_unused_parameters, check_missing_rank_times_out]


# ---------------------------------------------------------------- the launch

def _record(results: dict, check) -> None:
    try:
        check(results["rank"], results["device"])
        results[check.__name__] = "ok"
    except BaseException:  # noqa: BLE001  recorded for the parent's report
        results[check.__name__] = traceback.format_exc()


def _worker(rank: int, ports: list[int], out_dir: str, segments_before: list[str]) -> None:
    import torch.distributed as dist

    _BASELINE_SEGMENTS.update(segments_before)

    torch.neuron.set_device(rank)
    dev = torch.device("neuron", rank)
    results = {"rank": rank, "device": dev}
    try:
        # No backend: torch picks the one registered for the neuron accelerator.
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{ports[0]}?use_libuv=0", rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60))
        for check in (check_default_backend, check_segment_unlinked):
            _record(results, check)
        dist.destroy_process_group()
        dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{ports[1]}?use_libuv=0", rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60))
        for check in CHECKS:
            _record(results, check)
        _record(results, check_dead_rank_detected)
        if rank == 1:  # dies abruptly: no destroy, no exit handlers, as a crash would
            save_results(results, out_dir)
            os._exit(0)
        dist.destroy_process_group()
    finally:
        save_results(results, out_dir)


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    """Runs the 2 ranks once; returns each rank's results and the /dev/shm segments before and after."""
    import torch.multiprocessing as mp

    out_dir = str(tmp_path_factory.mktemp("ranks"))
    before = shm_segments()
    saved = {k: os.environ.get(k) for k in CHILD_ENV}
    os.environ.update(CHILD_ENV)  # spawned children inherit the environment
    try:
        context = mp.start_processes(_worker, args=([free_port(), free_port()], out_dir, sorted(before)), nprocs=WORLD,
                                     join=False, start_method="spawn")
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for p in context.processes:
                    p.kill()
                pytest.fail(f"the ranks did not finish within {LAUNCH_TIMEOUT} s")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    results = []
    for rank in range(WORLD):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as f:
            results.append(json.load(f))
    return results, before, shm_segments()


@pytest.mark.parametrize("check", ["check_default_backend", "check_segment_unlinked"] + [c.__name__ for c in CHECKS]
                         + ["check_dead_rank_detected"])
def test_collective(launch, check):
    results, _, _ = launch
    failures = {r["rank"]: r.get(check, "not run") for r in results if r.get(check) != "ok"}
    assert not failures, "\n".join(f"rank {rank}:\n{text}" for rank, text in failures.items())


def test_no_segment_left_behind(launch):
    _, before, after = launch
    assert after <= before, f"new shared-memory segments left in {SHM_DIR}: {sorted(after - before)}"
