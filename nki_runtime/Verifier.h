// Checks a traced program as the NKI compiler and the hardware would: tile
// shapes, which engine reaches which memory, dtype rules, bounds, PSUM banks,
// SBUF capacity and affine_range iterations that depend on each other.
#pragma once

#include <string>
#include <vector>

#include "nki_runtime/Hardware.h"
#include "nki_runtime/Program.h"

namespace nki {

struct Violation {
  int instruction = -1;  // -1: the program as a whole
  int line = 0;
  std::string message;
};

// Every violation, in instruction order (empty: the program may run).
std::vector<Violation> verify(const Program& program, const CoreLimits& limits);

}  // namespace nki
