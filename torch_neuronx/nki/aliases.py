"""The import names of AWS's NKI packages, for machines that lack them.

`import nki`, `nki.language`, `nki.isa` (current API) and `neuronxcc.nki`,
`neuronxcc.nki.language`, `.isa`, `.typing` (beta API) resolve to this
package. The finder sits at the end of sys.meta_path and answers only when no
other finder found the name, so a real installation always wins.

`import torch` installs the finder (the plugin's autoload); so does
torch-neuronx-nki-names.pth in site-packages at interpreter start-up, for
scripts that import `neuronxcc.nki` before torch, as AWS's tutorials do. That
file runs this module on its own (no torch import until a name is asked for),
so it must need nothing but the standard library at import time.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

# alias -> module of this package that implements it
_CURRENT = {"nki": "torch_neuronx.nki", "nki.language": "torch_neuronx.nki.language",
            "nki.isa": "torch_neuronx.nki.isa", "nki.isa.constants": "torch_neuronx.nki.isa_constants",
            "nki.lnc": "torch_neuronx.nki.lnc", "nki.collectives": "torch_neuronx.nki.collectives"}
_BETA = {"neuronxcc": None, "neuronxcc.nki": "torch_neuronx.nki.beta",
         "neuronxcc.nki.language": "torch_neuronx.nki.language", "neuronxcc.nki.isa": "torch_neuronx.nki.beta_isa",
         "neuronxcc.nki.typing": "torch_neuronx.nki.nki_typing",
         "neuronxcc.nki.compiler": "torch_neuronx.nki.compiler"}
ALIASES = {**_CURRENT, **_BETA}


class _AliasLoader(importlib.abc.Loader):
    """A module of its own under the alias name, holding the implementing module's names:
    the implementation keeps its identity (one trace state, one set of classes), and the
    alias has an empty __path__, so its submodules come from this finder only."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return None  # the default: a fresh module object

    def exec_module(self, module):
        module.__path__ = []
        if self.target is None:  # a bare namespace (neuronxcc)
            return
        implementation = importlib.import_module(self.target)
        module.__dict__.update({k: v for k, v in vars(implementation).items() if not k.startswith("__")})
        module.__doc__ = implementation.__doc__
        module.__getattr__ = lambda name: getattr(implementation, name)


class AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in ALIASES:
            return None
        return importlib.machinery.ModuleSpec(name, _AliasLoader(ALIASES[name]), is_package=True)


def install() -> None:
    # By name: the start-up hook and the package each load this module under their own name.
    if not any(type(f).__name__ == AliasFinder.__name__ for f in sys.meta_path):
        sys.meta_path.append(AliasFinder())
