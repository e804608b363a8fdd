// nc_matmul of fp32 tiles (and of any dtype without a faster kernel, widened
// first): register-blocked loops compiled for each SIMD level.
#pragma once

#include <cstdint>

namespace nki {

// out[M, N] += s[K, M]^T @ m[K, N], all dense fp32, at the level runtime/SimdLevel.h chooses.
void multiplyInto(const float* s, const float* m, float* out, int64_t K, int64_t M, int64_t N);

}  // namespace nki
