"""neuronxcc.nki.typing: the names kernels annotate their arguments with."""
from .trace import View as tensor  # noqa: F401

__all__ = ["tensor"]
