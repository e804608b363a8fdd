"""3. Matmul: 2048x2048 fp32 and bf16 GFLOP/s (target neuron >= 1.0x CPU, and
fp32 >= 70% of the FMA peak measured in the same run), fp32 at float32_matmul_precision("medium")
(informational), and decoding's products over weights larger than the caches:
one row as achieved GB/s (target >= 60% fp32 / 50% bf16 of the read bandwidth
measured in the same run), 2-8 rows against the CPU device (<= 1.0x time) and
against the one-row pass (informational)."""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import NEURON, Row, fmt_time  # noqa: E402

N = 2048
PEAK_FRACTION_TARGET = 0.70


def _square(dtype: torch.dtype) -> tuple[dict[str, float], float]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(N, N, generator=g).to(dtype)
    b = torch.randn(N, N, generator=g).to(dtype)
    an, bn = a.to(NEURON), b.to(NEURON)
    t = common.time_interleaved({"cpu": lambda: torch.mm(a, b), NEURON: lambda: torch.mm(an, bn)},
                                warmup=1, reps=common.repeats(5))
    return {d: 2 * N**3 / s / 1e9 for d, s in t.items()}, t


# OpenBLAS cores whose sgemm kernels are AVX2 ones, whatever the CPU has.
AVX2_OPENBLAS_CORES = ("Haswell", "Zen")


def _gemm_library_note(neuron_gflops: float) -> str:
    """neuron's fp32 matmul is the CPU device's GEMM library (the same rounding as CPU); where the environment
    holds OpenBLAS to AVX2 kernels on an AVX-512 CPU, the AVX2 peak bounds it, and the note gives both."""
    core = common.openblas_core()
    text = (f"neuron's fp32 matmul runs the CPU device's GEMM library, for the same rounding as CPU: here "
            f"OpenBLAS core {core} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    if common.fma_level() == "avx512" and core.split()[0] in AVX2_OPENBLAS_CORES:
        avx2_peak, _ = common.fp32_peak_gflops("avx2")
        text += (f", whose AVX2 kernels this CPU's AVX2 FMA peak ({avx2_peak:.0f} GFLOP/s) bounds: neuron reaches "
                 f"{neuron_gflops / avx2_peak * 100:.0f}% of it")
    return text


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
                    noise=common.ratio_noise(t[NEURON]), contention=common.others_share(t[NEURON]),
                    note=f"peak {peak_source}; " + _gemm_library_note(fp32[NEURON])))
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

    for dtype in (torch.float32, torch.bfloat16):
        rows += _decode_rows(dtype)
    return rows


OUT_FEATURES, IN_FEATURES = 2048, 768


def weight_count(dtype: torch.dtype) -> int:
    """Weights of OUT_FEATURES x IN_FEATURES enough to hold 2.5x the last-level cache (at least 48: 288 MiB
    fp32), so that every pass reads them from memory; a VM may report a whole socket's cache (480 MiB)."""
    each = OUT_FEATURES * IN_FEATURES * torch.empty(0, dtype=dtype).element_size()
    return max(48, math.ceil(2.5 * common.last_level_cache_bytes() / each))


READ_FRACTION_TARGET = {torch.float32: 0.60, torch.bfloat16: 0.50}


def _decode_rows(dtype: torch.dtype) -> list[Row]:
    """F.linear of 1-8 rows over weight_count() weights of 2048x768 (decoding's products, bound by reading the weights):
    one row as achieved GB/s against the machine's read bandwidth; 2-8 rows against the CPU device and
    against the one-row pass."""
    g = torch.Generator().manual_seed(1)
    count = weight_count(dtype)
    weights = [torch.randn(OUT_FEATURES, IN_FEATURES, generator=g).to(dtype) for _ in range(count)]
    on = {"cpu": weights, NEURON: [w.to(NEURON) for w in weights]}
    weight_bytes = sum(w.numel() * w.element_size() for w in weights)
    assert weight_bytes > 2 * common.last_level_cache_bytes(), "the weights must not fit in the caches"
    name = str(dtype).removeprefix("torch.")
    bound = common.read_bandwidth()
    rows, one_row = [], None
    for batch in (1, 2, 4, 8):
        x = torch.randn(batch, IN_FEATURES, generator=g).to(dtype)
        xs = {"cpu": x, NEURON: x.to(NEURON)}

        def product(device):
            for w in on[device]:
                torch.nn.functional.linear(xs[device], w)

        t = common.time_interleaved({d: lambda d=d: product(d) for d in on}, warmup=1, reps=common.repeats(5),
                                    settle=0.15)
        noise, contention = common.ratio_noise(t["cpu"], t[NEURON]), common.others_share(t[NEURON])
        label = f"linear {batch}x{IN_FEATURES} @ {count} weights {OUT_FEATURES}x{IN_FEATURES} {name}"
        if batch == 1:
            one_row = t[NEURON]
            gbs = {d: weight_bytes / s / 1e9 for d, s in t.items()}
            rows.append(Row(f"{label} (decode), GB/s", f"{gbs['cpu']:.1f} ({fmt_time(t['cpu'])})",
                            f"{gbs[NEURON]:.1f} ({fmt_time(t[NEURON])})", gbs[NEURON] / (bound / 1e9), "fraction",
                            READ_FRACTION_TARGET[dtype], percent=True, noise=noise, contention=contention,
                            note=f"fraction of the read bandwidth {bound / 1e9:.1f} GB/s (the faster of sum and mv over 1 GiB "
                                 f"on all threads); CPU achieves {gbs['cpu'] / (bound / 1e9) * 100:.0f}%"))
            continue
        rows.append(Row(f"{label} (batched decode), per pass", fmt_time(t["cpu"]), fmt_time(t[NEURON]),
                        t[NEURON] / t["cpu"], "time", 1.0, noise=noise, contention=contention))
        rows.append(Row(f"{label}, neuron time against 1 row", fmt_time(one_row), fmt_time(t[NEURON]),
                        t[NEURON] / one_row, "time", None, noise=common.ratio_noise(t[NEURON]),
                        note="informational: at 8 rows the multiply-adds, not the weight reads, can bound a "
                             "CPU core; the 1.5x target holds for whole decode steps (bench_hf_llama.py)"))
    return rows


if __name__ == "__main__":
    common.main(run)
