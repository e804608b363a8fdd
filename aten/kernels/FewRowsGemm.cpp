#include "aten/kernels/FewRowsGemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WideningLoads.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

constexpr int kRowsPerPass = 8;  // left rows whose accumulators stay in registers: 2 x 8 of AVX-512's 32
static_assert(kFewRows <= kRowsPerPass, "every left row of a product is in one pass");

using widening::load16;

// out{0,1}[r] = dot(weight row {0,1}, x row r) for R left rows (widened to fp32, K apart).
template <int R, typename T>
__attribute__((target("avx512f"))) void twoWeightRows(const T* w0, const T* w1, const float* x, int64_t K,
                                                      float* out0, float* out1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 v0 = load16(w0 + k), v1 = load16(w1 + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_loadu_ps(x + r * K + k);
      acc0[r] = _mm512_fmadd_ps(v0, xr, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(v1, xr, acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float s0 = _mm512_reduce_add_ps(acc0[r]), s1 = _mm512_reduce_add_ps(acc1[r]);
    for (int64_t j = k; j < K; ++j) {
      s0 += static_cast<float>(w0[j]) * x[r * K + j];
      s1 += static_cast<float>(w1[j]) * x[r * K + j];
    }
    out0[r] = s0;
    out1[r] = s1;
  }
}

template <typename T>
using TwoRowsFn = void (*)(const T*, const T*, const float*, int64_t, float*, float*);

template <typename T>
TwoRowsFn<T> twoRowsKernel(int rows) {
  static const TwoRowsFn<T> kernels[kRowsPerPass] = {&twoWeightRows<1, T>, &twoWeightRows<2, T>,
                                                     &twoWeightRows<3, T>, &twoWeightRows<4, T>,
                                                     &twoWeightRows<5, T>, &twoWeightRows<6, T>,
                                                     &twoWeightRows<7, T>, &twoWeightRows<8, T>};
  return kernels[rows - 1];
}

// Weight rows [begin, end) against every left row; a lone last row pairs with itself.
template <typename T>
void weightRows(const T* weight, const float* x, const T* bias, int64_t M, int64_t K, int64_t N, T* out,
                int64_t begin, int64_t end) {
  const TwoRowsFn<T> kernel = twoRowsKernel<T>(static_cast<int>(M));
  float dots[2][kRowsPerPass];
  for (int64_t n = begin; n < end; n += 2) {
    const T* w0 = weight + n * K;
    const T* w1 = n + 1 < end ? w0 + K : w0;
    kernel(w0, w1, x, K, dots[0], dots[1]);
    const float bias0 = bias ? static_cast<float>(bias[n]) : 0.f;
    const float bias1 = bias && n + 1 < end ? static_cast<float>(bias[n + 1]) : 0.f;
    for (int64_t r = 0; r < M; ++r) {
      out[r * N + n] = static_cast<T>(dots[0][r] + bias0);
      if (n + 1 < end) out[r * N + n + 1] = static_cast<T>(dots[1][r] + bias1);
    }
  }
}

template <typename T>
void streamWeight(const T* left, int64_t left_stride, int64_t M, const T* weight, const T* bias, T* out, int64_t N,
                  int64_t K) {
  std::vector<float> x(M * K);  // left rows widened once; a few KiB, cache-resident for the whole product
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) x[m * K + k] = static_cast<float>(left[m * left_stride + k]);
  }
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_rows = std::max<int64_t>(16, (int64_t{64} << 10) / (static_cast<int64_t>(sizeof(T)) * K));
  parallelRows(N, min_rows, [&](int64_t begin, int64_t end) {
    weightRows(weight, x.data(), bias, M, K, N, out, begin, end);
  });
}

}  // namespace

bool hasFewRowsGemm() { return simdLevel() >= SimdLevel::kAvx512; }

void fewRowsTimesWeight(const float* left, int64_t left_stride, int64_t M, const float* weight, const float* bias,
                        float* out, int64_t N, int64_t K) {
  streamWeight(left, left_stride, M, weight, bias, out, N, K);
}

void fewRowsTimesWeight(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
                        const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K) {
  streamWeight(left, left_stride, M, weight, bias, out, N, K);
}

}  // namespace torch_neuronx
