"""The device spec transformers' test suite reads (TRANSFORMERS_TEST_DEVICE_SPEC): the suite's own helpers
seed, count and empty the cache of neuron through it."""
from __future__ import annotations

import os
import subprocess
import sys

import torch_neuronx.testing

SCRIPT = """
import torch
from transformers import testing_utils as t

assert t.torch_device == "neuron", t.torch_device
t.backend_manual_seed("neuron", 7)
first = (torch.randn(5, device="neuron").cpu(), torch.rand(3))
t.backend_manual_seed("neuron", 7)
second = (torch.randn(5, device="neuron").cpu(), torch.rand(3))
assert all(torch.equal(a, b) for a, b in zip(first, second)), (first, second)
assert t.backend_device_count("neuron") == torch.neuron.device_count() > 0
block = torch.empty(64 << 20, dtype=torch.uint8, device="neuron")
del block
held = torch.neuron.memory_reserved()
t.backend_empty_cache("neuron")
assert torch.neuron.memory_reserved() < held, (held, torch.neuron.memory_reserved())
print("spec ok")
"""


def test_transformers_helpers_run_on_neuron_through_the_spec():
    folder, name = os.path.split(torch_neuronx.testing.TRANSFORMERS_SPEC)
    # transformers imports the spec by its file name, so the suite runs where the file's name resolves.
    env = dict(os.environ, TRANSFORMERS_TEST_DEVICE_SPEC=name, TRANSFORMERS_TEST_DEVICE="neuron")
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=folder, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0 and "spec ok" in result.stdout, result.stdout + result.stderr[-3000:]
