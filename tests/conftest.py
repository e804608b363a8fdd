"""Shared helpers for the torch_neuronx test suite.

In-process tests assume the default emulated topology (trn2, LNC=2: four
logical NeuronCores of 24 GiB each). Tests that change the topology, the
autoload switch or the fallback switch run in subprocesses (see run_python).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# A NeuronCore belongs to one process at a time (runtime/CoreClaim.h), but
# this suite runs child processes on the cores that pytest's own process is
# using; they share. test_core_claims.py runs children without it.
os.environ.setdefault("TORCH_NEURONX_SHARE_CORES", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# Environment variables that change what the plugin does at start-up. Child
# processes get none of them unless a test sets them explicitly.
PLUGIN_ENV_VARS = (
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES",
    "NEURON_LOGICAL_NC_CONFIG",
    "TORCH_NEURONX_PLATFORM",
    "TORCH_NEURONX_CHIPS",
    "TORCH_NEURONX_DISABLE_CPU_FALLBACK",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    # Inductor writes its cache folder here on first use; a child starts as a user's process does.
    "TORCHINDUCTOR_CACHE_DIR",
)

GiB = 2**30
DEFAULT_CORES = 4
DEFAULT_HBM = 24 * GiB
SUBPROCESS_TIMEOUT = 120


def _child_env(env: dict | None) -> dict:
    child = {k: v for k, v in os.environ.items() if k not in PLUGIN_ENV_VARS}
    child.update(env or {})
    return child


def run_python(code: str, env: dict | None = None, timeout: int = SUBPROCESS_TIMEOUT) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (PYTHONPATH is inherited, so torch_neuronx imports)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_child_env(env), timeout=timeout,
                          capture_output=True, text=True)


def run_python_many(jobs: list[tuple[str, dict | None]], timeout: int = SUBPROCESS_TIMEOUT) -> list[subprocess.CompletedProcess]:
    """Runs several independent snippets concurrently; returns their results in order."""
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=_child_env(env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for code, env in jobs]
    results = []
    try:
        for proc, (code, _) in zip(procs, jobs):
            out, err = proc.communicate(timeout=timeout)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def check_ok(result: subprocess.CompletedProcess) -> str:
    """Asserts the child exited 0 and returns its stdout."""
    assert result.returncode == 0, f"child failed (rc={result.returncode})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def _default_topology() -> bool:
    return not any(os.environ.get(k) for k in PLUGIN_ENV_VARS if k != "TORCH_DEVICE_BACKEND_AUTOLOAD")


# Skipped (with this reason) only when the caller overrides the topology for the whole run.
requires_default_topology = pytest.mark.skipif(
    not _default_topology(), reason="in-process tests assume the default topology; a NEURON_*/TORCH_NEURONX_* "
                                    "variable is set in the environment running pytest")

def close(actual, expected, **kw):
    """actual, a neuron tensor, equals the CPU tensor expected within torch.testing's tolerances (or kw)."""
    assert actual.device.type == "neuron", f"result is on {actual.device}"
    torch.testing.assert_close(actual.cpu(), expected, **kw)


requires_two_devices = pytest.mark.skipif(
    torch.neuron.device_count() < 2, reason="needs at least two visible NeuronCores (default topology has 4)")


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Every test starts and ends on neuron:0 with default streams."""
    torch.neuron.set_device(0)
    yield
    torch.neuron.set_device(0)


@pytest.fixture
def dev():
    return torch.device("neuron", 0)
