"""NKI kernels in the Hugging Face `kernels` layout: a repository folder with
`metadata.json` and `build/torch-neuron/<package>/__init__.py` (the variant the
`kernels` library picks when torch.neuron exists).

`load_kernel(folder)` imports such a package from a local folder;
`kernelize(model, package)` gives the model's modules the package's layers
(each module keeps its weights; its forward becomes the layer's), as the
`kernels` library's kernelize does. `SHIPPED` is this project's own
repository: RMSNorm, SiLU-and-multiply and rotary embedding for Llama.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from typing import Dict, Optional

import torch

VARIANT = "torch-neuron"
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nki-llama-kernels")
_loaded: Dict[str, types.ModuleType] = {}


def load_kernel(folder: str) -> types.ModuleType:
    """The package under `folder`/build/torch-neuron/, imported once per process."""
    build = os.path.join(folder, "build", VARIANT)
    if not os.path.isfile(os.path.join(folder, "metadata.json")):
        raise FileNotFoundError(f"{folder} is not a kernel repository: it has no metadata.json")
    packages = sorted(d for d in os.listdir(build) if os.path.isfile(os.path.join(build, d, "__init__.py"))) \
        if os.path.isdir(build) else []
    if len(packages) != 1:
        raise FileNotFoundError(f"{build} must hold exactly one package with an __init__.py, found {packages}")
    name = packages[0]
    if name in _loaded:
        return _loaded[name]
    path = os.path.join(build, name, "__init__.py")
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[os.path.dirname(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    with open(os.path.join(folder, "metadata.json")) as f:
        module.metadata = json.load(f)
    _loaded[name] = module
    return module


# Which layer of a package replaces which transformers module, by the module's class name.
DEFAULT_MAPPING = {"RMSNorm": "RMSNorm", "MLP": "SiluAndMulMLP"}


def _layer_for(module: torch.nn.Module, package, mapping: Dict[str, str]) -> Optional[type]:
    cls = type(module).__name__
    for suffix, layer in mapping.items():
        if not cls.endswith(suffix) or not hasattr(package.layers, layer):
            continue
        if layer == "SiluAndMulMLP":  # only the gated MLP with SiLU
            act = getattr(module, "act_fn", None)
            if not all(hasattr(module, p) for p in ("gate_proj", "up_proj", "down_proj")) or \
                    type(act).__name__ not in ("SiLU", "SiLUActivation"):  # torch's or transformers' SiLU
                continue
        return getattr(package.layers, layer)
    return None


def kernelize(model: torch.nn.Module, package, mapping: Optional[Dict[str, str]] = None) -> int:
    """Gives each matching module of `model` the package's layer forward; returns how many."""
    swapped = 0
    for module in model.modules():
        layer = _layer_for(module, package, mapping or DEFAULT_MAPPING)
        if layer is not None:
            module.forward = types.MethodType(layer.forward, module)
            swapped += 1
    return swapped
