"""torch_neuronx: an emulated AWS NeuronCore as a native PyTorch device, "neuron".

`import torch` loads this package through the `torch.backends` entry point
(unless TORCH_DEVICE_BACKEND_AUTOLOAD=0; then `import torch_neuronx` does it).
"""
import importlib.util
import os


def _autoload() -> None:
    """Entry point of the `torch.backends` group, called at the end of `import torch`.

    Defined before this package imports torch: when `import torch_neuronx` comes first, torch's autoload
    finds this package half loaded; it then does nothing here, and the package registers itself at its end.
    """
    register = globals().get("_register")
    if register is not None:
        register()


import torch  # noqa: E402

# Where torch_xla is installed, transformers and accelerate would take their
# XLA Neuron path for this package (an XLA process group under torchrun); the
# native device needs their accelerator path, so XLA is turned off for them.
# Without torch_xla that path is off already and the environment stays as it was.
if importlib.util.find_spec("torch_xla") is not None:
    os.environ.setdefault("USE_TORCH_XLA", "0")

from . import _C  # noqa: E402  loads the runtime, kernels and device hooks
from .reports import fallback_report, kernels_run, reset_fallback_report  # noqa: E402

from .compile import NeuronCompileError, compile_records, compile_report, reset_compile_report  # noqa: E402

__all__ = ["NeuronCompileError", "compile_records", "compile_report", "fallback_report", "kernels_run",
           "reset_compile_report", "reset_fallback_report", "topology", "nki_op", "nki_report"]
__version__ = "0.1.0"

_registered = False


def _register() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    torch.utils.rename_privateuse1_backend("neuron")
    from . import neuron

    torch._register_device_module("neuron", neuron)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    # Dynamo and Inductor learn about the device lazily (compile/registration.py).
    from . import distributed as _distributed

    _distributed.register()
    # `import nki` / `neuronxcc.nki` resolve to torch_neuronx.nki where AWS's packages are absent.
    from .nki import aliases as _nki_aliases

    _nki_aliases.install()


def nki_op(name: str, **kwargs):
    """An NKI kernel's typed wrapper as a torch custom op (torch_neuronx/nki/op.py)."""
    from .nki.op import nki_op as make

    return make(name, **kwargs)


def nki_report() -> str:
    """Each NKI program of this process: instructions per engine, DMA bytes, predicted Trainium time."""
    from .nki.report import nki_report as report

    return report()


def topology() -> dict:
    """The emulated instance: platform, LNC and every visible logical NeuronCore."""
    return _C._topology()


_register()
