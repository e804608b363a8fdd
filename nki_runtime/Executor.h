// Replays a verified program on memory: HBM tensors are the caller's buffers,
// on-chip tensors live in an arena planned once from their lifetimes (so a
// program of any length fits in what its live tiles need). Instructions run
// as Instructions.h says, one after another, except the runs that
// PartitionStreams.h finds, which run a few partitions at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "nki_runtime/Collectives.h"
#include "nki_runtime/Instructions.h"
#include "nki_runtime/PartitionStreams.h"
#include "nki_runtime/Program.h"
#include "nki_runtime/Random.h"

namespace nki {

class Executor {
 public:
  explicit Executor(Program program);

  // hbm[a]: the host address of the call's HBM buffer a (Program::arguments of them). `seed` starts the
  // engines' random number generators, for programs that use them. `communicator` carries out the
  // program's collectives with the other ranks (none: a program with collectives fails when it reaches one).
  void run(const std::vector<void*>& hbm, uint64_t seed = 0, const Printer* printer = nullptr,
           const Communicator* communicator = nullptr) const;
  bool usesRandom() const { return uses_random_; }

  const Program& program() const { return program_; }
  int64_t arenaBytes() const { return arena_bytes_; }

 private:
  struct Plan {
    int64_t offset = -1;          // in the arena; -1: an HBM argument
    bool sentinel_first = false;  // filled with the sentinel before its first instruction
  };
  char* base(const std::vector<void*>& hbm, char* arena, int32_t tensor) const;
  // Instruction `index` as `in` says (the program's, or a copy its registers moved).
  Bound bind(const std::vector<void*>& hbm, char* arena, const Instruction& in, int32_t index,
             EngineGenerators* random, const Printer* printer, const Communicator* communicator) const;
  bool argumentsApart(const std::vector<void*>& hbm) const;
  void runStream(const PartitionStream& stream, const std::vector<Bound>& bounds) const;

  Program program_;
  std::vector<Plan> plans_;
  std::vector<std::vector<int32_t>> fresh_before_;  // per instruction: tensors to fill first (a stream's at its first)
  std::vector<std::vector<int32_t>> born_at_;        // per instruction: the kernel's tensors it first touches
  std::vector<uint8_t> rows_independent_;            // per instruction: its rows may run on several threads
  std::vector<uint8_t> bypass_caches_;               // per instruction: Bound::streaming_stores
  std::vector<PartitionStream> streams_;             // runs replayed a few partitions at a time
  std::vector<int32_t> stream_at_;                   // per instruction: the stream it starts, or -1
  int64_t arena_bytes_ = 0;
  bool uses_random_ = false;
};

}  // namespace nki
