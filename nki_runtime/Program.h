// An NKI kernel as the tracer records it: the tensors it touches and the
// instructions it issues, one per engine operation, with every Python loop
// unrolled and every index resolved to an affine view. The verifier checks a
// program against a NeuronCore's limits; the executor replays it on memory.
// Knows nothing of torch or Python.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nki_runtime/Dtype.h"

namespace nki {

enum class Memory : uint8_t { kHbm, kSbuf, kPsum };
enum class Engine : uint8_t { kDma, kTensor, kVector, kScalar, kGpSimd };

enum class Opcode : uint8_t {
  kDmaCopy,          // dst = src, between any two memories but PSUM
  kMatmul,           // dst[M, N] (+)= stationary[K, M]^T @ moving[K, N], in fp32
  kTranspose,        // dst[F, P] = src[P, F]
  kTensorTensor,     // dst = a op0 b
  kTensorScalar,     // dst = (data op0 operand0) op1 operand1, operands immediate or per partition
  kActivation,       // dst = function((data op0 operand0) op1 operand1): nisa.activation's (multiply scale,
                     // add bias), activate2's any of six pairs; operand2 nl.prelu's slope
  kTensorReduce,     // dst = op0 over the trailing `reduce_axes` axes of data (negated if `negate`)
  kTensorCopy,       // dst = src, on a compute engine
  kMemset,           // dst = immediate
  kIota,             // dst[i0, i1, ...] = base + sum of coefficient_a * i_a
  kTensorTensorScan, // along the last axis: acc = (acc op0 a[i]) op1 b[i]; dst[i] = acc
  kSelect,           // dst = predicate != 0 ? on_true : on_false
  kScalarTensorTensor,  // dst = (data op0 operand0) op1 other, operand0 immediate or per partition
  kMax8,             // dst[p, 0..8) = the 8 largest of partition p's elements, descending
  kFindIndex8,       // dst[p, j] = index of vals[p, j] among partition p's data elements
  kBnStats,          // dst[p] = (count, mean, variance * count) of p's even-, then odd-indexed elements
  kBnAggr,           // dst[p] = (mean, variance) of the (count, mean, variance * count) triples p holds
  kPartitionReduce,  // dst[0, f...] = op0 over the partitions p of data[p, f...], in order (GpSimd)
  kAffineSelect,     // dst = (affine value of the index (as kIota) op0 0) ? on_true : operand0 (GpSimd)
  kMatchReplace8,    // dst = data with the first occurrence of each of vals[p, 0..8) replaced by operand0
  kRangeSelect,      // dst[p, j] = on_true[p, j] where (j + start) op0 bound0[p] and op1 bound1[p], else fill
  kStreamShuffle,    // dst partition q * 32 + i = src partition q * 32 + mask[i] (255: kept), each quadrant q
  kNonzeroWithCount, // dst[p] = positions of src[p]'s nonzeros + offset, padding, count; p = 0, 16, ... (GpSimd)
  kGather,           // dst[p, j] = data[p, indices[p, j]], data's free axes flattened (GpSimd nc_n_gather)
  // The engines' random number generators (Random.h), one state per compute lane, kept for the whole run:
  kRandomBits,       // dst = the low bits of 32 random bits per element (nisa.rng)
  kRandomUniform,    // dst = uniform in [operand0, operand1] (nisa.rand2, nl.rand)
  kDropout,          // dst = data, or 0 with probability operand0 (nisa.dropout)
  kRandomSetState,   // the lanes' states = inputs[0][p, :] (uint32); dst names the same view, unwritten
  kRandomGetState,   // dst[p, :] = lane p's states (uint32)
  kRandomSeed,       // every lane of the engine seeded from the one 32-bit value of inputs[0]; dst unwritten
  kDevicePrint,      // hands dst's values (unwritten, any memory) to the run's printer, labelled coefficients[0]
  kSequenceBounds,   // dst[p] = each segment id's [first index] then [one past its last index] (GpSimd)
  kLocalGather,      // dst[p, j, :] = src[p, index_j * n : (index_j + 1) * n], index_j from p's 16 partitions
  // nki.isa.quantize_mx as two instructions, each with one dst (Microscaling.h):
  kQuantizeMxScales, // dst (uint8) = the scale of each 8-partition x 4-value group of inputs[0]; coefficients[0]:
                     // the largest exponent of the packed type
  kQuantizeMx,       // dst (packed fp8) = inputs[0] scaled by the scales in inputs[1]
  kMatmulMx,         // dst[M, N] (+)= stationary[K, M] x moving[K, N], packed, with their scales inputs[2], [3]
  kDmaCompute,       // dst = the sum of the inputs (1 to 16), in fp32 inside the DMA engines
  // A loop run on the device (ControlFlow.h), around one copy of its body. coefficients: {step, the other
  // end's index}. Counted (step > 0): the begin's inputs are the lower and upper bound registers, dst the
  // register that takes each value. While (step 0): it repeats while inputs[0] (a register) is not zero.
  kLoopBegin,
  kLoopEnd,
  // The sequencers' scalar work on registers (ControlFlow.h):
  kScalarAlu,  // dst = inputs[0] op0 inputs[1] (nisa.scalar_alu): int32, wrapping; division toward zero
  kBranch,     // go on at instruction coefficients[0], further on, when inputs is empty or inputs[0] is zero
               // (nl.if_else); dst names a register, unwritten
  kCollective,  // nki.collectives: dst from inputs[0] of every rank of a group (Collectives.h says which way)
  // Tensor indirection (NkiTensor.indirect, NeuronCore-v4; TensorIndirection.h): an instruction's operand
  // whose columns an index tile chooses, staged in a tile of its own around the instruction, on its engine.
  kColumnGather,   // dst[p, i] = inputs[0][p, offset(p, i)]; inputs[1] the uint16 index; coefficients {group}
  kColumnScatter,  // dst[p, offset(p, i)] = inputs[0][p, i]; the same index and group
};

enum class AluOp : uint8_t {
  kBypass, kAdd, kSubtract, kMultiply, kDivide, kMaximum, kMinimum, kPower, kMod,
  kEqual, kNotEqual, kGreater, kGreaterEqual, kLess, kLessEqual,
  kLogicalAnd, kLogicalOr, kLogicalXor, kAbsMax,
  kFloorMod,  // the remainder with b's sign (numpy.mod, nl.mod); kMod takes a's (C's fmod, nl.fmod)
  kAbsMin,    // a or b, whichever is smaller in magnitude (b on a tie); kAbsMax the larger
  // Bitvec operators: integer elements as bit patterns (IntegerAlu.h); shifts are logical.
  kBitwiseAnd, kBitwiseOr, kBitwiseXor, kLeftShift, kRightShift,
};

enum class Function : uint8_t {
  kCopy, kExp, kLog, kTanh, kSigmoid, kRelu, kGelu, kGeluTanh, kSilu, kSqrt, kRsqrt, kReciprocal,
  kAbs, kNegative, kSquare, kSin, kCos, kErf, kSoftplus, kSign, kFloor, kCeil, kArctan, kMish, kGeluSigmoid,
  kPrelu,  // x, or operand2 * x below 0 (the executor's activation applies the slope)
  kGeluDx, kGeluSigmoidDx, kSiluDx, kErfDx, kTan, kTrunc,
};

constexpr int kMaxAxes = 8;  // axes of one view (torch_neuronx/nki/trace.py MAX_AXES)

// An affine view of a tensor, in elements. Axis 0 is the partition axis of
// on-chip memory (for HBM, the axis that becomes it when loaded).
struct Access {
  int32_t tensor = -1;
  int64_t offset = 0;
  int32_t rank = 0;
  std::array<int64_t, kMaxAxes> sizes{};
  std::array<int64_t, kMaxAxes> strides{};

  int64_t elements() const;
  // The first and one past the last element the view touches.
  int64_t lowest() const;
  int64_t highest() const;
};

struct TensorInfo {
  std::string name;
  Memory memory = Memory::kSbuf;
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> shape;  // on-chip: shape[0] partitions, the rest within each partition
  int32_t argument = -1;       // HBM: the call's buffer it is (>= 0), else kernel-private
  int64_t blocks = 1;          // on-chip: tiles side by side in each partition (axes before nl.par_dim)
  int32_t alias_of = -1;       // >= 0: the tensor whose memory this one reads as its own dtype and shape
  bool staging = false;        // an indirect operand's columns for one instruction: no SBUF/PSUM of its own
  int64_t elements() const;
  int64_t partitionElements() const;  // on-chip: elements each partition holds
};

// A second operand that is either an immediate or one of the instruction's inputs.
struct Operand {
  int32_t input = -1;  // >= 0: inputs[input], read element-wise
  float value = 0.f;   // what arithmetic operators take: the ALU computes in fp32
  // An integer immediate as written, for what takes integers exactly (bitvec operators, integer memsets):
  // past 2**24 its fp32 `value` is another number.
  bool integral = false;
  int64_t bits = 0;
};

// The affine loops around an instruction, outermost first: (loop, iteration).
// Iterations of one affine_range must not depend on each other.
struct LoopIteration {
  int32_t loop = 0;
  int32_t iteration = 0;
};

// A view of an instruction moved, as it runs, by the value of a register (`.ap(scalar_offset=...)`).
struct DynamicOffset {
  int32_t view = -1;  // -1: dst; k: inputs[k]
  Access reg;         // the register: one int32 element
};

struct Instruction {
  Opcode opcode = Opcode::kTensorCopy;
  Engine engine = Engine::kVector;
  Access dst;
  std::vector<Access> inputs;
  AluOp op0 = AluOp::kBypass;
  AluOp op1 = AluOp::kBypass;
  Operand operand0, operand1;  // kTensorScalar, kActivation; kTensorTensorScan: initial
  Operand operand2;            // kActivation: the function's parameter (nl.prelu's slope)
  bool reverse0 = false;       // kTensorScalar: operand0 op0 data instead; kFindIndex8: as kMatchReplace8
                               // pairs repeated vals (the indices nc_match_replace8 writes; operand0 its imm)
  bool reverse1 = false;
  Function function = Function::kCopy;
  int32_t reduce_axes = 0;
  bool negate = false;
  bool accumulate = false;         // kMatmul: add to dst; else a reduction the loops may share
  // kDmaCopy from `tensor.ap(..., vector_offset=index, indirect_dim=d)`: inputs[0] is the pattern of one
  // row along axis d (size 1 there), inputs[1] the index tile; row i of dst's axis d reads the source at
  // index value i along d. An index past the tensor is an error, or skips its row (oob_mode=skip).
  // With indirect_destination the destination is the one-row pattern (a scatter): source row i goes to
  // dst row index[i].
  bool indirect = false;
  bool indirect_destination = false;
  int32_t indirect_dim = 0;
  bool skip_out_of_bounds = false;
  std::vector<int64_t> integers;    // kIota: its base and steps as the integers they are (its arithmetic is int32)
  std::vector<float> coefficients;  // kIota: base, then one per dst axis; kRangeSelect: start, fill;
                                    // kStreamShuffle: the 32 mask entries; kNonzeroWithCount: offset, padding;
                                    // kLocalGather: elements per index, valid indices per core
  int32_t line = 0;                 // in the kernel's source file
  int32_t grid_instance = 0;        // which SPMD program instance issued it
  int32_t loops = -1;               // index into Program::loop_nests, -1 outside affine loops
  std::vector<DynamicOffset> dynamic_offsets;
};

struct Program {
  std::string kernel;
  std::string file;
  std::vector<TensorInfo> tensors;
  std::vector<Instruction> instructions;
  std::vector<std::vector<LoopIteration>> loop_nests;
  int32_t arguments = 0;  // HBM buffers the call passes (inputs and outputs)
};

// The tensor that owns tensor t's memory: t itself, or the one it is an alias of.
inline int32_t ownerOf(const Program& program, int32_t t) {
  const int32_t owner = program.tensors[t].alias_of;
  return owner >= 0 ? owner : t;
}

}  // namespace nki
