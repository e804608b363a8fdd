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

import threading

_lock = threading.Lock()
_done = False


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
        from . import device_interface, inductor_device

        device_interface.register()
        inductor_device.register()
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
