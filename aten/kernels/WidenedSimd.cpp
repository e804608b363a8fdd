#include "aten/kernels/WidenedSimd.h"

#include <immintrin.h>

#include <algorithm>

#include "aten/kernels/WideningLoads.h"

namespace torch_neuronx {
namespace {

using widening::load16;
using widening::load8;

template <typename X, typename Y>
float dotScalar(const X* x, const Y* y, int64_t begin, int64_t n) {
  float sum = 0.f;
  for (int64_t i = begin; i < n; ++i) sum += static_cast<float>(x[i]) * static_cast<float>(y[i]);
  return sum;
}

template <typename T>
void axpyScalar(float alpha, const T* x, float* y, int64_t begin, int64_t n) {
  for (int64_t i = begin; i < n; ++i) y[i] += alpha * static_cast<float>(x[i]);
}

template <typename X, typename Y>
__attribute__((target("avx512f"))) float dotAvx512(const X* x, const Y* y, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(load16(x + i), load16(y + i), acc0);
    acc1 = _mm512_fmadd_ps(load16(x + i + 16), load16(y + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load16(x + i), load16(y + i), acc0);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + dotScalar(x, y, i, n);
}

template <typename T>
__attribute__((target("avx512f"))) void axpyAvx512(float alpha, const T* x, float* y, int64_t n) {
  const __m512 a = _mm512_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(a, load16(x + i), _mm512_loadu_ps(y + i)));
  axpyScalar(alpha, x, y, i, n);
}

template <typename X, typename Y>
__attribute__((target("avx2,fma"))) float dotAvx2(const X* x, const Y* y, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8(x + i), load8(y + i), acc0);
    acc1 = _mm256_fmadd_ps(load8(x + i + 8), load8(y + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load8(x + i), load8(y + i), acc0);
  __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  half = _mm_hadd_ps(half, half);
  half = _mm_hadd_ps(half, half);
  return _mm_cvtss_f32(half) + dotScalar(x, y, i, n);
}

template <typename T>
__attribute__((target("avx2,fma"))) void axpyAvx2(float alpha, const T* x, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, load8(x + i), _mm256_loadu_ps(y + i)));
  axpyScalar(alpha, x, y, i, n);
}

// bf16 x bf16 with AVX512-BF16: 32 pairs multiplied and summed into the fp32 lanes per instruction.
__attribute__((target("avx512f,avx512bf16"))) float dotBf16Pairs(const c10::BFloat16* x, const c10::BFloat16* y,
                                                                 int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(x + i), (__m512bh)_mm512_loadu_si512(y + i));
    acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_loadu_si512(x + i + 32),
                            (__m512bh)_mm512_loadu_si512(y + i + 32));
  }
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(x + i), (__m512bh)_mm512_loadu_si512(y + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + dotScalar(x, y, i, n);
}

template <typename X, typename Y>
float dot(const X* x, const Y* y, int64_t n) {
  switch (simdLevel()) {
    case SimdLevel::kAmx:
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512: return dotAvx512(x, y, n);
    case SimdLevel::kAvx2: return dotAvx2(x, y, n);
    default: return dotScalar(x, y, 0, n);
  }
}

template <typename T>
void axpy(float alpha, const T* x, float* y, int64_t n) {
  switch (simdLevel()) {
    case SimdLevel::kAmx:
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAvx512: return axpyAvx512(alpha, x, y, n);
    case SimdLevel::kAvx2: return axpyAvx2(alpha, x, y, n);
    default: return axpyScalar(alpha, x, y, 0, n);
  }
}

}  // namespace

float dotWidened(const c10::BFloat16* x, const float* y, int64_t n) { return dot(x, y, n); }
float dotWidened(const float* x, const float* y, int64_t n) { return dot(x, y, n); }
void axpyWidened(float alpha, const c10::BFloat16* x, float* y, int64_t n) { axpy(alpha, x, y, n); }

float dotWidened(const c10::BFloat16* x, const c10::BFloat16* y, int64_t n) {
  return simdLevel() >= SimdLevel::kAvx512Bf16 ? dotBf16Pairs(x, y, n) : dot(x, y, n);
}

void axpyWidened(float alpha, const float* x, float* y, int64_t n) { axpy(alpha, x, y, n); }

}  // namespace torch_neuronx
