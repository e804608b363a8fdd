"""What the plugin adds to `import torch`.

torch autoloads the plugin through its device-backend entry point, so every
`import torch` pays for it, also in scripts that never touch a neuron tensor.
The benchmark starts fresh interpreters that only `import torch`, with the
plugin and without it (TORCH_DEVICE_BACKEND_AUTOLOAD=0), alternating the two,
and compares the fastest run of each in CPU time of the process (other
processes on the cores stretch wall time, not this). Target: the plugin adds at
most 0.3 s, about 1.15x torch's own import here. The "cpu" column is torch
without the plugin.
"""
from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Row, fmt_time  # noqa: E402

ROUNDS = 7

_CHILD = "import time; started = time.process_time(); import torch; print(time.process_time() - started)"


def _import_seconds(autoload: bool) -> float:
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if autoload else "0"}
    result = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"import child (autoload={autoload}) failed:\n{result.stderr[-2000:]}")
    return float(result.stdout.split()[-1])


def run() -> list[Row]:
    with_plugin, without = [], []
    for _ in range(ROUNDS):
        with_plugin.append(_import_seconds(True))
        without.append(_import_seconds(False))
    fastest_with, fastest_without = min(with_plugin), min(without)
    print(f"  import torch, CPU seconds: with the plugin {sorted(round(x, 3) for x in with_plugin)}; "
          f"without {sorted(round(x, 3) for x in without)}")
    added = fastest_with - fastest_without
    return [Row("`import torch` CPU time, with the plugin autoloaded vs without (fastest of "
                f"{ROUNDS} each)", fmt_time(fastest_without), fmt_time(fastest_with),
                fastest_with / fastest_without, "time", round(1 + 0.3 / fastest_without, 2),
                note=f"the plugin adds {added * 1000:.0f} ms; target: at most 300 ms")]


if __name__ == "__main__":
    common.main(run)
