#include "nki_runtime/Parallel.h"

#include <atomic>

namespace nki {
namespace {

std::atomic<ParallelFor> lent{nullptr};

}  // namespace

void setParallelFor(ParallelFor parallel_for) { lent.store(parallel_for); }

void parallelFor(int64_t count, int64_t min_chunk, const RangeBody& body) {
  if (count <= 0) return;
  const ParallelFor parallel_for = lent.load(std::memory_order_relaxed);
  if (parallel_for == nullptr || count < 2 * min_chunk) return body(0, count);
  parallel_for(count, min_chunk, body);
}

}  // namespace nki
