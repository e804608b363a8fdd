// nki.collectives.all_to_all_v and all_gather_v (Collectives.h): chunks of run-time lengths, which the
// metadata tensor gives as the kernel runs, moved between flat src and dst buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "nki_runtime/Collectives.h"

namespace nki {

struct Bound;

// The elements of `view` (at `base`) in row-major order, byte for byte, and back (Collectives.cpp).
std::vector<char> packView(const char* base, Dtype type, const Access& view);
void unpackView(const char* bytes, char* base, Dtype type, const Access& view);

// Runs a kAllToAllV or kAllGatherV instruction through the run's communicator. Throws std::out_of_range
// for a chunk past src, or a received chunk past dst or past its slot.
void variableCollective(const Bound& b);

}  // namespace nki
