// The emulated DMA engine: copies between host memory and device memory, and
// between cores. Large copies are split across the host's cores.
#pragma once

#include <cstddef>

namespace nrt {

void copyBytes(void* dst, const void* src, std::size_t bytes);

}  // namespace nrt
