"""Every graph compiled for neuron, by either route, and why each recompile happened.

Routes: "neuron" (backend="neuron", backend.py) and "inductor" (torch.compile's
default backend on neuron tensors, inductor_device.py). The inductor route's
records come from the generated wrapper module, which calls
`inductor_graph_loaded()` when it loads, after a fresh compile or from
Inductor's cache.
"""
from __future__ import annotations

import dataclasses
import threading
import time

import torch

_DTYPE_NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.float64: "f64",
                torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}


def describe(value) -> str:
    """One input of a signature: device, dtype, shape (and strides if not contiguous)."""
    if isinstance(value, torch.Tensor):
        text = f"{value.device.type}:{_DTYPE_NAMES.get(value.dtype, str(value.dtype))}{list(value.shape)}"
        if not value.is_contiguous():
            text += f"/strides{list(value.stride())}"
        return text + ("+grad" if value.requires_grad else "")
    if isinstance(value, (int, float, bool, torch.SymInt)):
        return f"{type(value).__name__}={value}"
    return type(value).__name__


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
    route: str = "neuron"  # "neuron": backend="neuron"; "inductor": the default backend


_records: list[CompiledGraph] = []


def add(record: CompiledGraph) -> CompiledGraph:
    _records.append(record)
    return record


def records() -> list[CompiledGraph]:
    return list(_records)


def reset() -> None:
    _records.clear()


_guard_failures_seen: dict[int, int] = {}


def latest_guard_failure() -> str | None:
    """Dynamo's reason for the recompile under way (the newest guard failure not yet reported)."""
    from torch._dynamo.utils import guard_failures

    latest = None
    for code, reasons in list(guard_failures.items()):
        if len(reasons) > _guard_failures_seen.get(id(code), 0):
            _guard_failures_seen[id(code)] = len(reasons)
            latest = reasons[-1]
    return latest.splitlines()[0] if latest else None


# The inductor route: when the current compile started and whether it lowered a graph.
_compile = threading.local()


def _compile_started(args) -> None:
    _compile.started = time.perf_counter()
    _compile.id = str(args.compile_id)


_watching = False


def watch_compiles() -> None:
    """Times the inductor route's compiles from Dynamo's start of each (its compile callbacks)."""
    global _watching
    if not _watching:
        _compile.started = time.perf_counter()  # registration happens as the first compile begins
        from torch._dynamo.callback import callback_handler

        callback_handler.register_start_callback(_compile_started)
        _watching = True


def lowering_started() -> None:
    """The device's wrapper is being generated: the module about to load is a fresh compile."""
    _compile.lowered = True
    if getattr(_compile, "started", None) is None:
        _compile.started = time.perf_counter()


def inductor_graph_loaded(name: str, signature: list[str]) -> None:
    """Called by the module Inductor generated for a neuron graph, as it loads."""
    fresh = getattr(_compile, "lowered", False)
    _compile.lowered = False
    started = getattr(_compile, "started", None)
    compile_id = torch._guards.CompileContext.current_compile_id()
    add(CompiledGraph(name, str(compile_id) if compile_id else getattr(_compile, "id", "?"), list(signature),
                      compile_seconds=time.perf_counter() - started if started is not None else 0.0,
                      source="compiled" if fresh else "disk cache", recompile_reason=latest_guard_failure(),
                      route="inductor"))


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
        hits = f", disk cache hits {r.cache_hits}" if r.route == "neuron" else ""
        lines.append(f"[{i}] {r.name} ({r.frame}, {r.route}): {r.source} in {r.compile_seconds:.2f} s{hits}")
        lines.append(f"    inputs: {', '.join(r.signature) or '(none)'}")
        if r.recompile_reason:
            lines.append(f"    recompiled because: {r.recompile_reason}")
        if r.error:
            lines.append(f"    error: {r.error}")
    return "\n".join(lines)
