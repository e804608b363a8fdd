// How the executor spreads one instruction over threads. The runtime owns no
// threads: the host side (the torch glue) lends its pool through
// setParallelFor. Until it does (and in the GoogleTest binary, unless a test
// lends one), every instruction runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace nki {

using RangeBody = std::function<void(int64_t begin, int64_t end)>;
// Calls body over disjoint ranges covering [0, count), of at least min_chunk each, maybe on several threads,
// and returns when all are done.
using ParallelFor = void (*)(int64_t count, int64_t min_chunk, const RangeBody& body);

void setParallelFor(ParallelFor parallel_for);
void parallelFor(int64_t count, int64_t min_chunk, const RangeBody& body);

}  // namespace nki
