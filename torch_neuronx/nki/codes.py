"""The numbering of memories, engines, dtypes, opcodes and operators, read from
nki_runtime/ through the extension, so Python and C++ cannot disagree."""
from __future__ import annotations

_codes = None


def get() -> dict:
    global _codes
    if _codes is None:
        from torch_neuronx import _C
        _codes = {kind: dict(table) for kind, table in _C._nki_codes().items()}
    return _codes


def names() -> dict:
    """Each numbering inverted: number -> name."""
    return {kind: {number: name for name, number in table.items()} for kind, table in get().items()}
