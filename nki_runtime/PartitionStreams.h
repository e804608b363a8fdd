// A tile is loaded, computed on and stored by engines that each work on one
// partition's elements at a time. Replayed an instruction at a time, every
// intermediate tile of a kernel passes through memory once per instruction;
// replayed a few partitions at a time (every instruction of an iteration on
// partitions [p, p + g), then on the next g), a partition's intermediates stay
// in the CPU's caches. This finds the runs of instructions that may be
// replayed so: consecutive instructions of one loop iteration whose rows are
// independent and that reach, of every on-chip tile, only the partition of
// the row at hand, so that no instruction sees another partition's elements
// of what another writes, and the results are the program order's.
#pragma once

#include <cstdint>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

struct PartitionStream {
  int32_t first = 0;       // instruction index
  int32_t count = 0;       // instructions, at least 2
  int64_t partitions = 0;  // of every instruction's rows
};

// rows_independent: per instruction (Instructions.h's rowsIndependent).
std::vector<PartitionStream> planPartitionStreams(const Program& program, const std::vector<uint8_t>& rows_independent);

}  // namespace nki
