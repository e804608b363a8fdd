#include "nki_runtime/Fp32Matmul.h"

#include "runtime/SimdLevel.h"

namespace nki {
namespace {

// out[M, N] += s[K, M]^T @ m[K, N], dense fp32. Blocks of 4 output rows by 64
// columns stay in registers across the whole contraction (16 AVX-512
// accumulators); the same loops compiled for each SIMD level, chosen by
// runtime/SimdLevel.h (so TORCH_NEURONX_SIMD reaches the weaker CPUs' code).
// kRows x kCols accumulators fill the registers: 4 x 64 fp32 with AVX-512's 32, 4 x 16 with AVX2's 16.
template <int64_t kRows, int64_t kCols>
__attribute__((always_inline)) inline void multiplyBlocks(const float* s, const float* m, float* out, int64_t K,
                                                          int64_t M, int64_t N) {
  const int64_t full_rows = M / kRows * kRows, full_cols = N / kCols * kCols;
  for (int64_t i0 = 0; i0 < full_rows; i0 += kRows) {
    for (int64_t j0 = 0; j0 < full_cols; j0 += kCols) {
      float acc[kRows][kCols];  // unrolled so that it stays in registers
#pragma GCC unroll 4
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t j = 0; j < kCols; ++j) acc[r][j] = out[(i0 + r) * N + j0 + j];
      }
      for (int64_t k = 0; k < K; ++k) {
        const float* source = m + k * N + j0;
#pragma GCC unroll 4
        for (int64_t r = 0; r < kRows; ++r) {
          const float weight = s[k * M + i0 + r];
#pragma GCC unroll 64
          for (int64_t j = 0; j < kCols; ++j) acc[r][j] += weight * source[j];
        }
      }
#pragma GCC unroll 4
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t j = 0; j < kCols; ++j) out[(i0 + r) * N + j0 + j] = acc[r][j];
      }
    }
  }
  // The edges: rows past the last block of 4, columns past the last block of 64.
  for (int64_t i = 0; i < M; ++i) {
    const int64_t j_start = i < full_rows ? full_cols : 0;
    float* row = out + i * N;
    for (int64_t k = 0; k < K; ++k) {
      const float weight = s[k * M + i];
      const float* source = m + k * N;
      for (int64_t j = j_start; j < N; ++j) row[j] += weight * source[j];
    }
  }
}

__attribute__((target("avx512f"))) void multiplyAvx512(const float* s, const float* m, float* out, int64_t K,
                                                       int64_t M, int64_t N) {
  multiplyBlocks<4, 64>(s, m, out, K, M, N);
}

__attribute__((target("avx2,fma"))) void multiplyAvx2(const float* s, const float* m, float* out, int64_t K,
                                                      int64_t M, int64_t N) {
  multiplyBlocks<4, 16>(s, m, out, K, M, N);
}

}  // namespace

void multiplyInto(const float* s, const float* m, float* out, int64_t K, int64_t M, int64_t N) {
  const nrt::SimdLevel level = nrt::simdLevel();
  if (level >= nrt::SimdLevel::kAvx512) return multiplyAvx512(s, m, out, K, M, N);
  if (level >= nrt::SimdLevel::kAvx2) return multiplyAvx2(s, m, out, K, M, N);
  multiplyBlocks<4, 4>(s, m, out, K, M, N);
}

}  // namespace nki
