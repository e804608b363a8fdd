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
