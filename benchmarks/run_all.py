"""Runs every benchmarks/bench_*.py, prints one markdown table and writes it to
benchmarks/results.md.

  TORCH_NEURONX_SKIP_BUILD=1 ./dev python3 benchmarks/run_all.py [name-substring ...]
"""
from __future__ import annotations

import datetime
import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

MODULES = ["bench_import", "bench_eager_overhead", "bench_elementwise_large", "bench_matmul", "bench_copy", "bench_hf_llama",
           "bench_hf_gpt2", "bench_compile", "bench_distributed", "bench_loaded", "bench_simd_levels", "bench_nki"]


def main(argv: list[str]) -> int:
    selected = [m for m in MODULES if not argv or any(a in m for a in argv)]
    env = common.environment_lines()
    for line in env:
        print(line)
    rows = []
    start = time.perf_counter()
    for name in selected:
        t0 = time.perf_counter()
        print(f"\n== {name}", flush=True)
        module_rows = importlib.import_module(name).run()
        for r in module_rows:
            print("  " + " | ".join(r.cells()), flush=True)
        print(f"  ({time.perf_counter() - t0:.1f} s)")
        rows += module_rows
    table = common.markdown_table(rows)
    notes = common.notes(rows)
    missed = [r.benchmark for r in rows if r.met is False]
    elapsed = time.perf_counter() - start
    env.append("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print("\n" + table)
    for line in notes:
        print(line)
    print(f"\n{len(missed)} of {sum(r.met is not None for r in rows)} targets missed; total {elapsed:.1f} s")

    peak, peak_source = common.fp32_peak_gflops()
    with open(os.path.join(HERE, "results.md"), "w") as f:
        f.write(f"# neuron vs CPU benchmarks\n\n")
        f.write(f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} by "
                f"`TORCH_NEURONX_SKIP_BUILD=1 ./dev python3 benchmarks/run_all.py` ({elapsed:.0f} s).\n\n")
        for line in env:
            f.write(f"- {line}\n")
        f.write(f"- fp32 FMA peak: {peak:.0f} GFLOP/s ({peak_source})\n")
        f.write("- times are medians of interleaved CPU/neuron repeats; ratios < 1 (time) or > 1 (throughput) "
                "favour neuron\n\n")
        f.write(table + "\n")
        if notes:
            f.write("\n" + "\n".join(notes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
