"""all_reduce and all_gather bandwidth across 2 local ranks: the "neuron"
c10d backend on neuron tensors against Gloo on CPU tensors, measured in the
same run by the same 2 rank processes (spawned once; each holds a neuron group
and a gloo group). Sizes are 1, 16, 64 and 256 MiB of fp32: the tensor for
all_reduce, the gathered output for all_gather (each rank contributes half).
Bandwidth = size / time (the "algorithm bandwidth" of nccl-tests). Each
repeat is timed on rank 0 between two barriers of the group under test; the
two backends' repeats are interleaved and the median is taken. Target:
neuron/gloo >= 3.0 at 64 MiB; the other sizes are informational. Each rank
runs one intra-op thread (2 ranks on a 2-core machine).
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import MiB, Row  # noqa: E402

WORLD = 2
SIZES_MIB = [1, 16, 64, 256]
TARGET_MIB = 64
TARGET = 3.0
OPS = ["all_reduce", "all_gather"]


def _time_once(op: str, group, tensor: torch.Tensor, out: torch.Tensor) -> float:
    import torch.distributed as dist

    dist.barrier(group=group)
    t0 = time.perf_counter()
    if op == "all_reduce":
        dist.all_reduce(tensor, group=group)
    else:
        dist.all_gather_single(out, tensor, group=group)
    dist.barrier(group=group)
    return time.perf_counter() - t0


def _rank(rank: int, port: int, out_path: str, reps: int) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}?use_libuv=0", rank=rank,
                            world_size=WORLD)
    groups = {"neuron": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    samples: dict = {}
    for mib in SIZES_MIB:
        numel = mib * MiB // 4
        for op in OPS:
            n_in = numel if op == "all_reduce" else numel // WORLD
            bufs = {}
            for name, device in (("neuron", torch.device("neuron", rank)), ("gloo", torch.device("cpu"))):
                t = torch.ones(n_in, device=device)
                bufs[name] = (t, torch.empty(numel, device=device) if op == "all_gather" else t)
            key = f"{op} {mib}"
            samples[key] = {name: [] for name in groups}
            for rep in range(reps + 1):  # the first is a warm-up
                for name, group in groups.items():
                    elapsed = _time_once(op, group, *bufs[name])
                    if rep:
                        samples[key][name].append(elapsed)
            del bufs
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(samples, f)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(reps: int) -> dict:
    """{"<op> <MiB>": {"neuron": [seconds...], "gloo": [...]}} from one launch of the ranks."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "samples.json")
        mp.start_processes(_rank, args=(_free_port(), path, reps), nprocs=WORLD, start_method="spawn")
        with open(path) as f:
            return json.load(f)


def run() -> list[Row]:
    samples = measure(common.repeats(5))
    rows = []
    for op in OPS:
        for mib in SIZES_MIB:
            t = {name: common.Timing(s) for name, s in samples[f"{op} {mib}"].items()}
            gbs = {name: mib * MiB / seconds / 1e9 for name, seconds in t.items()}
            rows.append(Row(f"{op} {mib} MiB fp32, 2 ranks, GB/s", f"{gbs['gloo']:.2f} (gloo, cpu tensors)",
                            f"{gbs['neuron']:.2f}", gbs["neuron"] / gbs["gloo"], "fraction",
                            TARGET if mib == TARGET_MIB else None, noise=common.ratio_noise(t["neuron"], t["gloo"]),
                            note=(f"median of {len(t['neuron'].samples)} repeats between barriers; "
                                  f"neuron {common.fmt_time(t['neuron'])}, gloo {common.fmt_time(t['gloo'])}")))
    return rows


if __name__ == "__main__":
    common.main(run)
