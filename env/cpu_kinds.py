"""The CPU kinds the project meets, and how to run as one of them on a stronger CPU.

Both the device's kernels and torch's own choose their code by CPU: the device
by TORCH_NEURONX_SIMD (runtime/SimdLevel.h), ATen's vectorised kernels by
ATEN_CPU_CAPABILITY, oneDNN by ONEDNN_MAX_CPU_ISA (torch also asks oneDNN
whether bf16 GEMMs are worth taking to it) and OpenBLAS by OPENBLAS_CORETYPE.
Lowering all four reproduces a weaker kind's paths on either side: the
benchmarks' per-kind rows and `make test-kinds` use this table. The variables
are read when torch loads, so each kind runs in a fresh process.

    python3 env/cpu_kinds.py                   the kinds below this CPU's own
    python3 env/cpu_kinds.py avx2 -- CMD ...   CMD as the AVX2 kind
"""
from __future__ import annotations

import os
import sys

# level: (the machines that have it, the variables that force it)
CPU_KINDS = {
    "avx2": ("AMD Zen 3: AVX2 + FMA",
             dict(TORCH_NEURONX_SIMD="avx2", ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2",
                  OPENBLAS_CORETYPE="Zen")),
    "avx512": ("AVX-512 without BF16 or AMX",
               dict(TORCH_NEURONX_SIMD="avx512", ATEN_CPU_CAPABILITY="avx512",
                    ONEDNN_MAX_CPU_ISA="AVX512_CORE_VNNI", OPENBLAS_CORETYPE="SkylakeX")),
    "avx512bf16": ("AMD Zen 4/5: AVX-512 with AVX512-BF16, no AMX",
                   dict(TORCH_NEURONX_SIMD="avx512bf16", ATEN_CPU_CAPABILITY="avx512",
                        ONEDNN_MAX_CPU_ISA="AVX512_CORE_BF16", OPENBLAS_CORETYPE="Cooperlake")),
}
ORDER = ["avx2", "avx512", "avx512bf16", "amx"]


def native_level() -> str:
    """This CPU's own level, from the flags the kernel reports (what runtime/SimdLevel.cpp detects)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return "scalar"
    if "avx512f" in flags:
        if "avx512_bf16" not in flags:
            return "avx512"
        return "amx" if {"amx_tile", "amx_bf16"} <= flags else "avx512bf16"
    return "avx2" if {"avx2", "fma"} <= flags else "scalar"


def weaker_kinds() -> list[str]:
    native = native_level()
    return ORDER[:ORDER.index(native)] if native in ORDER else []


def environment(level: str) -> dict:
    """os.environ with the device and torch both lowered to the kind `level`."""
    return {**os.environ, **CPU_KINDS[level][1]}


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[2] == "--" and sys.argv[1] in CPU_KINDS:
        os.execvpe(sys.argv[3], sys.argv[3:], environment(sys.argv[1]))
    elif len(sys.argv) == 1:
        print(" ".join(weaker_kinds()))
    else:
        sys.exit(f"usage: {sys.argv[0]} [LEVEL -- CMD ...]; LEVEL is one of {', '.join(CPU_KINDS)}")
