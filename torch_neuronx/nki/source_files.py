"""The source files a trace ran, so that a program kept on disk is used again only while they are
unchanged.

A kernel's instructions depend on everything it calls while it is traced: helper functions, other
@nki.jit kernels (inlined), constants of its module, in whatever files they live. A disk-cache key made
of the kernel's own source alone would serve a stale program, and a wrong answer, after an edit to any
of them. The tracer's own files are covered by the key's tracer version, and the installed libraries
(NumPy, torch) change only with an installation; every other file a trace ran is recorded with a digest
of its contents, and a cached program whose files changed is traced again.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
from typing import Dict, Optional, Set

_TRACER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # torch_neuronx
_TOOL_NAME = "torch_neuronx.nki source files"


@functools.lru_cache(maxsize=None)
def _libraries() -> tuple:
    """The standard library's and the installed packages' folders (read on the first trace: sysconfig is
    not among the modules `import torch` loads)."""
    import sysconfig
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")
                         if paths.get(k)}))


def _followed(path: str) -> bool:
    """Whether a change to this file may change a trace that is not otherwise in the disk-cache key."""
    if path.startswith(("<frozen ", "<__array_function__")):  # parts of the interpreter and of NumPy
        return False
    real = os.path.realpath(path)
    return not real.startswith(_TRACER + os.sep) and not any(real.startswith(lib + os.sep) for lib in _libraries())


def digest(path: str) -> Optional[str]:
    """A hash of the file's contents, or None when it cannot be read (code from a string, a notebook cell)."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return None


class Recorder:
    """Records the file of every Python function that starts while it is active (sys.monitoring)."""

    def __init__(self):
        self.files: Set[str] = set()
        self._tool: Optional[int] = None

    def __enter__(self) -> "Recorder":
        monitoring = sys.monitoring
        for tool in range(6):
            if monitoring.get_tool(tool) is None:
                try:
                    monitoring.use_tool_id(tool, _TOOL_NAME)
                except ValueError:  # another thread took it meanwhile
                    continue
                self._tool = tool
                break
        if self._tool is not None:  # else other tools (debuggers, profilers, coverage) hold all six ids
            monitoring.register_callback(self._tool, monitoring.events.PY_START, self._started)
            monitoring.set_events(self._tool, monitoring.events.PY_START)
        return self

    def _started(self, code, offset):
        self.files.add(code.co_filename)

    def __exit__(self, *exc) -> None:
        if self._tool is None:
            return
        monitoring = sys.monitoring
        monitoring.set_events(self._tool, 0)
        monitoring.register_callback(self._tool, monitoring.events.PY_START, None)
        monitoring.free_tool_id(self._tool)

    def digests(self) -> Optional[Dict[str, str]]:
        """{file: digest} of the followed files the trace ran; None when one of them is no readable file
        (its code came from a string or a notebook) or nothing was recorded: such a program is kept in
        memory only."""
        if self._tool is None:
            return None
        result = {}
        for path in sorted(self.files):
            if not _followed(path):
                continue
            result[path] = digest(path)
            if result[path] is None:
                return None
        return result


def unchanged(digests: Dict[str, str]) -> bool:
    return all(digest(path) == value for path, value in digests.items())
