// nc_matmul of two bf16 tiles with AVX512-BF16: pairs of exact bf16 products
// summed into fp32 lanes by one instruction, twice the multiply-adds of an
// fp32 FMA (Zen 4/5, Xeon from Sapphire Rapids).
#pragma once

#include <cstdint>

namespace nki {

// Whether the SIMD level (runtime/SimdLevel.h) has AVX512-BF16.
bool hasBf16Pairs();

// out[M, N] (fp32, rows `out_rows` apart, accumulated into) += s[K, M]^T @ m[K, N];
// element (r, c) of s at s[r * s_rows + c * s_cols], of m likewise. Only if hasBf16Pairs().
void multiplyBf16(const uint16_t* s, int64_t s_rows, int64_t s_cols, const uint16_t* m, int64_t m_rows,
                  int64_t m_cols, float* out, int64_t out_rows, int64_t K, int64_t M, int64_t N);

}  // namespace nki
