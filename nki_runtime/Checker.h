// The verifier's checker, shared by its source files (Verifier.cpp for the program as a whole, one file per
// family of instructions); not part of the runtime's interface, which is Verifier.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/Hardware.h"
#include "nki_runtime/Program.h"
#include "nki_runtime/Verifier.h"

namespace nki {

std::string_view memoryName(Memory memory);
std::string_view opcodeName(Opcode opcode);
std::string_view engineName(Engine engine);
inline bool isFp8(Dtype dtype) { return dtype == Dtype::kFloat8E4M3 || dtype == Dtype::kFloat8E5M2; }

class Checker {
 public:
  Checker(const Program& program, const CoreLimits& limits) : program_(program), limits_(limits) {}

  std::vector<Violation> run();

 private:
  template <typename... Parts>
  void fail(int instruction, const Parts&... parts) {
    std::ostringstream text;
    if (instruction >= 0) text << opcodeName(program_.instructions[instruction].opcode) << ": ";
    (text << ... << parts);
    const int line = instruction >= 0 ? program_.instructions[instruction].line : 0;
    violations_.push_back({instruction, line, text.str()});
  }

  const TensorInfo& tensor(const Access& access) const { return program_.tensors[access.tensor]; }
  static int64_t perPartition(const Access& access) { return access.elements() / access.sizes[0]; }
  static bool mxPartitions(int64_t partitions) { return partitions % 32 == 0 && partitions <= 128; }

  // Verifier.cpp: the program as a whole: tensors, views, memories, capacity, affine_range iterations.
  // An alias (.ap(dtype=...)) holds exactly its owner's bytes: all of them for HBM, each partition's on chip.
  void checkAlias(const TensorInfo& alias);
  void checkTensors();
  // Bounds, and for on-chip memory: the view's axis 0 walks partitions, the others stay in one (except for
  // the DMA engines, which address SBUF byte by byte: a DMA transpose reads across partitions).
  bool checkAccess(int i, const Access& access, std::string_view role);
  void requireMemory(int i, const Access& access, std::string_view role, std::initializer_list<Memory> allowed);
  void requireSameShape(int i, const Access& a, const Access& b, std::string_view role);
  void checkInstruction(int i);
  // The blocks of a [blocks, par_dim, free] tensor an access reaches, first and last. Stored partition
  // first, a block is a run of partitionElements() / blocks elements within each partition.
  static std::pair<int64_t, int64_t> blocksReached(const Access& access, const TensorInfo& info);
  // Which on-chip tiles are alive at once, per SPMD instance: SBUF bytes per partition and PSUM banks. Each
  // block of a block tensor is a tile with a life of its own, as the compiler allocates them.
  void checkCapacity();
  // Iterations of an affine_range run in any order (or at once): one that
  // reads or overwrites what another wrote is a loop-carried dependency.
  // Accumulations (matmul into PSUM, `+=` reductions) commute and are allowed. The rows an indirect DMA
  // addresses are known only as it runs, so they are not checked here.
  void checkAffineIterations();

  // VerifierInstructions.cpp: the instructions' own shape and dtype rules.
  // An indirect DMA: inputs[0] is one row of the source pattern, inputs[1] the index tile (SBUF, 32-bit
  // integers), one index for each row of dst along the indirect axis; for a scatter dst is the one-row
  // pattern and the index tile has one index for each row of the source.
  void checkIndirect(int i, const Instruction& in);
  void checkCollective(int i, const Instruction& in);
  void checkVariableCollective(int i, const Instruction& in);
  void checkPartitionReduce(int i, const Instruction& in);
  // Within each quadrant of 32 partitions, dst partition i copies src partition mask[i] (255: keeps its own).
  void checkStreamShuffle(int i, const Instruction& in);
  void checkGather(int i, const Instruction& in);
  void checkNonzeroWithCount(int i, const Instruction& in);
  void checkSequenceBounds(int i, const Instruction& in);
  // AWS's limits of nki.isa.local_gather: whole GpSimd cores (16 partitions each), uint16 indices, no
  // conversion, 1 to 32 elements per index (powers of two), at most 4096 indices per core.
  void checkLocalGather(int i, const Instruction& in);
  // Instructions that summarise each partition's data in a fixed number of values: false for the others.
  bool checkSummary(int i, const Instruction& in);
  // What nc_matmul and nc_matmul_mx share: stationary [K, M] and moving [K, N] in SBUF (the first two of
  // `inputs` inputs), dst [M, N] in PSUM, float32 or bfloat16, M and N within the Tensor engine's limits.
  // False when the tiles are not there to check further.
  bool checkTileProduct(int i, const Instruction& in, std::size_t inputs, std::string_view layout);
  void checkMatmul(int i, const Instruction& in);
  void checkTranspose(int i, const Instruction& in);

  // VerifierIndirection.cpp: tensor indirection (TensorIndirection.h), NeuronCore-v4: [P, F] data in SBUF
  // or PSUM, a [P, K] uint16 index in SBUF starting on a quadrant (and on the data's first partition for a
  // gather), enough index columns for the staged operand's, whole groups of index rows.
  void checkColumnIndirection(int i, const Instruction& in);

  // VerifierMicroscaling.cpp: microscaling (MX) data and instructions, NeuronCore-v4.
  // Packed MX data is written by quantize_mx, read by nc_matmul_mx and moved unconverted by DMA and
  // tensor_copy; no other instruction can take it.
  bool checkPacked(int i, const Instruction& in);
  bool checkWideIntegers(int i, const Instruction& in);  // Verifier.cpp
  bool checkBitvec(int i, const Instruction& in);        // Verifier.cpp
  bool requireMicroscaling(int i);
  // The scales of a packed [K, F] tile: [K / 8, F] up to 32 partitions, else as tall as the data with
  // each quadrant's scales in its first four partitions (Microscaling.h).
  void checkScales(int i, const Access& scales, const Access& data, std::string_view role);
  void checkMatmulMx(int i, const Instruction& in);
  void checkQuantizeMx(int i, const Instruction& in);

  // VerifierControlFlow.cpp: the sequencers' work: device loops, branches, scalar arithmetic.
  // A device loop reads and writes registers: single int32 elements. A counted loop's begin reads its
  // bounds, its end nothing; a while loop's begin and end read its condition.
  void checkLoop(int i, const Instruction& in);
  void checkScalarAlu(int i, const Instruction& in);
  void checkBranch(int i, const Instruction& in);
  // Whether dst and every input are registers.
  bool onRegisters(const Instruction& in) const;

  struct Span {
    int first = -1, last = -1;
  };
  struct Touch {
    int instruction;
    int iteration;
    int64_t low, high;
    bool write;
    const Access* access;
  };

  const Program& program_;
  const CoreLimits& limits_;
  std::vector<Violation> violations_;
  std::vector<LoopSpan> loops_;
};

}  // namespace nki
