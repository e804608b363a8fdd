"""Tells Dynamo and Inductor about the neuron device when torch.compile first needs it.

`import torch` must stay light, so nothing here runs at autoload. Two of torch's
own lookups reach it instead:
- the `torch_dynamo_backends` entry point `neuron` (setup.py): Dynamo loads
  `torch_neuronx.compile.entry` the first time a compile names backend="neuron";
- Inductor's `init_backend_registration()` asks the device module for
  `torch.neuron.Scheduling` before it lowers any graph for a PrivateUse1
  device; torch.neuron answers through `inductor_scheduling()` below.
"""
from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_done = False

# Read at plugin import, before Inductor's first cache_dir() call writes its default there.
_INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
_user_chose_inductor_cache = _INDUCTOR_CACHE_ENV in os.environ


def _inductor_cache_in_neff_cache() -> None:
    """Inductor's caches live in TORCH_NEURONX_NEFF_CACHE_DIR/inductor, unless the user chose a folder.

    Inductor has one cache folder per process, so CPU graphs compiled in the
    same process share it; its entries are keyed by graph, device and config.
    """
    if not _user_chose_inductor_cache:
        from .cache import inductor_dir

        os.environ[_INDUCTOR_CACHE_ENV] = inductor_dir()


def ensure_registered() -> None:
    """Registers the device interface and Inductor's device backend.

    The backend name "neuron" is not registered here: Dynamo registers it
    itself from the entry point, and refuses a second registration.
    """
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from . import device_interface, inductor_device, vector_isa

        device_interface.register()
        inductor_device.register()
        vector_isa.enable_for_process()
        _inductor_cache_in_neff_cache()
        _done = True


def is_registered() -> bool:
    return _done


def inductor_scheduling():
    """torch.neuron.Scheduling: registers everything, then answers with the registered scheduling.

    init_backend_registration() re-registers the device only when the module
    also has PythonWrapperCodegen and CppWrapperCodegen; torch.neuron has
    neither, so the registration made here (with its custom pass) stands.
    """
    ensure_registered()
    from torch._inductor.codegen.common import get_scheduling_for_device

    return get_scheduling_for_device("neuron")
