"""Tracing an NKI kernel into an instruction program.

A kernel runs once per input signature with `View`s in place of its tensors;
every nl/nisa call appends instructions to the current `Trace` instead of
computing. Python loops unroll as they run; `nl.affine_range` also records
which iteration each instruction belongs to, so the verifier can find
iterations that depend on each other. The finished trace is handed to the C++
verifier and executor (nki_runtime/) as plain tuples.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Dict, List, Optional, Sequence, Tuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_state = threading.local()


class NkiError(Exception):
    """A kernel broke a rule of the NKI language or of the NeuronCore."""


def tracing() -> bool:
    """Whether a kernel is being traced on this thread (a jit kernel called then is inlined)."""
    return getattr(_state, "trace", None) is not None


def current() -> "Trace":
    trace = getattr(_state, "trace", None)
    if trace is None:
        raise NkiError("NKI language functions run only inside a kernel called through nki.jit")
    return trace


DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16",
    "fp16": "float16", "half": "float16", "tfloat32": "tfloat32", "float8_e4m3": "float8_e4m3",
    "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2", "int8": "int8", "int16": "int16",
    "int32": "int32", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "bool": "bool", "bool_": "bool",
    "float": "float32", "int": "int32", "int64": "int64",
    # Microscaling (MX) data, four values packed in one element (nki_runtime/Microscaling.h)
    "float8_e5m2_x4": "float8_e5m2_x4", "float8_e4m3fn_x4": "float8_e4m3fn_x4", "float4_e2m1fn_x4": "float4_e2m1fn_x4",
}
MAX_AXES = 8  # axes of one access pattern (nki_runtime/Program.h kMaxAxes)
REGISTERS = "nki_registers"  # the name of the tensor that holds a kernel's virtual registers (device_loops.py)
# The register files by dtype: the sequencers' int32 registers, and the uint32 and 64-bit scalars' (SDK 2.33+).
REGISTER_FILES = {"int32": REGISTERS, "uint32": "nki_registers_u32", "int64": "nki_registers_64"}
FLOATS = ("float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2")
BYTES = {"float32": 4, "tfloat32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
         "uint16": 2, "float8_e4m3": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1, "bool": 1,
         "float8_e5m2_x4": 4, "float8_e4m3fn_x4": 4, "float4_e2m1fn_x4": 2, "int64": 8}
PACKED = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")
# The values each integer dtype holds: [low, high].
INTEGER_RANGES = {name: (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if name.startswith("int") else
                  (0, (1 << (8 * size)) - 1) for name, size in BYTES.items() if name.startswith(("int", "uint"))}
INTEGER_RANGES["bool"] = (0, 1)


def dtype_name(dtype) -> str:
    """The NKI name of a dtype given as a string, an nl constant, a numpy or a torch dtype."""
    if dtype is None:
        raise NkiError("a dtype is required")
    text = str(dtype).replace("torch.", "").replace("<class 'numpy.", "").replace("'>", "")
    text = {"float8_e4m3fn": "float8_e4m3"}.get(text, text)
    name = DTYPE_ALIASES.get(text)
    if name is None:
        try:
            import numpy as np
            name = DTYPE_ALIASES.get(np.dtype(dtype).name)
        except TypeError:
            name = None
    if name is None:
        raise NkiError(f"{dtype!r} is not a NeuronCore dtype ({', '.join(sorted(set(DTYPE_ALIASES.values())))})")
    return name


def promote(a: str, b: str) -> str:
    if a == b:
        return a
    if (a in FLOATS) != (b in FLOATS):
        return a if a in FLOATS else b
    if a in FLOATS:
        return "float32"
    return a if BYTES[a] >= BYTES[b] else b


class TensorDecl:
    """A tensor of the kernel: an HBM argument or output, or an on-chip tile."""

    def __init__(self, tid: int, name: str, memory: str, dtype: str, shape: Tuple[int, ...], argument: int,
                 line: int, blocks: int = 1):
        self.id, self.name, self.memory, self.dtype = tid, name, memory, dtype
        self.shape, self.argument, self.line = shape, argument, line
        self.blocks = blocks  # on-chip: tiles side by side in each partition (the axes before nl.par_dim)
        self.alias_of = -1  # >= 0: another tensor's memory seen as this dtype and shape (.ap(dtype=...))
        self.staging = False  # an .indirect() operand's columns for one instruction (indirection.py)

    def strides(self) -> Tuple[int, ...]:
        strides, step = [], 1
        for size in reversed(self.shape):
            strides.append(step)
            step *= size
        return tuple(reversed(strides))


class Bound:
    """A tensor dimension indexed by an affine expression of the view's axes (checked once masks apply)."""

    def __init__(self, size: int, const: int, terms: List[Tuple[int, int]], dim: int):
        self.size, self.const, self.terms, self.dim = size, const, terms, dim


from .views import TensorViews  # noqa: E402 - it reads this module's names as it runs, not as it loads


class View(TensorViews):
    """A strided view of a kernel tensor: what NKI calls a tensor or a tile (AWS's NkiTensor; its view
    methods are in views.py).

    An on-chip tile declared with `nl.par_dim` after leading block axes
    ([blocks, par_dim(128), free]) is stored partition first, as the hardware
    holds it; its views keep the declared axis order and remember where the
    partition axis is (`partition_axis`) until indexing the blocks drops them.
    """

    def __init__(self, decl: TensorDecl, offset: int, sizes: Sequence[int], strides: Sequence[int],
                 axis_vars: Optional[Sequence[Optional[int]]] = None, bounds: Sequence[Bound] = (),
                 partition_axis: int = 0):
        self.decl, self.offset = decl, int(offset)
        self.sizes, self.strides = tuple(int(s) for s in sizes), tuple(int(s) for s in strides)
        self.axis_vars = tuple(axis_vars) if axis_vars is not None else (None,) * len(self.sizes)
        self.bounds = tuple(bounds)
        self.partition_axis = partition_axis
        self.vector_offset: Optional[Tuple["View", int]] = None  # (index tile, axis): View.ap(vector_offset=...)
        self.dynamic = None  # a VirtualRegister whose value moves the view as it runs: View.ap(scalar_offset=...)

    @classmethod
    def whole(cls, decl: TensorDecl) -> "View":
        return cls(decl, 0, decl.shape, decl.strides())

    # What kernels read of a tensor.
    @property
    def shape(self) -> Tuple[int, ...]:
        return self.sizes

    @property
    def dtype(self) -> str:
        return self.decl.dtype

    @property
    def buffer(self) -> str:
        return self.decl.memory

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def data(self) -> "View":
        """The tensor itself, as a grid's .data is (kernels written for grids use both)."""
        return self

    @property
    def itemsize(self) -> int:
        return BYTES[self.dtype]

    @property
    def name(self) -> str:
        return self.decl.name

    def __repr__(self) -> str:
        return f"nki tensor '{self.decl.name}' {list(self.sizes)} {self.dtype} in {self.buffer}"

    def __len__(self) -> int:
        return self.sizes[0]

    def __iter__(self):
        raise NkiError(f"{self!r} cannot be iterated in a kernel: index it with a loop variable")

    def __bool__(self):
        raise NkiError(f"the value of {self!r} is on the device: a kernel cannot branch on it")

    def is_whole(self) -> bool:
        return self.offset == 0 and self.sizes == self.decl.shape and self.strides == self.decl.strides()

    def access(self) -> tuple:
        return (self.decl.id, self.offset, self.sizes, self.strides)

    def elements(self) -> int:
        count = 1
        for s in self.sizes:
            count *= s
        return count

    def __getitem__(self, key) -> "View":
        from . import indexing
        return indexing.index(self, key)

    def __setitem__(self, key, value) -> None:
        from . import language as nl
        target = self[key]
        if value is target or (isinstance(value, View) and value.access() == target.access()):
            return  # `t[i] += x` writes through the view already
        nl.assign(target, value)

    def reshape(self, *shape) -> "View":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
        count = self.elements()
        if -1 in shape:
            known = 1
            for s in shape:
                known *= s if s != -1 else 1
            shape = tuple(count // known if s == -1 else s for s in shape)
        if self.partition_axis != 0:
            raise NkiError(f"cannot reshape {self!r}: its partition axis (nl.par_dim) is axis "
                           f"{self.partition_axis}; index its block axes first")
        if not self.is_contiguous() or _product(shape) != count:
            raise NkiError(f"cannot reshape {self!r} to {list(shape)}: only whole contiguous views reshape")
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step *= size
        return View(self.decl, self.offset, shape, tuple(reversed(strides)))

    def is_contiguous(self) -> bool:
        step = 1
        for size, stride in zip(reversed(self.sizes), reversed(self.strides)):
            if size != 1 and stride != step:
                return False
            step *= size
        return True

    def broadcast_to(self, shape) -> "View":
        shape = tuple(shape)
        if len(shape) != self.ndim or any(s != t and s != 1 for s, t in zip(self.sizes, shape)):
            raise NkiError(f"cannot broadcast {self!r} to {list(shape)}")
        strides = tuple(0 if s != t else st for s, t, st in zip(self.sizes, shape, self.strides))
        spread = View(self.decl, self.offset, shape, strides, self.axis_vars, self.bounds, self.partition_axis)
        if self.buffer == "hbm" or self.sizes[self.partition_axis] == shape[self.partition_axis]:
            return spread
        # Across partitions an engine cannot read one partition for many: the tile is copied into a new one
        # (by DMA here), as nl.broadcast_to documents ("a new tile broadcast along the partition dimension").
        from . import language as nl
        out = nl.ndarray(shape, self.dtype, nl.sbuf)
        nl._emit("dma_copy", "dma", out, (spread.partition_first(),), None)
        return out

    def permuted(self, order: Sequence[int]) -> "View":
        """The same elements, axis order[i] of this view as axis i (a strided view reads them in any order)."""
        order = list(order)
        bounds = [Bound(b.size, b.const, [(order.index(a), c) for a, c in b.terms], b.dim) for b in self.bounds]
        moved = View(self.decl, self.offset, [self.sizes[a] for a in order], [self.strides[a] for a in order],
                     [self.axis_vars[a] for a in order], bounds, order.index(self.partition_axis))
        moved.dynamic = self.dynamic
        return moved

    def partition_first(self) -> "View":
        """The same elements with the partition axis moved to the front, as instructions take them."""
        k = self.partition_axis
        return self if k == 0 else self.permuted([k] + [a for a in range(self.ndim) if a != k])

    def ap(self, pattern, offset: int = 0, vector_offset: Optional["View"] = None, indirect_dim: int = 0,
           dtype=None, scalar_offset=None, **unsupported) -> "View":
        """An explicit access pattern: [[stride, count], ...], partition first. With `vector_offset` (an SBUF
        tile of int32/uint32, one value per step of axis `indirect_dim`) the DMA reads step i of that axis at
        the tile's i-th value instead (an indirect DMA: a gather of rows chosen as the kernel runs)."""
        if dtype is not None and dtype_name(dtype) != self.dtype:
            return self._as_dtype(dtype_name(dtype)).ap(pattern, offset, vector_offset, indirect_dim,
                                                         scalar_offset=scalar_offset, **unsupported)
        if unsupported:
            raise NkiError(f".ap({', '.join(sorted(unsupported))}=...) is not supported by this emulator yet")
        view = View(self.decl, self.offset + offset, [c for _, c in pattern], [s for s, _ in pattern])
        if vector_offset is not None:
            if not 0 <= indirect_dim < view.ndim:
                raise NkiError(f"indirect_dim {indirect_dim} of a {view.ndim}-axis access pattern")
            view.vector_offset = (vector_offset, indirect_dim)
        if scalar_offset is not None:  # moved by a register's value (in elements) as the kernel runs
            from .device_loops import VirtualRegister
            if not isinstance(scalar_offset, VirtualRegister):
                raise NkiError(f".ap(scalar_offset=...) takes a VirtualRegister (nisa.register_alloc, a device "
                               f"loop's index), not {type(scalar_offset).__name__}")
            if scalar_offset.dtype == "uint32":
                raise NkiError(".ap(scalar_offset=...) takes a signed scalar (int32, or int64 for HBM), not uint32")
            if scalar_offset.dtype == "int64" and view.buffer != "hbm":
                raise NkiError(f".ap(scalar_offset=...) of an {view.buffer.upper()} tile takes an int32 scalar; "
                               "64-bit offsets are for HBM access patterns")
            view.dynamic = scalar_offset
        return view

    def _as_dtype(self, dtype: str) -> "View":
        """The bytes of this tensor as `dtype` (`.ap(dtype=...)`), starting where this view starts; the pattern
        and offset given with it count elements of `dtype`. An HBM tensor becomes a flat one; an on-chip tile
        keeps its partitions, each partition's bytes read as `dtype`."""
        decl = self.decl
        if dtype not in BYTES:
            raise NkiError(f"{self!r}.ap(dtype={dtype}): no such dtype here")
        old, new = BYTES[decl.dtype], BYTES[dtype]
        if decl.memory == "hbm":
            shape = (_product(decl.shape) * old // new,)
            whole_bytes = _product(decl.shape) * old
        else:
            if decl.blocks != 1:
                raise NkiError(f"{self!r}.ap(dtype={dtype}): a tile of blocks (nl.par_dim after block axes) cannot "
                               "be read as another dtype here; declare the block as a tile of its own")
            whole_bytes = _product(decl.shape[1:]) * old
            shape = (decl.shape[0], whole_bytes // new)
        start = self.offset * old
        if whole_bytes % new or start % new:
            raise NkiError(f"{self!r}.ap(dtype={dtype}): its {whole_bytes} bytes"
                           f"{'' if decl.memory == 'hbm' else ' per partition'} from byte {start} do not split "
                           f"into whole {dtype} elements")
        alias = current().alias_tensor(decl, dtype, shape)
        return View(alias, start // new, alias.shape, alias.strides())

    def astype(self, dtype) -> "View":
        from . import language as nl
        return nl.copy(self, dtype=dtype)

    # Arithmetic on tiles is the nl functions.
    def _binary(self, name, other, reverse=False):
        from . import language as nl
        fn = getattr(nl, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("subtract", o)
    def __rsub__(self, o): return self._binary("subtract", o, True)
    def __mul__(self, o): return self._binary("multiply", o)
    def __rmul__(self, o): return self._binary("multiply", o, True)
    def __truediv__(self, o): return self._binary("divide", o)
    def __rtruediv__(self, o): return self._binary("divide", o, True)
    def __pow__(self, o): return self._binary("power", o)
    def __neg__(self):
        from . import language as nl
        return nl.negative(self)
    def __lt__(self, o): return self._binary("less", o)
    def __le__(self, o): return self._binary("less_equal", o)
    def __gt__(self, o): return self._binary("greater", o)
    def __ge__(self, o): return self._binary("greater_equal", o)

    def __iadd__(self, other):
        from . import language as nl
        nl.accumulate_into(self, other)
        return self

    def __isub__(self, other):
        from . import language as nl
        nl.accumulate_into(self, nl.negative(other) if isinstance(other, View) else -other)
        return self

    def __imul__(self, other):
        from . import language as nl
        nl.assign(self, nl.multiply(self, other))
        return self


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


class Trace:
    """The instructions and tensors of one kernel for one input signature."""

    def __init__(self, kernel: str, file: str, grid: Tuple[int, ...], version: int):
        self.kernel, self.file, self.grid, self.version = kernel, file, grid, version
        self.tensors: List[TensorDecl] = []
        self.instructions: List[dict] = []
        self.loop_nests: List[list] = []
        self._nest_ids: Dict[tuple, int] = {}
        self.loop_stack: List[Tuple[int, int]] = []
        self.next_loop = 0
        self.arguments = 0
        self.print_labels: List[tuple] = []  # nl.device_print: (prefix, dtype) per label number
        self.program_id: Tuple[int, ...] = (0,) * max(len(grid), 1)
        self.grid_instance = 0
        self.shared: List[TensorDecl] = []  # shared_hbm tensors in allocation order (one set for all instances)
        self.constants: Dict[tuple, Tuple[TensorDecl, object]] = {}  # nl.shared_constant: data -> (tensor, values)
        self._shared_seen = 0
        self.aliases: Dict[tuple, TensorDecl] = {}  # (HBM tensor id, dtype) -> its bytes as that dtype
        self.registers: Dict[str, TensorDecl] = {}  # engine -> its reduce_cmd accumulator registers
        # The sequencers' virtual registers (device_loops.py): dtype -> its register file and how many it holds.
        self.register_files: Dict[str, TensorDecl] = {}
        self.register_counts: Dict[str, int] = {}
        self.next_var = 0
        self.psum_written: Dict[int, List[Tuple[int, int]]] = {}
        self.sequencer_depth = 0  # device loops and nl.if_else sides being traced around the current call
        self.no_reorder_depth = 0  # nl.no_reorder regions around the current call
        self.collectives: list = []  # nki.lnc calls, as lnc.py records them
        self.prepared_collective = None  # nki.collectives' one prepare slot (collectives.py, SDK 2.34)

    def __enter__(self):
        if getattr(_state, "trace", None) is not None:
            raise NkiError("a kernel called another nki.jit kernel: call its Python function instead")
        _state.trace = self
        return self

    def __exit__(self, *exc):
        _state.trace = None

    def line(self) -> int:
        """The line of the kernel's source that made the current call."""
        frame = sys._getframe(1)
        while frame is not None:
            if not frame.f_code.co_filename.startswith(_PACKAGE_DIR):
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def where(self) -> str:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            frame = frame.f_back
        file = frame.f_code.co_filename if frame else self.file
        return f"{os.path.basename(file)}:{frame.f_lineno if frame else 0}"

    def error(self, message: str) -> NkiError:
        return NkiError(f"kernel '{self.kernel}', {self.where()}: {message}")

    def new_tensor(self, memory: str, dtype: str, shape: Sequence[int], name: str = "",
                   argument: int = -1, blocks: int = 1) -> TensorDecl:
        shape = tuple(int(s) for s in shape)
        if any(s < 1 for s in shape) or not shape:
            raise self.error(f"tensor shape {list(shape)} must have positive sizes")
        if memory == "shared_hbm":
            if self._shared_seen < len(self.shared):  # a later SPMD instance: the same output
                decl = self.shared[self._shared_seen]
                self._shared_seen += 1
                return decl
            argument = self.arguments
            self.arguments += 1
        decl = TensorDecl(len(self.tensors), name or f"{memory}_{len(self.tensors)}",
                          "hbm" if memory in ("shared_hbm", "private_hbm", "hbm") else memory, dtype, shape,
                          argument, self.line(), blocks)
        if memory == "shared_hbm":
            self.shared.append(decl)
            self._shared_seen += 1
        if decl.memory in ("sbuf", "psum"):
            self._check_tile(decl)
        self.tensors.append(decl)
        return decl

    def _check_tile(self, decl: TensorDecl) -> None:
        if decl.shape[0] > 128:
            raise self.error(f"{decl.memory} tile {list(decl.shape)} has {decl.shape[0]} partitions; "
                             "the partition dimension is at most 128 (nl.tile_size.pmax)")
        per_partition = _product(decl.shape[1:]) * BYTES[decl.dtype] // decl.blocks
        if decl.memory == "psum" and per_partition > 2048:
            raise self.error(f"psum tile {list(decl.shape)} {decl.dtype} holds {per_partition} bytes per "
                             "partition; a PSUM tile is at most one 2 KiB bank (512 fp32, nl.tile_size.psum_fmax)")

    def constant_tensor(self, values, dtype: str) -> TensorDecl:
        """An HBM tensor holding `values` (a CPU torch tensor of `dtype`), one per distinct constant: the call
        passes it like an argument, as the runtime loads a NEFF's constants into HBM."""
        import torch
        key = (dtype, tuple(values.shape), values.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        if key not in self.constants:
            decl = TensorDecl(len(self.tensors), f"constant_{len(self.constants)}", "hbm", dtype,
                              tuple(values.shape), self.arguments, self.line())
            self.arguments += 1
            self.tensors.append(decl)
            self.constants[key] = (decl, values)
        return self.constants[key][0]

    def alias_tensor(self, decl: TensorDecl, dtype: str, shape: Tuple[int, ...]) -> TensorDecl:
        """`decl`'s memory as a tensor of `dtype` and `shape` (one per tensor, dtype and shape). An HBM
        argument's alias is passed the same buffer by the call; any other alias names the tensor that owns
        the memory (alias_of), whose place in the arena it shares."""
        root = self.tensors[decl.alias_of] if decl.alias_of >= 0 else decl
        key = (root.id, dtype, tuple(shape))
        if key not in self.aliases:
            alias = TensorDecl(len(self.tensors), f"{root.name}_as_{dtype}", root.memory, dtype, tuple(shape),
                               root.argument, self.line())
            alias.alias_of = root.id if root.argument < 0 else -1
            self.tensors.append(alias)
            self.aliases[key] = alias
        return self.aliases[key]

    def new_register(self, dtype: str = "int32") -> int:
        count = self.register_counts[dtype] = self.register_counts.get(dtype, 0) + 1
        self.register_file(count, dtype)
        return count - 1

    def register_file(self, at_least: int, dtype: str = "int32") -> TensorDecl:
        """The virtual registers of `dtype` as one HBM scratch tensor, as long as the registers allocated so far."""
        if dtype not in self.register_files:
            self.register_files[dtype] = self.new_tensor("private_hbm", dtype, (at_least,), REGISTER_FILES[dtype])
        decl = self.register_files[dtype]
        if decl.shape[0] < at_least:
            decl.shape = (at_least,)
        return decl

    def reduce_registers(self, engine: str) -> "View":
        """The accumulator registers of `engine`'s side reductions (reduce_cmd): one fp32 per partition, a
        hidden [128, 1] SBUF tile of the kernel."""
        if engine not in self.registers:
            self.registers[engine] = self.new_tensor("sbuf", "float32", (128, 1), f"{engine}_reduce_registers")
        decl = self.registers[engine]
        return View(decl, 0, decl.shape, decl.strides())

    def argument_tensor(self, dtype: str, shape: Sequence[int], name: str) -> TensorDecl:
        decl = TensorDecl(len(self.tensors), name, "hbm", dtype, tuple(shape), self.arguments, 0)
        self.arguments += 1
        self.tensors.append(decl)
        return decl

    def start_instance(self, index: int, program_id: Tuple[int, ...]) -> None:
        self.grid_instance, self.program_id, self._shared_seen = index, program_id, 0

    def new_var(self) -> int:
        self.next_var += 1
        return self.next_var

    def emit(self, opcode: str, engine: str, dst: View, inputs: Sequence[View] = (), **fields) -> dict:
        from . import codes, indirection
        if indirection.involved(dst, inputs):  # staged around the instruction (indirection.py)
            return indirection.emit(self, opcode, engine, dst, inputs, fields)
        for view in (dst, *inputs):
            if view.ndim > MAX_AXES:
                raise self.error(f"{opcode}: {view!r} has {view.ndim} axes; an access pattern has at most {MAX_AXES}")
        c = codes.get()
        loops = -1
        if self.loop_stack:
            nest = tuple(self.loop_stack)
            loops = self._nest_ids.get(nest)
            if loops is None:
                loops = self._nest_ids[nest] = len(self.loop_nests)
                self.loop_nests.append([list(level) for level in nest])
        instruction = {
            "opcode": c["opcode"][opcode], "engine": c["engine"][engine], "dst": dst, "inputs": list(inputs),
            "op0": c["alu"][fields.get("op0", "bypass")], "op1": c["alu"][fields.get("op1", "bypass")],
            "operand0": fields.get("operand0", (-1, 0.0)), "operand1": fields.get("operand1", (-1, 0.0)),
            "operand2": fields.get("operand2", (-1, 0.0)),
            "reverse0": bool(fields.get("reverse0", False)), "reverse1": bool(fields.get("reverse1", False)),
            "function": c["function"][fields.get("function", "copy")],
            "reduce_axes": int(fields.get("reduce_axes", 0)), "negate": bool(fields.get("negate", False)),
            "accumulate": bool(fields.get("accumulate", False)),
            "coefficients": [float(v) for v in fields.get("coefficients", ())],
            "integers": [int(v) for v in fields.get("integers", ())],
            "indirect": bool(fields.get("indirect", False)), "indirect_dim": int(fields.get("indirect_dim", 0)),
            "indirect_dst": bool(fields.get("indirect_dst", False)),
            "skip_oob": bool(fields.get("skip_oob", False)),
            "dynamic": [(k - 1, view.dynamic) for k, view in enumerate((dst, *inputs)) if view.dynamic is not None],
            "line": self.line(), "grid_instance": self.grid_instance, "loops": loops,
            "name": opcode,
        }
        self.instructions.append(instruction)
        return instruction

    def encoded(self) -> dict:
        """The program as the C++ builder takes it (plain tuples, picklable for the disk cache)."""
        from . import codes
        c = codes.get()
        tensors = [(t.name, c["memory"][t.memory], c["dtype"][t.dtype], list(t.shape), t.argument, t.blocks,
                    t.alias_of, t.staging) for t in self.tensors]
        instructions = []
        for ins in self.instructions:
            enc = {k: v for k, v in ins.items() if k != "name"}
            enc["dst"] = ins["dst"].access()
            enc["inputs"] = [v.access() for v in ins["inputs"]]
            enc["dynamic"] = [(k, register.view().access()) for k, register in ins["dynamic"]]
            instructions.append(enc)
        return {"kernel": self.kernel, "file": self.file, "tensors": tensors, "instructions": instructions,
                "loop_nests": [[tuple(l) for l in nest] for nest in self.loop_nests], "arguments": self.arguments,
                "print_labels": list(self.print_labels),
                "collectives": any(ins["name"] == "collective" for ins in self.instructions)}
