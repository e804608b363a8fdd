"""Tensor indirection (AWS's NkiTensor.indirect, NKI 0.5, NeuronCore-v4): an operand of a compute
instruction whose columns an index tile chooses as the kernel runs (a gather when it is read, a scatter when
it is written).

`data.indirect(index, num_elem)` gives a view of shape [P, num_elem] that stands for those columns. When an
instruction takes it, the tracer stages it in a tile of its own: a column_gather instruction before it (for a
dst too, so that what the instruction leaves unwritten keeps the data's values) and a column_scatter after
it for a dst, on the instruction's engine, left out of the cost model (the hardware reads the columns in
place). The runtime's side is nki_runtime/TensorIndirection.

Offsets are uint16 elements along the data's free axis, from the data view's start. Partitions go in groups
of 16 (Vector, Scalar, GpSimd) or 32 (Tensor engine), and column i of a group's partitions comes from
index[group's first partition + i % G, i // G] (AWS's snake order). Which instructions and operands take an
indirect view, and the rules the hardware adds, are AWS's (the ISA pages of the 13 instructions of NKI 0.5);
the verifier checks the rest (uint16 index in SBUF on a quadrant, enough index columns, whole groups)."""
from __future__ import annotations

import itertools
from typing import List, Optional, Sequence

from .trace import TensorDecl, View, current

_placeholder_ids = itertools.count(1)

# The instructions that take an indirect operand (as the tracer names them) and which of their inputs may be
# one; every one of them may scatter its dst. tensor_tensor_scan and select stand for tensor_scalar_cumulative
# and tensor_copy_predicated, which the tracer records so.
_INDIRECT_INPUTS = {
    "nc_matmul": (0, 1), "nc_matmul_mx": (0, 1, 2, 3), "tensor_tensor": (0,), "tensor_scalar": (0,),
    "tensor_reduce": (0,), "tensor_copy": (0,), "select": (0,), "tensor_tensor_scan": (), "activation": (0,),
}
_PUBLIC = ("nc_matmul, nc_matmul_mx, tensor_tensor (dst, data1), tensor_scalar (dst, data), tensor_reduce, "
           "tensor_copy, tensor_copy_predicated (dst, predicate), tensor_scalar_reduce, tensor_scalar_cumulative, "
           "activation, activation_reduce, exponential")
_TENSOR_ENGINE_DTYPES = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn_x4",
                         "float8_e5m2_x4", "float4_e2m1fn_x4")


class IndirectColumns(TensorDecl):
    """What an .indirect() view stands for: columns of `data` chosen by `index`. Never a tensor of the
    program: each instruction that takes it gets a staging tile of its own."""

    def __init__(self, data: View, index: View, num_elem: int):
        super().__init__(-next(_placeholder_ids), f"{data.name}.indirect", data.buffer, data.dtype,
                         (data.shape[0], num_elem), -1, current().line())
        self.data, self.index = data, index


def indirect(data: View, index: View, num_elem: Optional[int] = None) -> View:
    """NkiTensor.indirect: the [P, num_elem] view of data's columns that `index` ([P, K] uint16, SBUF) picks;
    num_elem defaults to index.size, as AWS documents it."""
    trace = current()
    name = f"{data!r}.indirect"
    if trace.version < 4:
        raise trace.error(f"{name}: tensor indirection is a NeuronCore-v4 (trn3) feature; this kernel runs on a "
                          f"NeuronCore-v{trace.version} (nki.jit(platform_target='trn3'))")
    if isinstance(data.decl, IndirectColumns) or data.is_indirect() or data.bounds:
        raise trace.error(f"{name}: the view is already indirect or masked")
    if data.buffer not in ("sbuf", "psum") or data.ndim != 2 or data.partition_axis != 0:
        raise trace.error(f"{name}: gathers columns of a [partitions, free] SBUF or PSUM view (flatten its free "
                          f"dims first)")
    if not isinstance(index, View) or index.buffer != "sbuf" or index.dtype != "uint16" or index.ndim != 2:
        raise trace.error(f"{name}: the index must be a [partitions, K] uint16 SBUF tile, not {index!r}")
    if index.shape[0] != data.shape[0]:
        raise trace.error(f"{name}: the index has {index.shape[0]} partitions and the data {data.shape[0]}")
    count = index.elements() if num_elem is None else num_elem
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise trace.error(f"{name}: num_elem must be a positive int, not {num_elem!r}")
    decl = IndirectColumns(data, index, count)
    return View(decl, 0, decl.shape, decl.strides())


def columns_of(view: View) -> Optional[IndirectColumns]:
    return view.decl if isinstance(view.decl, IndirectColumns) else None


def involved(dst: View, inputs: Sequence[View]) -> bool:
    return any(isinstance(v.decl, IndirectColumns) for v in (dst, *inputs))


def _start_partition(view: View) -> int:
    decl = view.decl
    per_partition = 1
    for size in decl.shape[1:]:
        per_partition *= size
    return view.offset // per_partition


def _check(trace, opcode: str, engine: str, dst: View, inputs: List[View]) -> None:
    allowed = _INDIRECT_INPUTS.get(opcode)
    if allowed is None:
        raise trace.error(f"{opcode} does not take an .indirect() view; tensor indirection works on {_PUBLIC} "
                          "(for HBM, DMA takes .ap(vector_offset=...))")
    for k, view in enumerate(inputs):
        if columns_of(view) is not None and k not in allowed and view.decl is not dst.decl:
            raise trace.error(f"{opcode}: its input {k} cannot be an .indirect() view; tensor indirection works on "
                              f"{_PUBLIC}")
    if opcode == "tensor_copy" and engine == "gpsimd":
        raise trace.error("tensor_copy: the GpSimd engine takes no .indirect() view (use the Vector or Scalar "
                          "engine)")
    if engine == "tensor":  # what it gathers: stationary and moving (a scattered dst may be fp32 PSUM)
        for view in inputs[:2]:
            if columns_of(view) is not None and view.dtype not in _TENSOR_ENGINE_DTYPES:
                raise trace.error(f"{opcode}: the Tensor engine gathers fp16, bf16 or fp8 columns, not "
                                  f"{view.dtype}")
    if opcode == "nc_matmul_mx":
        for data, scale in ((0, 2), (1, 3)):
            a, b = columns_of(inputs[data]), columns_of(inputs[scale])
            if (a is None) != (b is None) or (a is not None and a.index.decl is not b.index.decl):
                raise trace.error("nc_matmul_mx: a tile and its scale are indirect together, with one index, or "
                                  "neither is")
    scattered = columns_of(dst)
    if scattered is not None and inputs:  # AWS's partition alignment of a scatter with its (first) input
        source = inputs[0]
        gathered = columns_of(source)
        if gathered is not None or source.buffer == "sbuf":
            start = _start_partition(gathered.data if gathered is not None else source)
            if _start_partition(scattered.index) != start:
                raise trace.error(f"{opcode}: the index of an .indirect() dst starts on partition "
                                  f"{_start_partition(scattered.index)} and the input on {start}: they must agree")


def _group_size(engine: str) -> int:
    """Partitions that share their rows of the index: 32 on the Tensor engine, 16 on the others."""
    return 32 if engine == "tensor" else 16


def _staged(trace, columns: IndirectColumns, engine: str) -> View:
    """A fresh tile holding columns' operand for one instruction, gathered on `engine`."""
    decl = trace.new_tensor(columns.memory, columns.dtype, columns.shape, f"{columns.name}_staged")
    decl.staging = True
    staged = View(decl, 0, decl.shape, decl.strides())
    trace.emit("column_gather", engine, staged, (columns.data, columns.index), coefficients=(_group_size(engine),))
    return staged


def emit(trace, opcode: str, engine: str, dst: View, inputs: Sequence[View], fields: dict) -> dict:
    """The instruction on staged operands, with the gathers before it and the scatter after it."""
    inputs = list(inputs)
    _check(trace, opcode, engine, dst, inputs)
    staged = {}

    def moved(view: View) -> View:
        columns = columns_of(view)
        if columns is None:
            return view
        if id(columns) not in staged:
            staged[id(columns)] = _staged(trace, columns, engine)
        tile = staged[id(columns)]
        return View(tile.decl, view.offset, view.sizes, view.strides)

    target = moved(dst)
    instruction = trace.emit(opcode, engine, target, [moved(v) for v in inputs], **fields)
    scattered = columns_of(dst)
    if scattered is not None:
        trace.emit("column_scatter", engine, scattered.data, (staged[id(scattered)], scattered.index),
                   coefficients=(_group_size(engine),))
    return instruction
