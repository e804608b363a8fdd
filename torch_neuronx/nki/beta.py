"""neuronxcc.nki: the beta API's entry points (its language module is nl,
its isa module beta_isa, whose instructions return their results)."""
from . import beta_isa as isa  # noqa: F401
from . import compiler  # noqa: F401
from . import language  # noqa: F401
from . import nki_typing as typing  # noqa: F401
from .nki_typing import tensor  # noqa: F401 - kernels annotate arguments with nki.tensor
from .kernel import baremetal, benchmark, jit, simulate_kernel  # noqa: F401
from .trace import NkiError  # noqa: F401
