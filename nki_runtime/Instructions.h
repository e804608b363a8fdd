// One instruction with its tensors resolved to addresses, and what each
// opcode does: the engines' arithmetic, a row at a time (a row: one index of
// all but the last axis of what the instruction writes; for a 2-D tile, a
// partition), in fp32 with vectorised loops; matmuls on the GEMM kernels.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "nki_runtime/Collectives.h"
#include "nki_runtime/Dtype.h"
#include "nki_runtime/Program.h"

namespace nki {

class EngineGenerators;

// Receives nl.device_print's tiles as a run reaches them: the label's number, the view's shape, its
// elements' bytes in row-major order (the tensor's dtype).
using Printer = std::function<void(int32_t label, const std::vector<int64_t>& shape, const std::vector<char>& bytes)>;

struct Bound {
  const Instruction& in;
  char* dst;
  Dtype dst_type;
  std::vector<char*> inputs;
  std::vector<Dtype> input_types;
  bool rows_independent = false;  // no row reads what another row of the instruction writes
  // Only rows [row_begin, row_end), on the calling thread; row_end < 0: every row (maybe on several threads).
  int64_t row_begin = 0;
  int64_t row_end = -1;
  // A DMA from on-chip memory into an HBM tensor larger than the CPU's caches hold for it: stores that
  // bypass the caches, as the DMA engines' writes bypass the NeuronCore's (no read of the lines first).
  bool streaming_stores = false;
  int64_t gathered_elements = 0;  // an indirect DMA: the elements of the tensor its index tile addresses
  EngineGenerators* random = nullptr;  // the run's random number generators (Random.h)
  int64_t first_lane = 0;              // on-chip dst: the partition its view starts at
  const Printer* printer = nullptr;    // nl.device_print's receiver; none: printing is skipped
  const Communicator* communicator = nullptr;  // the other ranks, for nki.collectives (Collectives.h)

  char* at(char* base, Dtype type, int64_t element) const;
  void loadInput(int k, int64_t offset, float* out) const;
  void storeDst(const float* values, int64_t offset) const;
  void loadDst(int64_t offset, float* out) const;
  // Input k's row in fp32: in place when it is a dense fp32 row, else widened into scratch `slot`.
  const float* row(int k, int64_t offset, int slot) const;
  // Where a row of results goes: dst itself when it is a dense fp32 row (then `direct`), else scratch.
  float* dstRow(int64_t offset, bool& direct) const;
  void finish(float* values, bool direct, int64_t offset) const;
  // An operand row: its input's elements, or the immediate repeated.
  const float* operand(const Operand& operand, const std::array<int64_t, 8>& offsets, int slot) const;
  // Whether an operand is one value along the row (an immediate, or a per-partition scalar), and which.
  bool scalarOperand(const Operand& operand, const std::array<int64_t, 8>& offsets, float& value) const;
  std::vector<const Access*> views() const;
};

void execute(const Bound& b);

// dst = src, element by element, converting dtypes (DMA and tensor_copy).
void copyView(const Bound& b);

// A [rows, cols] view of a tile at `base` widened into a dense fp32 matrix (the matmuls' PSUM accumulation).
void widen(const char* base, Dtype type, const Access& access, float* out);

// The rows execute() walks: the indices of all but the last axis of the dst (a reduction into one axis: its elements).
int64_t rowsOf(const Instruction& in);

// Whether an instruction's rows may run in any order, on several threads: each input is another
// tensor, or the very view written by an element-wise instruction (which reads each element before
// writing it), or elements the instruction does not write. Two HBM arguments may be one buffer.
bool rowsIndependent(const Program& program, const Instruction& in);

}  // namespace nki
