"""A predicted Trainium time for a traced NKI program.

Each engine runs its own instruction stream in program order (the Tensor,
Vector, Scalar and GpSimd engines one instruction at a time; each DMA is one
transfer on one of 16 queues), and an instruction starts when its engine is free and the
instructions whose results it reads (or whose inputs it overwrites) have
finished: the engines overlap as far as the dependencies let them, as the
hardware's semaphores do. Per-instruction costs are AWS's published
estimates; every rate below names its source. Pages (all under
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/):
  ARCH2 nki/guides/architecture/trainium_inferentia2_arch.html (NeuronCore-v2)
  ARCH3 nki/guides/architecture/trainium2_arch.html (NeuronCore-v3)
  ARCH4 nki/guides/architecture/trainium3_arch.html (NeuronCore-v4)
  ISA   the "Estimated instruction cost" of each nki.isa instruction
        (…/en/v2.26.0/general/nki/api/generated/nki.isa.<name>.html)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

from .trace import BYTES, REGISTER_FILES


@dataclass(frozen=True)
class CoreRates:
    name: str
    tensor_ghz: float      # Tensor engine clock (ARCH2/3/4 engine table)
    vector_ghz: float      # Vector engine clock
    scalar_ghz: float      # Scalar (activation) engine clock
    gpsimd_ghz: float      # GpSimd engine clock
    dma_queues: int        # DMA engines per NeuronCore, one transfer each at a time (ARCH2 "DMA")
    dma_bytes_per_ns: float  # per queue: 16 x this = the core's DMA bandwidth (ARCH2/3/4)
    dma_fixed_ns: float    # descriptor-to-start latency of one transfer (ARCH2 "DMA")


# 128x128 PEs x 2 flops x 2.4 GHz = 79 TFLOPS bf16 per NeuronCore-v3 (ARCH3).
TRN1 = CoreRates("NeuronCore-v2 (trn1)", 2.8, 1.12, 1.4, 1.4, 16, 17.0, 1300.0)
TRN2 = CoreRates("NeuronCore-v3 (trn2)", 2.4, 0.96, 1.2, 1.2, 16, 23.0, 1300.0)
TRN3 = CoreRates("NeuronCore-v4 (trn3)", 2.4, 1.2, 1.2, 1.2, 16, 33.0, 1300.0)
RATES = {2: TRN1, 3: TRN2, 4: TRN3}

MATMUL_MIN_CYCLES = 64     # ISA nc_matmul: cost = max(min(64, N_stationary), N_moving) cycles
FP32_MATMUL_FACTOR = 4     # ISA nc_matmul: fp32 runs at a quarter of the bf16/fp16/fp8 rate
ENGINE_MIN_CYCLES = 64     # ISA: Vector/Scalar instructions cost at least 64 cycles
GPSIMD_START_CYCLES = 150  # ISA iota / affine_select: about 150 + N cycles
LOCAL_GATHER_T = 4         # ISA local_gather's cost formula: "t is a constant 4"
RECIPROCAL_FACTOR = 8      # ISA reciprocal on the Vector engine: max(64, 8N)


@dataclass
class Prediction:
    seconds: float
    bound_engine: str
    busy_seconds: Dict[str, float]
    instructions: Dict[str, int]
    dma_bytes: int
    flops: int = 0
    rates: str = ""


@dataclass
class _Ranges:
    """Recent writes and reads of one tensor: (box, finish time)."""
    writes: list = field(default_factory=list)
    reads: list = field(default_factory=list)


def _per_partition(access) -> int:
    count = 1
    for size in access[2][1:]:
        count *= size
    return count


def _elements(access) -> int:
    count = 1
    for size in access[2]:
        count *= size
    return count


def _box(access, shape) -> tuple | None:
    """The view as (first, last, step) per dimension of its tensor, when each axis walks one dimension."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    strides.reverse()
    rest, first = access[1], []
    for stride in strides:
        first.append(rest // stride)
        rest %= stride
    last, steps, used = list(first), [1] * len(shape), set()
    for size, stride in zip(access[2], access[3]):
        if size == 1:
            continue
        dim = next((d for d, s in enumerate(strides) if stride > 0 and stride % s == 0), None)
        if dim is None or dim in used:
            return None
        used.add(dim)
        steps[dim] = stride // strides[dim]
        last[dim] = first[dim] + steps[dim] * (size - 1)
        if last[dim] >= shape[dim]:
            return None
    return first, last, steps


def _overlap(a, b) -> bool:
    if a is None or b is None:
        return True
    for f1, l1, s1, f2, l2, s2 in zip(*a, *b):
        if l1 < f2 or l2 < f1 or (s1 == s2 and s1 > 1 and (f1 - f2) % s1):
            return False
    return True


def _local_gather_cycles(ins: dict, dtypes: List[str]) -> float:
    """ISA local_gather: 150 + indices x n / C GpSimd cycles, C = ((28 + t n) / (t n)) / min(4 / dtype bytes, n),
    t = 4 (n elements per index)."""
    per_index, indices = ins["coefficients"]
    t = LOCAL_GATHER_T
    c = ((28 + t * per_index) / (t * per_index)) / min(4 / BYTES[dtypes[ins["dst"][0]]], per_index)
    return GPSIMD_START_CYCLES + indices * per_index / c


# An .indirect() operand's columns moved around its instruction (indirection.py): the hardware reads and
# writes them in place, as part of that instruction.
STAGING = ("column_gather", "column_scatter")


def _cycles(ins: dict, names: dict, dtypes: List[str]) -> float:
    opcode, engine = names["opcode"][ins["opcode"]], names["engine"][ins["engine"]]
    dst = ins["dst"]
    summarises = opcode in ("tensor_reduce", "max8", "nc_find_index8", "bn_stats", "bn_aggr")
    n = _per_partition(ins["inputs"][0] if summarises or opcode == "quantize_mx" else dst)
    if opcode == "nc_matmul_mx":  # assumed: nc_matmul's cycles, each PE taking the 4 values of an element
        stationary, moving = ins["inputs"][:2]
        return max(min(MATMUL_MIN_CYCLES, stationary[2][1]), moving[2][1])
    if opcode == "quantize_mx_scales":  # one instruction with quantize_mx on the hardware: counted there
        return 0.0
    if opcode in STAGING:
        return 0.0
    if opcode == "nc_matmul":
        stationary, moving = ins["inputs"]
        cycles = max(min(MATMUL_MIN_CYCLES, stationary[2][1]), moving[2][1])
        return cycles * (FP32_MATMUL_FACTOR if dtypes[stationary[0]] == "float32" else 1)
    if opcode == "nc_transpose" and engine == "tensor":
        partitions, free = ins["inputs"][0][2][0], ins["inputs"][0][2][1]
        return max(partitions, min(MATMUL_MIN_CYCLES, free))
    if opcode == "local_gather":
        return _local_gather_cycles(ins, dtypes)
    if engine == "gpsimd":
        return GPSIMD_START_CYCLES + n
    if opcode in ("tensor_tensor", "tensor_tensor_scan", "select", "scalar_tensor_tensor"):
        return max(ENGINE_MIN_CYCLES, 2 * n)
    if opcode == "activation" and engine == "vector" and names["function"][ins["function"]] == "reciprocal":
        return max(ENGINE_MIN_CYCLES, RECIPROCAL_FACTOR * n)
    return max(ENGINE_MIN_CYCLES, n)


def _memory_owners(tensors) -> List[int]:
    """Per tensor, the tensor whose memory it is: its alias_of, or for HBM arguments the first tensor
    passed the same buffer."""
    first_of_argument: Dict[int, int] = {}
    owners = []
    for i, t in enumerate(tensors):
        alias_of = t[6] if len(t) > 6 else -1
        if alias_of >= 0:
            owners.append(alias_of)
        elif t[4] >= 0:
            owners.append(first_of_argument.setdefault(t[4], i))
        else:
            owners.append(i)
    return owners


def predict(encoded: dict, version: int = 3) -> Prediction:
    from . import codes
    names = codes.names()
    rates = RATES[version]
    clock = {"tensor": rates.tensor_ghz, "vector": rates.vector_ghz, "scalar": rates.scalar_ghz,
             "gpsimd": rates.gpsimd_ghz}
    dtypes = [names["dtype"][t[2]] for t in encoded["tensors"]]
    shapes = [tuple(t[3]) for t in encoded["tensors"]]
    owners = _memory_owners(encoded["tensors"])
    names_of = [t[0] for t in encoded["tensors"]]

    def box_of(access):  # a view through an alias may touch any of its owner's memory
        return _box(access, shapes[access[0]]) if owners[access[0]] == access[0] else None
    engine_free = {e: 0.0 for e in clock}
    dma_queues = [0.0] * rates.dma_queues
    busy = {e: 0.0 for e in list(clock) + ["dma"]}
    counts = {e: 0 for e in busy}
    ranges: Dict[int, _Ranges] = {}
    dma_bytes = flops = 0
    finish_all = 0.0
    for ins in encoded["instructions"]:
        engine = names["engine"][ins["engine"]]
        opcode = names["opcode"][ins["opcode"]]
        dst = ins["dst"]
        if opcode == "device_print":  # a debugging aid, not part of the kernel's work
            continue
        # The sequencers' work (device loops, branches, scalar arithmetic, register moves) is not costed; a
        # device loop's body is costed once (its trip count is known only when the kernel runs) and both
        # sides of a branch are costed.
        if opcode in ("loop_begin", "loop_end", "branch", "scalar_alu") or any(
                names_of[a[0]] in REGISTER_FILES.values() for a in (dst, *ins["inputs"])):
            continue
        if engine == "dma":
            nbytes = _elements(dst) * BYTES[dtypes[dst[0]]]
            if ins["accumulate"]:  # dst_rmw_op: the engine reads what dst holds before it writes
                nbytes *= 2
            elif opcode == "dma_compute":  # each source streams through the engine
                nbytes *= max(1, len(ins["inputs"]))
            # A collective is costed as one transfer of its dst's bytes (assumed: the other ranks, the
            # collective engines and NeuronLink's rate are not modelled; a lower bound).
            duration = (rates.dma_fixed_ns + nbytes / rates.dma_bytes_per_ns) * 1e-9
            dma_bytes += nbytes
        else:
            duration = _cycles(ins, names, dtypes) / (clock[engine] * 1e9)
        if opcode in ("nc_matmul", "nc_matmul_mx"):
            stationary, moving = ins["inputs"][:2]
            flops += 2 * stationary[2][0] * stationary[2][1] * moving[2][1] * (4 if opcode == "nc_matmul_mx" else 1)
        ready = 0.0
        for access in ins["inputs"]:
            box = box_of(access)
            for other, done in ranges.get(owners[access[0]], _Ranges()).writes:
                if done > ready and _overlap(box, other):
                    ready = done
        dst_box = box_of(dst)
        record = ranges.setdefault(owners[dst[0]], _Ranges())
        for other, done in record.writes + record.reads:
            if done > ready and _overlap(dst_box, other):
                ready = done
        if engine == "dma":
            # Best fit: the queue that frees last before the transfer can start (no idle gap),
            # else the one that frees first; queues freed early stay for independent transfers.
            fitting = [q for q, free in enumerate(dma_queues) if free <= ready]
            queue = (max(fitting, key=dma_queues.__getitem__) if fitting
                     else min(range(len(dma_queues)), key=dma_queues.__getitem__))
            start = max(dma_queues[queue], ready)
            dma_queues[queue] = start + duration
        else:
            start = max(engine_free[engine], ready)
            engine_free[engine] = start + duration
        finish = start + duration
        finish_all = max(finish_all, finish)
        busy[engine] += duration
        counts[engine] += opcode not in STAGING
        record.writes = (record.writes + [(dst_box, finish)])[-256:]
        for access in ins["inputs"]:
            reads = ranges.setdefault(owners[access[0]], _Ranges())
            reads.reads = (reads.reads + [(box_of(access), finish)])[-256:]
    dma_busy = busy["dma"] / rates.dma_queues  # 16 queues share the work
    loads = {**{e: busy[e] for e in clock}, "dma": dma_busy}
    bound = max(loads, key=loads.get) if finish_all > 0 else "-"
    return Prediction(finish_all, bound, loads, counts, dma_bytes, flops, rates.name)
