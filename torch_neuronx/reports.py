"""Reports about what a real NeuronCore would have done differently."""
from . import _C


def fallback_report() -> dict:
    """Ops that ran on dtypes a NeuronCore lacks (float64, complex), with counts.

    On Trainium these would fall back to the CPU; here they run on the device
    but are counted, and warned about once each.
    """
    return dict(sorted(_C._fallback_counts().items(), key=lambda item: -item[1]))


def reset_fallback_report() -> None:
    _C._reset_fallback_counts()


def kernels_run(device: int = 0) -> int:
    """How many kernels and copies NeuronCore `device` has executed so far."""
    return _C._kernels_submitted(device)
