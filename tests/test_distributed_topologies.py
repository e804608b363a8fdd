"""The "neuron" backend on 4 ranks: all on one host, and split over two hosts.

Two launches of 4 ranks (torch.multiprocessing, TCP rendezvous without libuv):

- one host: every rank on this machine, as in test_distributed.py but with 4
  ranks, so reductions combine more than two contributions and roots and
  peers other than 0 and 1 take part;
- two hosts: ranks 0-1 and 2-3 name different hosts (TORCH_NEURONX_DIST_HOST,
  what the backend otherwise reads from the host name), so the group is a
  MultiHostBackend: shared memory within each pair, Gloo between them.

The checks are the same on both layouts, each against a reference computed
locally from every rank's known inputs. Inputs are small multiples of 1/4, so
sums and products are exact in any order (the two layouts combine ranks in
different orders).
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
from test_distributed import BIG, _check_ddp, a2a_piece, assert_same, rank_input, reference_reduce

WORLD = 4
LAUNCH_TIMEOUT = 180
LAYOUTS = {"one_host": ["h0"] * 4, "two_hosts": ["h0", "h0", "h1", "h1"]}
CHILD_ENV = {"TORCH_NEURONX_DIST_SLOT_MB": "1"}

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")


def inputs_of(n: int, dtype: torch.dtype) -> list[torch.Tensor]:
    return [rank_input(r, n, dtype) for r in range(WORLD)]


# ---------------------------------------------------------------- checks (run on every rank)

def check_layout(rank, dev, layout):
    """The group's backend: one shared-memory group on one host, the multi-host backend over two."""
    import torch.distributed as dist

    from torch_neuronx._C import _NeuronBackend, _NeuronMultiHostBackend

    backend = dist.group.WORLD._get_backend(dev)
    expected = _NeuronBackend if layout == "one_host" else _NeuronMultiHostBackend
    assert type(backend) is expected, type(backend)


def check_broadcast(rank, dev, layout):
    import torch.distributed as dist

    for root in range(WORLD):
        for n, dtype in ((BIG, torch.float32), (11, torch.int64), (5, torch.bfloat16)):
            t = rank_input(rank, n, dtype).to(dev)
            dist.broadcast(t, src=root)
            assert_same(t, rank_input(root, n, dtype), f"broadcast {dtype} from {root}")


def check_all_reduce(rank, dev, layout):
    import torch.distributed as dist

    cases = [(torch.float32, op) for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX")]
    cases += [(torch.int64, op) for op in ("SUM", "AVG", "MAX", "BAND", "BXOR")]
    cases += [(torch.bfloat16, "SUM"), (torch.uint8, "MAX")]
    for dtype, op in cases:
        for n in (7, BIG):
            t = rank_input(rank, n, dtype).to(dev)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            assert_same(t, reference_reduce(inputs_of(n, dtype), op), f"all_reduce {op} {dtype} {n}")
    t = rank_input(rank, 1000, torch.float32).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.PREMUL_SUM(0.25))
    assert_same(t, reference_reduce([x * 0.25 for x in inputs_of(1000, torch.float32)], "SUM"), "PREMUL_SUM")
    strided = rank_input(rank, 60, torch.float32).view(6, 10).to(dev).t()  # non-contiguous
    dist.all_reduce(strided)
    assert_same(strided, reference_reduce([x.view(6, 10).t() for x in inputs_of(60, torch.float32)], "SUM"),
                "all_reduce of a transposed tensor")


def check_all_gather(rank, dev, layout):
    import torch.distributed as dist

    outs = [torch.empty(BIG, device=dev) for _ in range(WORLD)]
    dist.all_gather(outs, rank_input(rank, BIG, torch.float32).to(dev))
    for r in range(WORLD):
        assert_same(outs[r], rank_input(r, BIG, torch.float32), f"all_gather from {r}")
    for dtype in (torch.int64, torch.bfloat16):
        out = torch.empty(WORLD * 9, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, rank_input(rank, 9, dtype).to(dev))
        assert_same(out, torch.cat(inputs_of(9, dtype)), f"all_gather_into_tensor {dtype}")


def check_reduce_scatter(rank, dev, layout):
    import torch.distributed as dist

    n = 1001
    full = [rank_input(r, WORLD * n, torch.float32) for r in range(WORLD)]
    for op in ("SUM", "AVG", "MAX"):
        out = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(out, full[rank].to(dev), op=getattr(dist.ReduceOp, op))
        expected = reference_reduce([f[rank * n:(rank + 1) * n] for f in full], op)
        assert_same(out, expected, f"reduce_scatter_tensor {op}")
    low = [f.to(torch.bfloat16) for f in full]
    out = torch.empty(n, dtype=torch.bfloat16, device=dev)
    dist.reduce_scatter_tensor(out, low[rank].to(dev))
    assert_same(out, reference_reduce([f[rank * n:(rank + 1) * n] for f in low], "SUM"), "reduce_scatter bf16")
    out = torch.empty(n, device=dev)
    dist.reduce_scatter(out, [f.to(dev) for f in full[rank].chunk(WORLD)])
    assert_same(out, reference_reduce([f[rank * n:(rank + 1) * n] for f in full], "SUM"), "reduce_scatter list")


def check_reduce_gather_scatter(rank, dev, layout):
    import torch.distributed as dist

    root = WORLD - 1
    t = rank_input(rank, 500, torch.float32).to(dev)
    dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
    expected = reference_reduce(inputs_of(500, torch.float32), "SUM") if rank == root else inputs_of(500,
                                                                                                   torch.float32)[rank]
    assert_same(t, expected, "reduce (the others' tensors unchanged)")
    outs = [torch.empty(13, dtype=torch.int64, device=dev) for _ in range(WORLD)] if rank == 2 else None
    dist.gather(rank_input(rank, 13, torch.int64).to(dev), outs, dst=2)
    if rank == 2:
        for r in range(WORLD):
            assert_same(outs[r], rank_input(r, 13, torch.int64), f"gather from {r}")
    ins = [rank_input(r + 5, 17, torch.float32).to(dev) for r in range(WORLD)] if rank == 1 else None
    out = torch.empty(17, device=dev)
    dist.scatter(out, ins, src=1)
    assert_same(out, rank_input(rank + 5, 17, torch.float32), "scatter")


def check_all_to_all(rank, dev, layout):
    import torch.distributed as dist

    sends = lambda s, d: (s + 1) * 3 + d * 5 if (s, d) != (1, 0) else 0  # noqa: E731  uneven, one empty
    x = torch.cat([a2a_piece(rank, d, sends(rank, d), 4, torch.int64) for d in range(WORLD)]).to(dev)
    out = torch.empty(sum(sends(s, rank) for s in range(WORLD)), 4, dtype=torch.int64, device=dev)
    dist.all_to_all_single(out, x, output_split_sizes=[sends(s, rank) for s in range(WORLD)],
                           input_split_sizes=[sends(rank, d) for d in range(WORLD)])
    expected = torch.cat([a2a_piece(s, rank, sends(s, rank), 4, torch.int64) for s in range(WORLD)])
    assert_same(out, expected, "all_to_all_single with split sizes")
    inputs = [a2a_piece(rank, d, 10 + d, 1).flatten().to(dev) for d in range(WORLD)]
    outputs = [torch.empty(10 + rank, device=dev) for _ in range(WORLD)]
    dist.all_to_all(outputs, inputs)
    for s in range(WORLD):
        assert_same(outputs[s], a2a_piece(s, rank, 10 + rank, 1).flatten(), f"all_to_all from {s}")


def check_send_recv_ring(rank, dev, layout):
    """Each rank sends to the next and receives from the previous (across the hosts at the seams)."""
    import torch.distributed as dist

    nxt, prev = (rank + 1) % WORLD, (rank - 1) % WORLD
    got = torch.empty(BIG, device=dev)
    works = [dist.isend(rank_input(rank, BIG, torch.float32).to(dev), dst=nxt),
             dist.irecv(got, src=prev)]
    for w in works:
        w.wait()
    assert_same(got, rank_input(prev, BIG, torch.float32), "ring exchange")
    if rank == 0:
        t = torch.empty(5, dtype=torch.int64, device=dev)
        sources = set()
        for _ in range(WORLD - 1):
            sources.add(dist.recv(t, tag=3))
            assert_same(t, rank_input(100, 5, torch.int64), "recv from any source")
        assert sources == set(range(1, WORLD)), sources
    else:
        dist.send(rank_input(100, 5, torch.int64).to(dev), dst=0, tag=3)


def check_objects_and_barrier(rank, dev, layout):
    import torch.distributed as dist

    gathered = [None] * WORLD
    dist.all_gather_object(gathered, {"rank": rank, "layout": layout})
    assert gathered == [{"rank": r, "layout": layout} for r in range(WORLD)], gathered
    objects = [f"from {rank}", rank] if rank == 3 else [None, None]
    dist.broadcast_object_list(objects, src=3)
    assert objects == ["from 3", 3], objects
    dist.barrier()


def check_async(rank, dev, layout):
    """An async all_reduce is pending while a rank on the other host sleeps; wait() gives the result."""
    import torch.distributed as dist

    dist.barrier()
    t = torch.full((100,), float(rank + 1), device=dev)
    if rank == WORLD - 1:
        time.sleep(1.0)
    work = dist.all_reduce(t, async_op=True)
    if rank == 0:
        assert not work.is_completed(), "an async all_reduce completed before every rank joined"
    work.wait()
    assert_same(t, torch.full((100,), float(sum(range(1, WORLD + 1)))), "async all_reduce")


def check_ddp(rank, dev, layout):
    _check_ddp(rank, dev)


def check_subgroup(rank, dev, layout):
    """new_group over ranks 1 and 2 (one per host on two hosts) and over 0 and 1 (one host)."""
    import torch.distributed as dist

    for members in ([1, 2], [0, 1]):
        group = dist.new_group(members)
        if rank in members:
            t = rank_input(rank, 50, torch.float32).to(dev)
            dist.all_reduce(t, group=group)
            assert_same(t, reference_reduce([rank_input(r, 50, torch.float32) for r in members], "SUM"),
                        f"all_reduce in {members}")
        dist.barrier()


def check_hsdp(rank, dev, layout):
    """HSDP: fully_shard over a 2-D mesh (replicate x shard), as across and within hosts; matches CPU training."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard

    from test_distributed_training import _mlp

    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("replicate", "shard"))
    g = torch.Generator().manual_seed(11)
    batches = [(torch.randn(8, 12, generator=g), torch.randn(8, 5, generator=g)) for _ in range(3)]
    torch.manual_seed(0)
    reference = _mlp()
    model = _mlp()
    model.load_state_dict(reference.state_dict())
    model.to(dev)
    for block in list(model)[:2]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for name, p in model.named_parameters():
        assert p.placements == (Replicate(), Shard(0)), (name, p.placements)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    quarter = slice(rank * 2, (rank + 1) * 2)  # each rank trains on its quarter of every batch
    for x, y in batches:
        torch.nn.functional.mse_loss(model(x[quarter].to(dev)), y[quarter].to(dev)).backward()
        opt.step()
        opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    refs = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.full_tensor().cpu(), refs[name].detach(), atol=2e-5, rtol=1e-4,
                                   msg=lambda m: f"{name}: {m}")


def check_mismatch_raises_everywhere(rank, dev, layout):
    """A size or dtype that differs on one rank, or arguments one rank refuses, raise on every rank at once with
    the same message on both layouts (the groups share one check, Agreement.h), and the group stays usable."""
    import torch.distributed as dist

    start = time.monotonic()
    sizes = r"(?s)mismatched collectives.*rank 2: all_reduce of 10 Float elements with SUM.*" \
            r"rank 3: all_reduce of 11 Float elements with SUM"
    with pytest.raises(RuntimeError, match=sizes):
        dist.all_reduce(torch.ones(10 + (rank == 3), device=dev))
    with pytest.raises(RuntimeError, match=r"(?s)mismatched collectives.*rank 2: all_reduce of 10 Double elements"):
        dist.all_reduce(torch.ones(10, device=dev, dtype=torch.float64 if rank == 2 else torch.float32))
    refused = "all_gather: expected 4 output tensors, got 3"
    if rank != 2:
        refused = "rank 2 raised in its all_gather instead of joining this all_gather: " + refused
    with pytest.raises(RuntimeError, match=refused):
        dist.all_gather([torch.empty(3, device=dev) for _ in range(WORLD - (rank == 2))], torch.ones(3, device=dev))
    with pytest.raises(RuntimeError, match="BAND needs an integer or bool tensor"):
        dist.all_reduce(torch.ones(2, device=dev), op=dist.ReduceOp.BAND)
    # Each of the above raised at once, not at the group's 60 s timeout.
    assert time.monotonic() - start < 20, f"the mistakes took {time.monotonic() - start:.1f} s to raise"
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    assert_same(t, torch.full((4,), float(WORLD)), "all_reduce after the mistakes")


CHECKS = [check_layout, check_broadcast, check_all_reduce, check_all_gather, check_reduce_scatter,
          check_reduce_gather_scatter, check_all_to_all, check_send_recv_ring, check_objects_and_barrier,
          check_async, check_mismatch_raises_everywhere, check_ddp, check_subgroup, check_hsdp]


# ---------------------------------------------------------------- the launch

def _worker(rank: int, port: int, out_dir: str, layout: str) -> None:
    import torch.distributed as dist

    os.environ["TORCH_NEURONX_DIST_HOST"] = LAYOUTS[layout][rank]
    torch.neuron.set_device(rank % torch.neuron.device_count())
    dev = torch.device("neuron", rank % torch.neuron.device_count())
    results = {"rank": rank, "device": dev, "seconds": {}}
    try:
        dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=rank,
                                world_size=WORLD, timeout=timedelta(seconds=60))
        for check in CHECKS:
            start = time.monotonic()
            try:
                check(rank, dev, layout)
                results[check.__name__] = "ok"
            except BaseException:  # noqa: BLE001  recorded for the parent's report
                results[check.__name__] = traceback.format_exc()
            results["seconds"][check.__name__] = round(time.monotonic() - start, 2)
        dist.destroy_process_group()
    finally:
        save_results(results, out_dir)


@pytest.fixture(scope="module", params=list(LAYOUTS))
def launch(request, tmp_path_factory):
    import torch.multiprocessing as mp

    layout = request.param
    out_dir = str(tmp_path_factory.mktemp(layout))
    before = shm_segments()
    saved = {k: os.environ.get(k) for k in CHILD_ENV}
    os.environ.update(CHILD_ENV)
    try:
        context = mp.start_processes(_worker, args=(free_port(), out_dir, layout), nprocs=WORLD, join=False,
                                     start_method="spawn")
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
    return layout, results, before, shm_segments()


@pytest.mark.parametrize("check", [c.__name__ for c in CHECKS])
def test_topology(launch, check):
    _, results, _, _ = launch
    failures = {r["rank"]: r.get(check, "not run") for r in results if r.get(check) != "ok"}
    assert not failures, "\n".join(f"rank {rank}:\n{text}" for rank, text in failures.items())


def test_no_segment_left_behind(launch):
    _, _, before, after = launch
    assert after <= before, f"new shared-memory segments left in {SHM_DIR}: {sorted(after - before)}"
