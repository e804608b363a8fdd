// Replays a verified program on memory: HBM tensors are the caller's buffers,
// on-chip tensors live in an arena planned once from their lifetimes (so a
// program of any length fits in what its live tiles need). Tiles are
// processed a row at a time in fp32 with vectorised loops; matmuls widen
// their tiles once and multiply in fp32, as the Tensor engine accumulates.
#pragma once

#include <cstdint>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

class Executor {
 public:
  explicit Executor(Program program);

  // hbm[a]: the host address of the call's HBM buffer a (Program::arguments of them).
  void run(const std::vector<void*>& hbm) const;

  const Program& program() const { return program_; }
  int64_t arenaBytes() const { return arena_bytes_; }

 private:
  struct Plan {
    int64_t offset = -1;          // in the arena; -1: an HBM argument
    bool sentinel_first = false;  // filled with the sentinel before its first instruction
  };
  char* base(const std::vector<void*>& hbm, char* arena, int32_t tensor) const;

  Program program_;
  std::vector<Plan> plans_;
  std::vector<std::vector<int32_t>> fresh_before_;  // per instruction: tensors to fill first
  std::vector<uint8_t> rows_independent_;            // per instruction: its rows may run on several threads
  int64_t arena_bytes_ = 0;
};

}  // namespace nki
