"""Every graph the neuron backend compiled, and why each recompile happened."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class CompiledGraph:
    name: str
    frame: str
    signature: list[str]
    compile_seconds: float = 0.0
    source: str = "compiled"  # "compiled", "disk cache", "eager fallback"
    cache_hits: int = 0  # times a process found this graph in the disk cache
    recompile_reason: str | None = None
    error: str | None = None


_records: list[CompiledGraph] = []


def add(record: CompiledGraph) -> CompiledGraph:
    _records.append(record)
    return record


def records() -> list[CompiledGraph]:
    return list(_records)


def reset() -> None:
    _records.clear()


def explain_change(old: list[str], new: list[str]) -> str | None:
    """What differs between two input signatures, input by input."""
    if len(old) != len(new):
        return f"number of inputs changed from {len(old)} to {len(new)}"
    changes = [f"input {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(old, new)) if a != b]
    return "; ".join(changes) if changes else None


def compile_report() -> str:
    """A table of every compiled graph: signature, time, cache use, recompile reason."""
    recompiles = sum(1 for r in _records if r.recompile_reason)
    from_disk = sum(1 for r in _records if r.source == "disk cache")
    lines = [f"neuron compile report: {len(_records)} graphs, {recompiles} recompiles, "
             f"{from_disk} loaded from the disk cache"]
    for i, r in enumerate(_records):
        lines.append(f"[{i}] {r.name} ({r.frame}): {r.source} in {r.compile_seconds:.2f} s, "
                     f"disk cache hits {r.cache_hits}")
        lines.append(f"    inputs: {', '.join(r.signature) or '(none)'}")
        if r.recompile_reason:
            lines.append(f"    recompiled because: {r.recompile_reason}")
        if r.error:
            lines.append(f"    error: {r.error}")
    return "\n".join(lines)
