#include "aten/ops/Bf16Gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "aten/ops/RowParallel.h"

namespace torch_neuronx {
namespace {

// bf16 is the top half of an fp32: widening is a 16-bit shift.
float scalarDot(const c10::BFloat16* row, const float* x, int64_t begin, int64_t cols) {
  float sum = 0.f;
  for (int64_t k = begin; k < cols; ++k) sum += static_cast<float>(row[k]) * x[k];
  return sum;
}

__attribute__((target("avx512f"))) float dotAvx512(const c10::BFloat16* row, const float* x, int64_t cols) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) {
    __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k));
    __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k + 16));
    __m512 f0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w0), 16));
    __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w1), 16));
    acc0 = _mm512_fmadd_ps(f0, _mm512_loadu_ps(x + k), acc0);
    acc1 = _mm512_fmadd_ps(f1, _mm512_loadu_ps(x + k + 16), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + scalarDot(row, x, k, cols);
}

__attribute__((target("avx2,fma"))) float dotAvx2(const c10::BFloat16* row, const float* x, int64_t cols) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    __m128i w0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k));
    __m128i w1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 8));
    __m256 f0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w0), 16));
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(w1), 16));
    acc0 = _mm256_fmadd_ps(f0, _mm256_loadu_ps(x + k), acc0);
    acc1 = _mm256_fmadd_ps(f1, _mm256_loadu_ps(x + k + 8), acc1);
  }
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  half = _mm_hadd_ps(half, half);
  half = _mm_hadd_ps(half, half);
  return _mm_cvtss_f32(half) + scalarDot(row, x, k, cols);
}

using DotFn = float (*)(const c10::BFloat16*, const float*, int64_t);

float dotScalar(const c10::BFloat16* row, const float* x, int64_t cols) { return scalarDot(row, x, 0, cols); }

DotFn pickDot() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return &dotAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &dotAvx2;
  return &dotScalar;
}

}  // namespace

void bf16Gemv(const c10::BFloat16* weight, const c10::BFloat16* x, c10::BFloat16* y, int64_t rows, int64_t cols) {
  static const DotFn dot = pickDot();
  std::vector<float> x_wide(x, x + cols);
  const float* xs = x_wide.data();
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_rows = std::max<int64_t>(16, (int64_t{64} << 10) / (2 * std::max<int64_t>(cols, 1)));
  parallelRows(rows, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) y[n] = c10::BFloat16(dot(weight + n * cols, xs, cols));
  });
}

}  // namespace torch_neuronx
