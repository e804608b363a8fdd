#include "aten/kernels/RowTimesMatrix.h"

#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WideningLoads.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

using widening::load16;
using widening::load8;

// Matrix rows taken together: each accumulator vector is loaded and stored once per block instead of
// once per row, and the block's next rows are prefetched where it reads its own. Against one
// multiply-add pass per matrix row (an axpy per row over each helper's band of columns), GPT-2's
// [768, 2304..3072] fp32 matrices from memory on 2 Zen 5 cores: 22 -> 40 GB/s at 1 row, 10 -> 36 GB/s
// at 4; blocks of 4 rows were slower than 8, 16 no faster.
constexpr int kBlockRows = 8;
// Helper threads take bands of whole 64-column groups: a cache line of fp32 or bf16 starts each band.
constexpr int64_t kColumnGroup = 64;

// A block's matrix rows, a pointer each, and where the block after it starts (its prefetch target).
template <typename T, int KB>
struct MatrixBlock {
  const T* rows[KB];
  int64_t ahead;  // values from each row to the same column of the next block's row
};

template <typename T, int KB>
MatrixBlock<T, KB> blockAt(const T* matrix, int64_t k0, int64_t N) {
  MatrixBlock<T, KB> block;
  for (int j = 0; j < KB; ++j) block.rows[j] = matrix + (k0 + j) * N;
  block.ahead = KB * N;
  return block;
}

template <int KB, typename T>
void blockScalar(const MatrixBlock<T, KB>& block, const float* x, int64_t R, int64_t K, float* acc,
                 int64_t acc_stride, int64_t c0, int64_t c1) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      float sum = acc[r * acc_stride + c];
      for (int j = 0; j < KB; ++j) sum += x[r * K + j] * static_cast<float>(block.rows[j][c]);
      acc[r * acc_stride + c] = sum;
    }
  }
}

// acc[r, c] += sum over j of x[r, j] * rows[j][c] for c in [c0, c1), r < R. x rows are K apart
// (already offset to the block), acc rows acc_stride apart (indexed by column).
template <int KB, typename T>
__attribute__((target("avx512f"))) void blockAvx512(const MatrixBlock<T, KB>& block, const float* x, int64_t R,
                                                    int64_t K, float* acc, int64_t acc_stride, int64_t c0,
                                                    int64_t c1) {
  int64_t c = c0;
  for (; c + 16 <= c1; c += 16) {
#pragma GCC unroll 8
    for (int j = 0; j < KB; ++j) _mm_prefetch(reinterpret_cast<const char*>(block.rows[j] + block.ahead + c), _MM_HINT_T0);
    for (int64_t r = 0; r < R; ++r) {
      const float* xr = x + r * K;
      __m512 sum = _mm512_loadu_ps(acc + r * acc_stride + c);
#pragma GCC unroll 8
      for (int j = 0; j < KB; ++j) sum = _mm512_fmadd_ps(_mm512_set1_ps(xr[j]), load16(block.rows[j] + c), sum);
      _mm512_storeu_ps(acc + r * acc_stride + c, sum);
    }
  }
  blockScalar<KB>(block, x, R, K, acc, acc_stride, c, c1);
}

template <int KB, typename T>
__attribute__((target("avx2,fma"))) void blockAvx2(const MatrixBlock<T, KB>& block, const float* x, int64_t R,
                                                   int64_t K, float* acc, int64_t acc_stride, int64_t c0,
                                                   int64_t c1) {
  constexpr int kStep = 64 / sizeof(T);  // a cache line of each row per step, prefetched once
  int64_t c = c0;
  for (; c + kStep <= c1; c += kStep) {
#pragma GCC unroll 8
    for (int j = 0; j < KB; ++j) _mm_prefetch(reinterpret_cast<const char*>(block.rows[j] + block.ahead + c), _MM_HINT_T0);
    for (int64_t r = 0; r < R; ++r) {
      const float* xr = x + r * K;
#pragma GCC unroll 4
      for (int64_t v = c; v < c + kStep; v += 8) {
        __m256 sum = _mm256_loadu_ps(acc + r * acc_stride + v);
#pragma GCC unroll 8
        for (int j = 0; j < KB; ++j) sum = _mm256_fmadd_ps(_mm256_set1_ps(xr[j]), load8(block.rows[j] + v), sum);
        _mm256_storeu_ps(acc + r * acc_stride + v, sum);
      }
    }
  }
  blockScalar<KB>(block, x, R, K, acc, acc_stride, c, c1);
}

// One block of matrix rows [k0, k0 + KB) over the columns [c0, c1), with the widest SIMD there is.
template <int KB, typename T>
void block(SimdLevel level, const T* matrix, int64_t k0, int64_t N, const float* x, int64_t R, int64_t K,
           float* acc, int64_t acc_stride, int64_t c0, int64_t c1) {
  const MatrixBlock<T, KB> rows = blockAt<T, KB>(matrix, k0, N);
  if (level >= SimdLevel::kAvx512) return blockAvx512<KB>(rows, x + k0, R, K, acc, acc_stride, c0, c1);
  if (level >= SimdLevel::kAvx2) return blockAvx2<KB>(rows, x + k0, R, K, acc, acc_stride, c0, c1);
  blockScalar<KB>(rows, x + k0, R, K, acc, acc_stride, c0, c1);
}

// acc[r, c0:c1] = bias[c0:c1] (or 0) + sum over k of x[r, k] * matrix[k, c0:c1], k in order, in fp32.
template <typename T>
void columnBand(const float* x, int64_t R, const T* matrix, const T* bias, float* acc, int64_t acc_stride,
                int64_t K, int64_t N, int64_t c0, int64_t c1) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = c0; c < c1; ++c) acc[r * acc_stride + c] = bias ? static_cast<float>(bias[c]) : 0.f;
  }
  const SimdLevel level = simdLevel();
  int64_t k = 0;
  for (; k + kBlockRows <= K; k += kBlockRows) block<kBlockRows>(level, matrix, k, N, x, R, K, acc, acc_stride, c0, c1);
  for (; k < K; ++k) block<1>(level, matrix, k, N, x, R, K, acc, acc_stride, c0, c1);
}

template <typename T>
void streamRows(const T* x, int64_t x_stride, int64_t R, const T* matrix, const T* bias, T* y, int64_t K,
                int64_t N) {
  std::vector<float> xs(R * K);  // the rows widened once, next to each other
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < K; ++k) xs[r * K + k] = static_cast<float>(x[r * x_stride + k]);
  }
  const int64_t groups = (N + kColumnGroup - 1) / kColumnGroup;
  // Each helper takes a band of at least 256 columns (1 KiB of each fp32 row) and walks all rows.
  parallelRows(groups, 4, [&](int64_t g0, int64_t g1) {
    const int64_t c0 = g0 * kColumnGroup, c1 = std::min(N, g1 * kColumnGroup);
    if constexpr (std::is_same_v<T, float>) {  // fp32 sums in y itself
      columnBand(xs.data(), R, matrix, bias, y, N, K, N, c0, c1);
    } else {
      // Sums laid out as y is (columns indexed alike); only this band's are written and read.
      std::unique_ptr<float[]> acc(new float[R * N]);
      columnBand(xs.data(), R, matrix, bias, acc.get(), N, K, N, c0, c1);
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = c0; c < c1; ++c) y[r * N + c] = static_cast<T>(acc[r * N + c]);
      }
    }
  });
}

}  // namespace

int64_t maxRowsTimesMatrix(bool bf16) { return bf16 || simdLevel() >= SimdLevel::kAvx512 ? 8 : 6; }

void rowsTimesMatrix(const float* x, int64_t x_stride, int64_t R, const float* matrix, const float* bias, float* y,
                     int64_t K, int64_t N) {
  streamRows(x, x_stride, R, matrix, bias, y, K, N);
}

void rowsTimesMatrix(const c10::BFloat16* x, int64_t x_stride, int64_t R, const c10::BFloat16* matrix,
                     const c10::BFloat16* bias, c10::BFloat16* y, int64_t K, int64_t N) {
  streamRows(x, x_stride, R, matrix, bias, y, K, N);
}

}  // namespace torch_neuronx
