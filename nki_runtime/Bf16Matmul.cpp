#include "nki_runtime/Bf16Matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "runtime/SimdLevel.h"

namespace nki {
namespace {

constexpr int64_t kCols = 64;  // 4 vectors of 16 fp32 lanes

// Rows [i, i + R) by columns [j0, j0 + 64) of out, over every pair of contraction rows.
template <int R>
__attribute__((target("avx512f,avx512bf16"))) void block(const uint32_t* s_pairs, const uint32_t* m_pairs,
                                                         float* out, int64_t out_rows, int64_t pairs, int64_t M,
                                                         int64_t N, int64_t i, int64_t j0, const __mmask16* masks) {
  // Fully unrolled, so that the 4 x R accumulators live in registers, not on the stack.
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_maskz_loadu_ps(masks[c], out + (i + r) * out_rows + j0 + 16 * c);
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i moving[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) moving[c] = _mm512_maskz_loadu_epi32(masks[c], m_pairs + p * N + j0 + 16 * c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh weight = (__m512bh)_mm512_set1_epi32(static_cast<int>(s_pairs[p * M + i + r]));
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], weight, (__m512bh)moving[c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(out + (i + r) * out_rows + j0 + 16 * c, masks[c], acc[r][c]);
  }
}

// Contraction rows 2p and 2p + 1 of a [K, cols] bf16 tile side by side: pairs[p * cols + c].
void pack(const uint16_t* tile, int64_t rows_stride, int64_t cols_stride, int64_t K, int64_t cols,
          std::vector<uint32_t>& pairs) {
  const int64_t count = (K + 1) / 2;
  pairs.resize(count * cols);
  for (int64_t p = 0; p < count; ++p) {
    const uint16_t* even = tile + 2 * p * rows_stride;
    const uint16_t* odd = 2 * p + 1 < K ? even + rows_stride : nullptr;
    uint32_t* row = pairs.data() + p * cols;
    if (cols_stride == 1 && odd) {  // the common case, in a loop the compiler vectorises
      for (int64_t c = 0; c < cols; ++c) row[c] = even[c] | static_cast<uint32_t>(odd[c]) << 16;
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t high = odd ? odd[c * cols_stride] : 0;
      row[c] = even[c * cols_stride] | high << 16;
    }
  }
}

}  // namespace

bool hasBf16Pairs() { return nrt::simdLevel() >= nrt::SimdLevel::kAvx512Bf16; }

void multiplyBf16(const uint16_t* s, int64_t s_rows, int64_t s_cols, const uint16_t* m, int64_t m_rows,
                  int64_t m_cols, float* out, int64_t out_rows, int64_t K, int64_t M, int64_t N) {
  thread_local std::vector<uint32_t> s_pairs, m_pairs;
  pack(s, s_rows, s_cols, K, M, s_pairs);
  pack(m, m_rows, m_cols, K, N, m_pairs);
  const int64_t pairs = (K + 1) / 2;
  for (int64_t j0 = 0; j0 < N; j0 += kCols) {
    __mmask16 masks[4];
    for (int c = 0; c < 4; ++c) {
      const int64_t lanes = std::clamp<int64_t>(N - j0 - 16 * c, 0, 16);
      masks[c] = static_cast<__mmask16>(lanes == 16 ? 0xffff : (1u << lanes) - 1);
    }
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) block<4>(s_pairs.data(), m_pairs.data(), out, out_rows, pairs, M, N, i, j0, masks);
    for (; i < M; ++i) block<1>(s_pairs.data(), m_pairs.data(), out, out_rows, pairs, M, N, i, j0, masks);
  }
}

}  // namespace nki
