// Loops that run on the device (nl.fori_loop, nl.while_loop, nl.dynamic_range) and access patterns offset by
// a register (`.ap(scalar_offset=...)`). A register is an int32 element of a tensor of the program (loaded,
// stored and moved by DMA); a loop is a kLoopBegin ... kLoopEnd pair around one traced copy of its body,
// which the executor follows as jumps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

struct LoopSpan {
  int32_t begin = 0;  // the kLoopBegin
  int32_t end = 0;    // its kLoopEnd
};

// The program's loops in the order of their begins, or an error naming what does not pair up.
std::vector<LoopSpan> loopSpans(const Program& program, std::string* error = nullptr);

// Where a register lives in host memory, given the one-element view of it.
using RegisterAt = std::function<int32_t*(const Access&)>;

// A run's loop counters, one per kLoopBegin.
class LoopRunner {
 public:
  explicit LoopRunner(const Program& program) : program_(program), counters_(program.instructions.size()) {}

  // The instruction that runs after loop instruction i. A loop that repeats more than kMaxIterations
  // times in one run is an error (std::runtime_error), not a hang.
  int32_t next(int32_t i, const RegisterAt& reg);

  static constexpr int64_t kMaxIterations = int64_t{1} << 24;

 private:
  struct Counter {
    int64_t value = 0, upper = 0, iterations = 0;
  };
  const Program& program_;
  std::vector<Counter> counters_;
};

// `in` with its views moved by the registers its dynamic offsets name; std::out_of_range when a moved
// view leaves its tensor (or, on chip, its partitions' free range).
Instruction withDynamicOffsets(const Program& program, const Instruction& in, const RegisterAt& reg);

}  // namespace nki
