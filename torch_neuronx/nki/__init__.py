"""NKI, the Neuron Kernel Interface, on the emulated NeuronCore.

`@nki.jit` kernels written for Trainium (current API: `import nki`,
`nki.language`, `nki.isa`, `nki.collectives`; beta API: `neuronxcc.nki`) run unchanged on neuron
tensors, CPU tensors and NumPy arrays: traced once per input signature into an
instruction program (trace.py), checked against the NeuronCore's limits and
replayed by C++ (nki_runtime/). Where AWS's packages are not installed, the
import names `nki` and `neuronxcc.nki` resolve here (aliases.py).
"""
from . import collectives, isa, language, lnc  # noqa: F401
from .kernel import Kernel, baremetal, benchmark, jit, simulate, simulate_kernel  # noqa: F401
from .trace import NkiError  # noqa: F401

# The type of nl.float32, nl.int32, ...: the dtype names (kernels annotate with it: `index_dtype: nki.dtype`).
dtype = str

__all__ = ["jit", "language", "isa", "lnc", "collectives", "simulate", "simulate_kernel", "baremetal", "benchmark",
           "Kernel", "NkiError"]
