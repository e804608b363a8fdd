"""neuronxcc.nki.compiler (beta API): placement and scheduling directives.

Kernels that place their tiles by hand (`buffer=nki.compiler.sbuf.mod_alloc(base_addr=..., num_free_tiles=...)`,
`psum.mod_alloc(base_bank=..., num_bank_tiles=...)`) or pin instruction order (`no_reorder`,
`skip_middle_end_transformations`) run here as written. The emulator places every tile itself, so the
given addresses are checked against the NeuronCore's capacity (a placement past the end of SBUF or of
the 8 PSUM banks is an error, as in the compiler) but do not alias tiles to each other; the instruction
order of a traced kernel is its program order already.
"""
from __future__ import annotations

from typing import Sequence

from .trace import NkiError


class _Placement:
    """A tile's buffer with the placement the kernel asked for."""

    def __init__(self, name: str, start: int, tiles: Sequence[int]):
        self.name, self.start, self.tiles = name, int(start), tuple(int(t) for t in tiles)


class _SbufPlacement(_Placement):
    pass


class _PsumPlacement(_Placement):
    pass


class sbuf:  # noqa: N801 - the name kernels use
    @staticmethod
    def mod_alloc(base_addr: int = 0, base_partition: int = 0, num_par_tiles: Sequence[int] = (),
                  num_free_tiles: Sequence[int] = (), **_) -> _Placement:
        """SBUF from byte `base_addr` of each partition, rotating over `num_free_tiles` buffers."""
        if base_addr < 0 or not 0 <= base_partition < 128:
            raise NkiError(f"sbuf.mod_alloc: base_addr {base_addr} / base_partition {base_partition} out of range")
        return _SbufPlacement("sbuf", base_addr, num_free_tiles)

    @staticmethod
    def alloc(placement) -> _Placement:
        """SBUF placed by a function of each block's index (not emulated: the emulator places tiles)."""
        if not callable(placement):
            raise NkiError(f"sbuf.alloc takes a function of a block's index, not {placement!r}")
        return _SbufPlacement("sbuf", 0, ())


class psum:  # noqa: N801
    @staticmethod
    def mod_alloc(base_bank: int = 0, num_bank_tiles: Sequence[int] = (), base_addr: int = 0, **_) -> _Placement:
        """PSUM from bank `base_bank`, rotating over `num_bank_tiles` banks."""
        banks = 1
        for t in num_bank_tiles:
            banks *= int(t)
        if not 0 <= base_bank or base_bank + banks > 8:
            raise NkiError(f"psum.mod_alloc: banks {base_bank}..{base_bank + banks - 1} are past the 8 PSUM banks "
                           "of a NeuronCore")
        return _PsumPlacement("psum", base_bank, num_bank_tiles)

    @staticmethod
    def alloc(placement) -> _Placement:
        """PSUM banks chosen by a function of each block's index (not emulated: each block is a tile of its
        own, counted against the 8 banks while it lives)."""
        if not callable(placement):
            raise NkiError(f"psum.alloc takes a function of a block's index, not {placement!r}")
        return _PsumPlacement("psum", 0, ())


def check_placement(buffer, bytes_per_partition: int, capacity: int, what: str) -> None:
    """A hand-placed SBUF tile must end within the partition's capacity."""
    if isinstance(buffer, _SbufPlacement) and buffer.start + bytes_per_partition > capacity:
        raise NkiError(f"{what} placed at byte {buffer.start} of each partition needs {bytes_per_partition} bytes: "
                       f"it ends at {buffer.start + bytes_per_partition}, past the {capacity} bytes of a partition")


def skip_middle_end_transformations(kernel):
    """Decorator: the compiler keeps the kernel's instructions as written (here they always are)."""
    return kernel


def enable_stack_allocator(kernel=None, **_):
    return kernel if kernel is not None else (lambda k: k)


class no_reorder:  # noqa: N801
    """A loop directive: keep the instructions in program order (here they always are)."""

    def __init__(self, *_, **__):
        pass
