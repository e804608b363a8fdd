"""3. Matmul: 2048x2048 fp32 and bf16 GFLOP/s (target neuron >= 1.0x CPU, and
fp32 >= 70% of the FMA peak), the small-M decode shape (1x768)@(768x2048)
fp32 as achieved GB/s (target >= 70% of the memcpy bandwidth measured in the
same run), and fp32 at float32_matmul_precision("medium") (informational)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

N = 2048
PEAK_FRACTION_TARGET = 0.70
DECODE_FRACTION_TARGET = 0.70


def _square(dtype: torch.dtype) -> tuple[dict[str, float], float]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(N, N, generator=g).to(dtype)
    b = torch.randn(N, N, generator=g).to(dtype)
    an, bn = a.to(NEURON), b.to(NEURON)
    t = common.time_interleaved({"cpu": lambda: torch.mm(a, b), NEURON: lambda: torch.mm(an, bn)},
                                warmup=1, reps=common.repeats(5))
    return {d: 2 * N**3 / s / 1e9 for d, s in t.items()}, t


def run() -> list[Row]:
    rows = []
    peak, peak_source = common.fp32_peak_gflops()
    print(f"fp32 FMA peak used: {peak:.0f} GFLOP/s ({peak_source})")

    fp32, t = _square(torch.float32)
    rows.append(Row(f"matmul {N}x{N} fp32, GFLOP/s", f"{fp32['cpu']:.1f}", f"{fp32[NEURON]:.1f}",
                    fp32[NEURON] / fp32["cpu"], "fraction", 1.0, noise=common.ratio_noise(t["cpu"], t[NEURON]),
                    contention=common.others_share(t[NEURON])))
    rows.append(Row(f"matmul {N}x{N} fp32, fraction of {peak:.0f} GFLOP/s FMA peak",
                    f"{fp32['cpu'] / peak * 100:.0f}%", f"{fp32[NEURON] / peak * 100:.0f}%",
                    fp32[NEURON] / peak, "fraction", PEAK_FRACTION_TARGET, percent=True,
                    noise=common.ratio_noise(t[NEURON]), contention=common.others_share(t[NEURON])))
    bf16, t = _square(torch.bfloat16)
    rows.append(Row(f"matmul {N}x{N} bf16, GFLOP/s", f"{bf16['cpu']:.1f}", f"{bf16[NEURON]:.1f}",
                    bf16[NEURON] / bf16["cpu"], "fraction", 1.0, noise=common.ratio_noise(t["cpu"], t[NEURON]),
                    contention=common.others_share(t[NEURON])))

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        medium, _ = _square(torch.float32)
    finally:
        torch.set_float32_matmul_precision(previous)
    rows.append(Row(f"matmul {N}x{N} fp32 precision=medium, GFLOP/s", f"{medium['cpu']:.1f}",
                    f"{medium[NEURON]:.1f}", medium[NEURON] / medium["cpu"], "fraction", None,
                    note="informational; 'medium' allows bf16 compute for fp32 matmuls"))

    # Decode: (1x768) @ (768x2048) fp32, bound by reading the weight.
    m, k, n = 1, 768, 2048
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    xn, wn = x.to(NEURON), w.to(NEURON)
    inner = 500
    t = common.time_interleaved({"cpu": lambda: torch.mm(x, w), NEURON: lambda: torch.mm(xn, wn)},
                                inner=inner, warmup=1, reps=common.repeats(7))
    nbytes = 4 * (k * n + m * k + m * n)
    bound = common.memcpy_bandwidth()
    gbs = {d: nbytes / s / 1e9 for d, s in t.items()}
    rows.append(Row(f"decode ({m}x{k})@({k}x{n}) fp32, GB/s", f"{gbs['cpu']:.1f} ({fmt_time(t['cpu'])})",
                    f"{gbs[NEURON]:.1f} ({fmt_time(t[NEURON])})", gbs[NEURON] / (bound / 1e9), "fraction",
                    DECODE_FRACTION_TARGET, percent=True, noise=common.ratio_noise(t[NEURON]),
                    contention=common.others_share(t[NEURON]),
                    note=f"fraction of the memcpy bound {bound / 1e9:.1f} GB/s (CPU copy_ of 256 MiB, read+write); "
                         f"weight is {k * n * 4 / 2**20:.1f} MiB, so it may be served from cache; "
                         f"CPU achieves {gbs['cpu'] / (bound / 1e9) * 100:.0f}%"))
    rows += [_batched_decode_row(dtype, batch) for dtype in (torch.float32, torch.bfloat16) for batch in (4, 8)]
    return rows


def _batched_decode_row(dtype: torch.dtype, batch: int) -> Row:
    """F.linear of a few rows over 48 weights of 2048x768 (75M parameters, beyond the caches): batched decode."""
    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(2048, 768, generator=g).to(dtype) for _ in range(48)]
    x = torch.randn(batch, 768, generator=g).to(dtype)
    on = {"cpu": (weights, x), NEURON: ([w.to(NEURON) for w in weights], x.to(NEURON))}

    def product(device):
        ws, xs = on[device]
        for w in ws:
            torch.nn.functional.linear(xs, w)

    t = common.time_interleaved({d: lambda d=d: product(d) for d in on}, warmup=1, reps=common.repeats(5))
    name = str(dtype).removeprefix("torch.")
    return Row(f"linear {batch}x768 @ 48 weights 2048x768 {name} (batched decode), per pass", fmt_time(t["cpu"]),
               fmt_time(t[NEURON]), t[NEURON] / t["cpu"], "time", None,
               noise=common.ratio_noise(t["cpu"], t[NEURON]), contention=common.others_share(t[NEURON]))


if __name__ == "__main__":
    common.main(run)
