"""The decode benchmarks again as the other CPU kinds the project meets would run them: avx2 (AMD Zen 3:
AVX2 + FMA only), avx512bf16 (AMD Zen 4/5: AVX-512 and AVX512-BF16, no AMX) and avx512, each below
this CPU's own level, in a fresh process per kind. Both sides are lowered (env/cpu_kinds.py): the
device's kernels (TORCH_NEURONX_SIMD) and the CPU device's ATen kernels, oneDNN and OpenBLAS, so the
CPU column is what that kind's CPU device would do, not this CPU's best code.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
from common import Row  # noqa: E402

ORDER = ["avx2", "avx512", "avx512bf16", "amx"]


def native_level() -> str:
    import torch_neuronx

    return torch_neuronx._C._simd_level().split()[0]


def _rows_at_this_level() -> list[Row]:
    import copy

    import bench_hf_llama
    import bench_matmul

    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        rows += bench_matmul._decode_rows(dtype)
    bandwidth = common.read_bandwidth()
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        cpu_model = bench_hf_llama.build_model(dtype)
        models = {"cpu": cpu_model, common.NEURON: copy.deepcopy(cpu_model).to(common.NEURON)}
        rows += bench_hf_llama.decode_rows(models, name, bandwidth)
    return rows


def run() -> list[Row]:
    native = native_level()
    weaker = ORDER[:ORDER.index(native)] if native in ORDER else []
    rows = []
    for level in weaker:
        env = common.cpu_kind_env(level)
        result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                                capture_output=True, text=True, timeout=3600)
        if result.returncode != 0:
            raise RuntimeError(f"the {level} kind's run failed:\n{result.stderr[-3000:]}")
        for data in json.loads(result.stdout.strip().splitlines()[-1]):
            row = Row(**data)
            row.benchmark = f"[simd {level}] {row.benchmark}"
            rows.append(row)
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps([dataclasses.asdict(r) for r in _rows_at_this_level()]))
    else:
        common.main(run)
