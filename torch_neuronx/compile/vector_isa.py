"""Vectorised kernels for compiled graphs.

Inductor's CPU kernels call Sleef for vectorised math (expf, logf, ...).
Debian's torch links Sleef as a shared library that nothing loads with
global symbols, so the kernels' .so files do not load; Inductor's probe of
the CPU's vector ISA then fails and it falls back to scalar code (about 2x
slower on softmax, normalisation and cross-entropy here). The backend makes
Sleef's symbols global once and tells Inductor the ISA is usable, which also
skips the probe (a second of g++ per process).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob

_patches: dict | None = None


def inductor_patches() -> dict:
    """Inductor config for vectorised kernels, or {} where Sleef is not installed."""
    global _patches
    if _patches is None:
        # The kernels include sleef.h (libsleef-dev) and call libsleef at run time.
        header = glob.glob("/usr/include/sleef.h") + glob.glob("/usr/include/*/sleef.h") + \
            glob.glob("/usr/local/include/sleef.h")
        library = ctypes.util.find_library("sleef") if header else None
        loaded = False
        if library:
            try:
                ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
                loaded = True
            except OSError:
                pass
        _patches = {"cpp.vec_isa_ok": True} if loaded else {}
    return dict(_patches)


def enable_for_process() -> None:
    """Vectorised kernels for every graph of the process, unless the user chose otherwise.

    Inductor probes the vector ISA once per process (cpu_vec_isa.valid_vec_isa_list
    is cached), so a per-compile patch loses to whichever compile comes first:
    graphs of the default route (neuron or CPU) would fix scalar code for the
    whole process, backend="neuron" included. Called when the device registers
    with Inductor, before its first lowering.
    """
    from .inductor_device import set_unless_user_chose

    for name, value in inductor_patches().items():
        set_unless_user_chose(name, value, "TORCHINDUCTOR_VEC_ISA_OK")
