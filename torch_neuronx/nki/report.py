"""torch_neuronx.nki_report(): every NKI program this process traced or loaded,
with its instructions per engine, the bytes its DMAs move and the predicted
Trainium time (cost_model.py) with the engine that bounds it."""
from __future__ import annotations

from typing import List

from . import cost_model
from .kernel import PROGRAMS


def nki_records() -> List[dict]:
    records = []
    for program in PROGRAMS:
        prediction = cost_model.predict(program.encoded, program.version)
        shapes = [s[1:] for s in program.signature[2] if s[0] == "tensor"] if program.signature else []
        records.append({
            "kernel": program.encoded["kernel"], "inputs": shapes, "grid": list(program.signature[0])
            if program.signature else [], "calls": program.calls, "from_disk": not program.traced,
            "instructions": prediction.instructions, "dma_bytes": prediction.dma_bytes,
            "flops": prediction.flops, "predicted_seconds": prediction.seconds,
            "bound_engine": prediction.bound_engine, "busy_seconds": prediction.busy_seconds,
            "target": prediction.rates,
        })
    return records


def nki_report() -> str:
    lines = ["kernel | inputs | calls | instructions (tensor/vector/scalar/gpsimd/dma) | DMA bytes | "
             "predicted time | bound by | target"]
    for r in nki_records():
        counts = "/".join(str(r["instructions"][e]) for e in ("tensor", "vector", "scalar", "gpsimd", "dma"))
        inputs = ", ".join("x".join(map(str, shape)) + f" {dtype}" for shape, dtype in r["inputs"])
        lines.append(f"{r['kernel']} | {inputs} | {r['calls']} | {counts} | {r['dma_bytes']:,} | "
                     f"{r['predicted_seconds'] * 1e6:.1f} us | {r['bound_engine']} | {r['target']}")
    return "\n".join(lines)
