#include "Copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace nrt {
namespace {
// Below this a single memcpy beats the cost of waking threads.
constexpr std::size_t kParallelThreshold = std::size_t{1} << 21;
}  // namespace

void copyBytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const int threads = std::min<int>(omp_get_max_threads(), static_cast<int>(bytes / kParallelThreshold));
  if (threads <= 1 || omp_in_parallel()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  const std::size_t chunk = ((bytes / threads) + 63) & ~std::size_t{63};
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::size_t begin = chunk * t;
    if (begin < bytes) std::memcpy(out + begin, in + begin, std::min(chunk, bytes - begin));
  }
}

}  // namespace nrt
