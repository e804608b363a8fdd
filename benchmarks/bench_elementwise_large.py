"""2. Large elementwise ops and a reduction on 16M float32 elements:
neuron time / CPU time, target <= 1.1x.

Each op runs as users write it (a fresh output tensor per call) and, for the
elementwise ops, with out= into a preallocated tensor, which times the kernel
and the dispatch alone. Fresh outputs of 64 MiB cost page faults on the CPU
device (glibc returns blocks this large to the OS at free), which the
caching allocator of a device avoids; the minor page faults per call are
reported to show it. The clock is common.single_thread_clock().
"""
from __future__ import annotations

import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

NUMEL = 16 * 1024 * 1024
TARGET = 1.1


def _faults_per_call(fn, device: str, calls: int = 1) -> float:
    fn()
    common.sync(device)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    common.sync(device)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def run() -> list[Row]:
    g = torch.Generator().manual_seed(0)
    host = {"a": torch.randn(NUMEL, generator=g), "b": torch.randn(NUMEL, generator=g)}
    host["out"] = torch.empty(NUMEL)
    t = {"cpu": host, NEURON: {k: v.to(NEURON) for k, v in host.items()}}
    ops = {
        "add a + b": lambda x: x["a"] + x["b"],
        "mul a * b": lambda x: x["a"] * x["b"],
        "relu": lambda x: torch.relu(x["a"]),
        "gelu": lambda x: F.gelu(x["a"]),
        "sum (reduction)": lambda x: x["a"].sum(),
        "add, out= preallocated": lambda x: torch.add(x["a"], x["b"], out=x["out"]),
        "mul, out= preallocated": lambda x: torch.mul(x["a"], x["b"], out=x["out"]),
        "relu, out= preallocated": lambda x: torch.clamp_min(x["a"], 0, out=x["out"]),
        "gelu, out= preallocated": lambda x: torch.ops.aten.gelu.out(x["a"], out=x["out"]),
    }
    rows = []
    clock, clock_name = common.single_thread_clock()
    for name, op in ops.items():
        fns = {d: (lambda op=op, d=d: op(t[d])) for d in ("cpu", NEURON)}
        res = common.time_interleaved(fns, warmup=1, reps=common.repeats(7), clock=clock)
        faults = {d: _faults_per_call(fns[d], d) for d in fns}
        note = "" if rows else f"{clock_name}, median of {common.repeats(7)}"
        if max(faults.values()) > 100:
            note += ("; " if note else "") + \
                f"minor page faults per call: cpu {faults['cpu']:.0f}, neuron {faults[NEURON]:.0f}"
        rows.append(Row(f"16M fp32: {name}", fmt_time(res["cpu"]), fmt_time(res[NEURON]),
                        res[NEURON] / res["cpu"], "time", TARGET, note=note,
                        noise=common.ratio_noise(res["cpu"], res[NEURON]),
                        contention=common.others_share(res["cpu"])))
    return rows


if __name__ == "__main__":
    common.main(run)
