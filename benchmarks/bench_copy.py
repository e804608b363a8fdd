"""4. Host<->device copies of a 256 MiB float32 tensor into preallocated
tensors (dst.copy_(src)), in GB/s counting read + write (2 * size), against
the machine's memcpy bandwidth measured the same way (CPU->CPU copy_ of the
same size, interleaved with the device copies): target >= 80%. The clock is
common.single_thread_clock() (both sides copy on one thread when torch runs one).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import MiB, NEURON, Row  # noqa: E402

NBYTES = 256 * MiB
TARGET = 0.80


def run() -> list[Row]:
    numel = NBYTES // 4
    host_src = torch.empty(numel).fill_(1.5)
    host_src[::4099] = torch.arange(host_src[::4099].numel(), dtype=torch.float32)
    host_dst = torch.empty(numel)
    dev = torch.empty(numel, device=NEURON)
    clock, clock_name = common.single_thread_clock()
    t = common.time_interleaved(
        {
            "memcpy": lambda: host_dst.copy_(host_src),
            "h2d": lambda: dev.copy_(host_src),
            "d2h": lambda: host_dst.copy_(dev),
        },
        devices={"memcpy": "cpu", "h2d": NEURON, "d2h": NEURON}, warmup=2, reps=common.repeats(5),
        clock=clock)
    assert torch.equal(host_dst[::4099], host_src[::4099]), "copy round trip lost data"
    gbs = {k: 2 * NBYTES / s / 1e9 for k, s in t.items()}
    return [
        Row("H2D copy 256 MiB fp32 (neuron dst.copy_(cpu src)), GB/s", f"{gbs['memcpy']:.1f} (memcpy)",
            f"{gbs['h2d']:.1f}", gbs["h2d"] / gbs["memcpy"], "fraction", TARGET, percent=True,
            noise=common.ratio_noise(t["memcpy"], t["h2d"]), contention=common.others_share(t["h2d"]),
            note=f"{clock_name}; bytes counted = 2 x 256 MiB"),
        Row("D2H copy 256 MiB fp32 (cpu dst.copy_(neuron src)), GB/s", f"{gbs['memcpy']:.1f} (memcpy)",
            f"{gbs['d2h']:.1f}", gbs["d2h"] / gbs["memcpy"], "fraction", TARGET, percent=True,
            noise=common.ratio_noise(t["memcpy"], t["d2h"]), contention=common.others_share(t["d2h"])),
    ]


if __name__ == "__main__":
    common.main(run)
