"""The on-disk compile cache (TORCH_NEURONX_NEFF_CACHE_DIR).

Inductor's artifacts (FX graph and AOT autograd caches, compiled kernels)
live under `<cache>/inductor/<vector ISA>`; `<cache>/graphs/<key>.json` records each graph
signature this cache has compiled, and how often a process found it there.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

import torch

DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "torch_neuronx", "neff")


def cache_dir() -> str:
    return os.path.abspath(os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or DEFAULT_DIR)


def inductor_dir() -> str:
    return os.path.join(cache_dir(), "inductor", _vector_isa())


def _vector_isa() -> str:
    """The vector ISA Inductor builds CPU kernels for: the CPU's, or the one ATEN_CPU_CAPABILITY names.

    Inductor's FX graph cache does not key on it: a graph compiled for AVX-512
    and found again by a process that builds for AVX2 (a cache shared by two
    kinds of machine, or a developer forcing a weaker kind) ran kernels that
    returned NaN. One folder per ISA keeps them apart.
    """
    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa()
    return "-".join(str(isa).split()) if isa else "scalar"


def graph_key(graph_code: str, signature: str, options: str) -> str:
    from .. import __version__

    text = "\n".join([torch.__version__, __version__, options, signature, graph_code])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _entry_path(key: str) -> str:
    return os.path.join(cache_dir(), "graphs", key + ".json")


def lookup(key: str) -> dict | None:
    try:
        with open(_entry_path(key)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def record(key: str, entry: dict) -> None:
    path = _entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(entry, f, indent=1)
    os.replace(temporary, path)  # atomic: concurrent processes never see half a file


@contextlib.contextmanager
def inductor_artifacts_here():
    """Points Inductor's caches at this cache while a graph compiles."""
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir()
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def now() -> float:
    return time.time()
