"""1. Per-op eager overhead on small tensors: neuron time / CPU time, target <= 1.5x.

10,000 ops of each kind on 16-element float32 tensors (and a 16x16 mm); the
time is per op, median of several repeats of the 10,000. The clock is the
process's CPU time, not wall time: these ops are single-threaded, and on a
loaded 2-core machine wall time mostly measures preemption.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

N_OPS = 10_000
TARGET = 1.5


def cases(device: str):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(16, generator=g).to(device)
    b = torch.rand(16, generator=g).add_(0.5).to(device)
    c = torch.empty(16, device=device)
    m1 = torch.rand(16, 16, generator=g).to(device)
    m2 = torch.rand(16, 16, generator=g).to(device)
    ones = torch.ones(16, device=device)  # mul_ by 1: stays finite over 10,000 repeats
    return {
        "a + b (16 fp32)": lambda: a + b,
        "torch.add(a, b, out=c) (16 fp32)": lambda: torch.add(a, b, out=c),
        "a.mul_(b) in place (16 fp32, b = ones)": lambda: a.mul_(ones),
        "mm 16x16 fp32": lambda: torch.mm(m1, m2),
    }


def run() -> list[Row]:
    cpu, neuron = cases("cpu"), cases(NEURON)
    rows = []
    for name in cpu:
        def loop(fn):
            def go():
                for _ in range(N_OPS):
                    fn()
            return go
        t = common.time_interleaved({"cpu": loop(cpu[name]), NEURON: loop(neuron[name])},
                                    warmup=1, reps=common.repeats(9), clock=time.process_time)
        per_cpu, per_neuron = t["cpu"] / N_OPS, t[NEURON] / N_OPS
        rows.append(Row(f"eager: {name}, per op", fmt_time(per_cpu), fmt_time(per_neuron), per_neuron / per_cpu,
                        "time", TARGET, noise=common.ratio_noise(t["cpu"], t[NEURON]),
                        contention=common.others_share(t["cpu"]),
                        note="" if rows else "process CPU time per op (robust to preemption), median of 9 x 10,000"))
    return rows


if __name__ == "__main__":
    common.main(run)
