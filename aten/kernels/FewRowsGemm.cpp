#include "aten/kernels/FewRowsGemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WideningLoads.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

constexpr int kMaxLeftRows = 8;  // left rows a block of weight rows meets (in one pass; AVX2 in two)
static_assert(kFewRows <= kMaxLeftRows, "every left row of a product meets each weight block");

using widening::load16;
using widening::load8;

// W weight rows against R left rows at once: each left-row load feeds W
// multiply-adds and each weight load R, so the loop is bound by reading the
// weight rather than by loads. W x R accumulators stay in registers (AVX-512
// has 32, AVX2 16); dots[i * R + r] += dot(weight row i, left row r).
constexpr int avx512WeightRows(int R) { return R <= 6 ? 4 : 3; }
constexpr int avx2WeightRows(int R) { return R <= 2 ? 4 : R == 3 ? 3 : 2; }

// AVX2 has 16 vector registers: 5-8 left rows in one pass leave room for one or two weight rows, and
// the loop then loads almost once per multiply-add. Two passes over a block of 2 weight rows (the
// second reads them from L1), 4 left rows and then the rest, load less: 8 bf16 rows against a weight in
// cache on a Xeon, 95 -> 103 GFLOP/s on one core.
constexpr int kAvx2PassRows = 4;

__attribute__((target("avx2"))) inline float horizontalSum(__m256 v) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  half = _mm_hadd_ps(half, half);
  return _mm_cvtss_f32(_mm_hadd_ps(half, half));
}

// The next block of weight rows (the W rows after these) is prefetched a cache line at a time, at the
// place this block reads its own: at 4-8 left rows the product runs compute-bound stretches during
// which the hardware prefetchers alone fall behind the memory (8 fp32 rows on AVX-512: 67 -> 53 ms
// over 1.2 GB). The loops run a whole line of each weight row per iteration and prefetch there
// unconditionally: a test per step whether a new line began cost a third of the multiply-adds' speed
// (8 bf16 rows on AVX2 against a weight in cache: 58 -> 88 GFLOP/s on one core). A second pass over
// the same block (AVX2's rest) reads it from L1 and prefetches nothing.
constexpr int kLine = 64;

template <int W>
inline void prefetchLine(const char* next, int64_t row_bytes) {
#pragma GCC unroll 4
  for (int i = 0; i < W; ++i) _mm_prefetch(next + i * row_bytes, _MM_HINT_T0);
}

// Steps of `kLanes` values of T in one cache line of weight (at least one).
template <typename T, int kLanes>
constexpr int stepsPerLine() {
  return std::max<int>(1, kLine / (kLanes * static_cast<int>(sizeof(T))));
}

template <int W, int R, typename T>
void scalarTail(const T* const* w, const float* x, int64_t K, int64_t ldx, int64_t k, float* dots) {
  for (int i = 0; i < W; ++i) {
    for (int r = 0; r < R; ++r) {
      for (int64_t j = k; j < K; ++j) dots[i * R + r] += static_cast<float>(w[i][j]) * x[r * ldx + j];
    }
  }
}

// dots[a] += the sum of v[a]'s lanes, a < N. Sixteen vectors at a time are added pairwise while being
// transposed (shuffles of 128-bit quarters, then of lanes), three instructions per vector instead of
// the eight of a reduction each: a block of 3 x 8 accumulators reduced once per 768 values of K spent
// a tenth of its time there.
template <int N>
__attribute__((target("avx512f"), always_inline)) inline void sumLanes(const __m512* v, float* dots) {
  // After the tree, lane 4q + e holds the sum of vector 4e + q; this puts vector j in lane j.
  const __m512i in_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#pragma GCC unroll 2
  for (int g = 0; g < N; g += 16) {
    __m512 x[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) x[j] = g + j < N ? v[g + j] : _mm512_setzero_ps();
    __m512 s[8], t[4], u[2];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {  // quarters 0+2 and 1+3 of x[2j] into the low half, of x[2j+1] the high
      s[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0x44),
                           _mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0xEE));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {  // quarter q: 4 partial sums of x[4j + q]
      t[j] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * j], s[2 * j + 1], 0x88),
                           _mm512_shuffle_f32x4(s[2 * j], s[2 * j + 1], 0xDD));
    }
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {  // within each quarter: 2 partial sums of two vectors
      u[j] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * j], t[2 * j + 1], 0x44),
                           _mm512_shuffle_ps(t[2 * j], t[2 * j + 1], 0xEE));
    }
    const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
    const __m512 ordered = _mm512_permutexvar_ps(in_order, sums);
    if (g + 16 <= N) {
      _mm512_storeu_ps(dots + g, _mm512_add_ps(_mm512_loadu_ps(dots + g), ordered));
    } else {
      const auto lanes = static_cast<__mmask16>((1u << (N - g)) - 1);
      _mm512_mask_storeu_ps(dots + g, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, dots + g), ordered));
    }
  }
}

template <int W, int R, typename T>
__attribute__((target("avx512f"), always_inline)) inline void stepAvx512(const T* const* w, const float* x, int64_t ldx,
                                                                        int64_t k, __m512 (&acc)[W][R]) {
  __m512 v[W];
#pragma GCC unroll 4
  for (int i = 0; i < W; ++i) v[i] = load16(w[i] + k);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 xr = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) acc[i][r] = _mm512_fmadd_ps(v[i], xr, acc[i][r]);
  }
}

template <int W, int R, typename T>
__attribute__((target("avx512f"))) void blockAvx512(const T* const* w, const void* left, int64_t K, int64_t ldx,
                                                    int64_t row_bytes, float* dots) {
  const float* x = static_cast<const float*>(left);
  __m512 acc[W][R];
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm512_setzero_ps();
  const char* next = reinterpret_cast<const char*>(w[0]) + W * row_bytes;
  // A prefetch on every step (twice per line for bf16): unrolled to a whole line, the loop leaves GCC
  // too few of the 32 registers for 24 accumulators (register copies, reloads).
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    prefetchLine<W>(next + k * static_cast<int64_t>(sizeof(T)), row_bytes);
    stepAvx512<W, R>(w, x, ldx, k, acc);
  }
  sumLanes<W * R>(&acc[0][0], dots);
  scalarTail<W, R>(w, x, K, ldx, k, dots);
}

// bf16 weights on AVX-512 without AVX512-BF16, K a multiple of 32: one load of 32 weights gives
// the odd ones (the top halves of its 32-bit lanes, masked) and the even ones (shifted up), two
// instructions per 32 weights where widening 16 at a time takes four, beside the multiply-adds on
// the same two ports. The left rows come widened with each 32 values split the same way: the 16
// even ones, then the 16 odd ones.
template <int W, int R>
__attribute__((target("avx512f"))) void blockAvx512EvenOdd(const c10::BFloat16* const* w, const void* left,
                                                           int64_t K, int64_t ldx, int64_t row_bytes, float* dots) {
  const float* x = static_cast<const float*>(left);
  __m512 acc[W][R];
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm512_setzero_ps();
  const __m512i top_halves = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const char* next = reinterpret_cast<const char*>(w[0]) + W * row_bytes;
  for (int64_t k = 0; k < K; k += 32) {  // 32 bf16: one cache line of each weight row
    prefetchLine<W>(next + k * 2, row_bytes);
    __m512 even[W], odd[W];
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) {
      const __m512i raw = _mm512_loadu_si512(w[i] + k);
      even[i] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
      odd[i] = _mm512_castsi512_ps(_mm512_and_si512(raw, top_halves));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_fmadd_ps(even[i], xr, acc[i][r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_loadu_ps(x + r * ldx + k + 16);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_fmadd_ps(odd[i], xr, acc[i][r]);
    }
  }
  sumLanes<W * R>(&acc[0][0], dots);
}

template <int W, int R, typename T>
__attribute__((target("avx2,fma"), always_inline)) inline void stepAvx2(const T* const* w, const float* x, int64_t ldx,
                                                                       int64_t k, __m256 (&acc)[W][R]) {
  __m256 v[W];
#pragma GCC unroll 4
  for (int i = 0; i < W; ++i) v[i] = load8(w[i] + k);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 xr = _mm256_loadu_ps(x + r * ldx + k);
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) acc[i][r] = _mm256_fmadd_ps(v[i], xr, acc[i][r]);
  }
}

template <int W, int R, typename T, bool kPrefetch = true>
__attribute__((target("avx2,fma"))) void blockAvx2(const T* const* w, const void* left, int64_t K, int64_t ldx,
                                                   int64_t row_bytes, float* dots) {
  const float* x = static_cast<const float*>(left);
  constexpr int kSteps = stepsPerLine<T, 8>();
  __m256 acc[W][R];
#pragma GCC unroll 16
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm256_setzero_ps();
  const char* next = reinterpret_cast<const char*>(w[0]) + W * row_bytes;
  int64_t k = 0;
  for (; k + 8 * kSteps <= K; k += 8 * kSteps) {
    if constexpr (kPrefetch) prefetchLine<W>(next + k * static_cast<int64_t>(sizeof(T)), row_bytes);
#pragma GCC unroll 4
    for (int s = 0; s < kSteps; ++s) stepAvx2<W, R>(w, x, ldx, k + 8 * s, acc);
  }
  for (; k + 8 <= K; k += 8) stepAvx2<W, R>(w, x, ldx, k, acc);
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) dots[a] += horizontalSum(acc[a / R][a % R]);
  scalarTail<W, R>(w, x, K, ldx, k, dots);
}

// bf16 weights and bf16 left rows with AVX512-BF16: 32 exact products summed
// into the fp32 lanes per instruction. The left
// rows stay bf16 (half the bytes to load); K must be a multiple of 32.
template <int W, int R>
__attribute__((target("avx512f,avx512bf16"))) void blockBf16Pairs(const c10::BFloat16* const* w, const void* left,
                                                                  int64_t K, int64_t ldx, int64_t row_bytes,
                                                                  float* dots) {
  const c10::BFloat16* x = static_cast<const c10::BFloat16*>(left);
  __m512 acc[W][R];
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm512_setzero_ps();
  const char* next = reinterpret_cast<const char*>(w[0]) + W * row_bytes;
  for (int64_t k = 0; k < K; k += 32) {  // 32 bf16: one cache line of each weight row
    prefetchLine<W>(next + k * 2, row_bytes);
    __m512bh v[W];
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) v[i] = (__m512bh)_mm512_loadu_si512(w[i] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh xr = (__m512bh)_mm512_loadu_si512(x + r * ldx + k);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], v[i], xr);
    }
  }
  sumLanes<W * R>(&acc[0][0], dots);
}

// One or two left rows: the block's weight rows one after another, each from start to end, so that
// a thread reads its weight as one sequential stream, as a reduction over memory does, where the
// row-interleaved order above reads W streams at once. With the weight from memory (424 bf16 or 212
// fp32 weights of 2048x768, 2 Zen 5 cores, both orders in one process, medians), one bf16 row read 34
// GB/s that way and 38 this way with AVX512-BF16, 41 and 47 as the AVX2 kind; one fp32 row 41 and 44,
// two 37 and 41, as the AVX2 kind. The Llama-125M bf16 decode step took 13.3 -> 12.0 ms. At 4 and more
// rows the multiply-adds bound the pass, and W rows sharing each left-row load win. (AVX-512 fp32 takes
// this order for one row, below; bf16 on AVX-512 without BF16, the even/odd path, keeps the interleaved
// order: not measured against this one.)
constexpr int kMaxSequentialRows = 2;

template <int kChains, int R>
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline void sequentialStep(
    const c10::BFloat16* row, const c10::BFloat16* x, int64_t ldx, int64_t k, int64_t ahead,
    __m512 (&acc)[R][kChains], int chain) {
  _mm_prefetch(reinterpret_cast<const char*>(row + k) + ahead, _MM_HINT_T0);
  const __m512bh v = (__m512bh)_mm512_loadu_si512(row + k);
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    acc[r][chain] = _mm512_dpbf16_ps(acc[r][chain], v, (__m512bh)_mm512_loadu_si512(x + r * ldx + k));
  }
}

template <int W, int R>
__attribute__((target("avx512f,avx512bf16"))) void blockBf16Sequential(const c10::BFloat16* const* w,
                                                                       const void* left, int64_t K, int64_t ldx,
                                                                       int64_t row_bytes, float* dots) {
  static_assert(R <= kMaxSequentialRows, "each left row keeps kChains accumulators in registers");
  const c10::BFloat16* x = static_cast<const c10::BFloat16*>(left);
  // Independent sums per row, so that the multiply-adds' latency does not bound one row's pass.
  constexpr int kChains = R == 1 ? 4 : 2;
  const int64_t ahead = W * row_bytes;  // the same place in the next block: a block's bytes ahead
  for (int i = 0; i < W; ++i) {
    __m512 acc[R][kChains];
#pragma GCC unroll 8
    for (int a = 0; a < R * kChains; ++a) acc[a / kChains][a % kChains] = _mm512_setzero_ps();
    const c10::BFloat16* row = w[i];
    int64_t k = 0;  // K is a multiple of 32: a cache line of the row per step
    for (; k + 32 * kChains <= K; k += 32 * kChains) {
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) sequentialStep<kChains, R>(row, x, ldx, k + 32 * c, ahead, acc, c);
    }
    for (; k < K; k += 32) sequentialStep<kChains, R>(row, x, ldx, k, ahead, acc, 0);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      __m512 sum = acc[r][0];
#pragma GCC unroll 4
      for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[r][c]);
      dots[i * R + r] += _mm512_reduce_add_ps(sum);
    }
  }
}

// The same order on AVX2, fp32 or bf16 weights widened 8 values at a time, a sum per 8 values of a line.
template <int W, int R, typename T>
__attribute__((target("avx2,fma"))) void blockAvx2Sequential(const T* const* w, const void* left, int64_t K,
                                                             int64_t ldx, int64_t row_bytes, float* dots) {
  static_assert(R <= kMaxSequentialRows, "each left row keeps a line's accumulators in registers");
  const float* x = static_cast<const float*>(left);
  constexpr int kSteps = stepsPerLine<T, 8>();
  const int64_t ahead = W * row_bytes;
  for (int i = 0; i < W; ++i) {
    __m256 acc[R][kSteps];
#pragma GCC unroll 8
    for (int a = 0; a < R * kSteps; ++a) acc[a / kSteps][a % kSteps] = _mm256_setzero_ps();
    const T* row = w[i];
    int64_t k = 0;
    for (; k + 8 * kSteps <= K; k += 8 * kSteps) {
      _mm_prefetch(reinterpret_cast<const char*>(row + k) + ahead, _MM_HINT_T0);
#pragma GCC unroll 4
      for (int s = 0; s < kSteps; ++s) {
        const __m256 v = load8(row + k + 8 * s);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          acc[r][s] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + r * ldx + k + 8 * s), acc[r][s]);
        }
      }
    }
    for (; k + 8 <= K; k += 8) {
      const __m256 v = load8(row + k);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + r * ldx + k), acc[r][0]);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      __m256 sum = acc[r][0];
#pragma GCC unroll 4
      for (int s = 1; s < kSteps; ++s) sum = _mm256_add_ps(sum, acc[r][s]);
      dots[i * R + r] += horizontalSum(sum);
    }
    scalarTail<1, R>(w + i, x, K, ldx, k, dots + i * R);
  }
}

// The same order on AVX-512 for one row of fp32 (or bf16 widened 16 at a time, where K is not a multiple
// of 32): one fp32 row 50 -> 61 GB/s from memory on 2 Zen 5 cores (both orders in one process); two rows
// lost 3% (53 -> 51), so they keep the interleaved order.
template <int W, int R, typename T>
__attribute__((target("avx512f"))) void blockAvx512Sequential(const T* const* w, const void* left, int64_t K,
                                                              int64_t ldx, int64_t row_bytes, float* dots) {
  const float* x = static_cast<const float*>(left);
  constexpr int kSteps = 4;  // 16 values a step, each into its own sum
  constexpr int kStepsPerLine = kLine / (16 * static_cast<int>(sizeof(T)));
  const int64_t ahead = W * row_bytes;
  for (int i = 0; i < W; ++i) {
    __m512 acc[R][kSteps];
#pragma GCC unroll 8
    for (int a = 0; a < R * kSteps; ++a) acc[a / kSteps][a % kSteps] = _mm512_setzero_ps();
    const T* row = w[i];
    int64_t k = 0;
    for (; k + 16 * kSteps <= K; k += 16 * kSteps) {
#pragma GCC unroll 4
      for (int s = 0; s < kSteps; ++s) {
        if (s % kStepsPerLine == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(row + k + 16 * s) + ahead, _MM_HINT_T0);
        }
        const __m512 v = load16(row + k + 16 * s);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          acc[r][s] = _mm512_fmadd_ps(v, _mm512_loadu_ps(x + r * ldx + k + 16 * s), acc[r][s]);
        }
      }
    }
    for (; k + 16 <= K; k += 16) {
      const __m512 v = load16(row + k);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(v, _mm512_loadu_ps(x + r * ldx + k), acc[r][0]);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      __m512 sum = acc[r][0];
#pragma GCC unroll 4
      for (int s = 1; s < kSteps; ++s) sum = _mm512_add_ps(sum, acc[r][s]);
      dots[i * R + r] += _mm512_reduce_add_ps(sum);
    }
    scalarTail<1, R>(w + i, x, K, ldx, k, dots + i * R);
  }
}

// A block of weight rows against the left rows [0, first_rows), then (if `rest`) against the others.
template <typename T>
struct Block {
  // (weight rows, left rows, values of each, left values between rows, weight bytes between rows, dots)
  using Fn = void (*)(const T* const*, const void*, int64_t, int64_t, int64_t, float*);
  Fn first = nullptr;
  Fn rest = nullptr;
  int first_rows = 0;
  int weight_rows = 0;
};

// How the left rows are handed to the block functions.
enum class LeftRows {
  kWidened,         // fp32, as they are
  kBf16,            // bf16 as they are, for the AVX512-BF16 pair products
  kWidenedEvenOdd,  // fp32, each 32 values as their 16 even ones then their 16 odd ones
};

template <typename T, int R>
Block<T> blockFor(SimdLevel level, LeftRows layout) {
  constexpr int W512 = avx512WeightRows(R);
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (layout == LeftRows::kBf16) {
      if constexpr (R <= kMaxSequentialRows) return {&blockBf16Sequential<W512, R>, nullptr, R, W512};
      return {&blockBf16Pairs<W512, R>, nullptr, R, W512};
    }
    if (layout == LeftRows::kWidenedEvenOdd) return {&blockAvx512EvenOdd<W512, R>, nullptr, R, W512};
  }
  if constexpr (R == 1) {
    if (level >= SimdLevel::kAvx512) return {&blockAvx512Sequential<W512, R, T>, nullptr, R, W512};
  }
  if (level >= SimdLevel::kAvx512) return {&blockAvx512<W512, R, T>, nullptr, R, W512};
  if constexpr (R <= kMaxSequentialRows) {
    return {&blockAvx2Sequential<avx2WeightRows(R), R, T>, nullptr, R, avx2WeightRows(R)};
  }
  if constexpr (R > kAvx2PassRows) {
    constexpr int W = avx2WeightRows(kAvx2PassRows);
    return {&blockAvx2<W, kAvx2PassRows, T>, &blockAvx2<W, R - kAvx2PassRows, T, false>, kAvx2PassRows, W};
  }
  return {&blockAvx2<avx2WeightRows(R), R, T>, nullptr, R, avx2WeightRows(R)};
}

template <typename T, std::size_t... Rs>
Block<T> blockForRows(int rows, SimdLevel level, LeftRows layout, std::index_sequence<Rs...>) {
  Block<T> chosen;
  ((rows == static_cast<int>(Rs) + 1 ? (chosen = blockFor<T, static_cast<int>(Rs) + 1>(level, layout), 0) : 0), ...);
  return chosen;
}

// Left-row bytes that stay in L1 (48 KiB on Golden Cove and Zen 5) beside the weight lines streaming
// through it. Longer rows are taken a chunk of K at a time, every weight row of a group through one
// chunk before the next. 8 fp32 rows of K = 2048 (64 KiB) were re-read from L2 for every block of
// weight rows: 8 rows against 96 weight rows of 2048 in L2, on one Zen 5 core, 32 -> 25 us.
constexpr int64_t kOnePassLeftBytes = int64_t{32} << 10;
// Chunks of half that leave the streamed weight lines and their prefetched successors room in L1: with
// the weight from memory (1.2 GB of [768, 2048] weights, one Zen 5 core, 8 fp32 rows) against one row,
// 1.33x -> 1.20x; 16 KiB also beat 8, 12 and 24. Rows up to kOnePassLeftBytes stay in one pass: [8, 768]
// fp32 split 16 + 8 KiB took 1.20x one row's time against 1.08x whole.
constexpr int64_t kLeftChunkBytes = int64_t{16} << 10;
// Weight rows whose partial dots are kept between chunks: a multiple of every block's weight rows.
constexpr int64_t kGroupRows = 48;

// Values of K a pass takes at once: all of them, or a multiple of 64 (the bf16 kernels step 32 at a time).
int64_t chunkLength(int64_t M, int64_t K, int64_t value_bytes) {
  if (M * K * value_bytes <= kOnePassLeftBytes) return K;
  return std::max<int64_t>(64, kLeftChunkBytes / (M * value_bytes) / 64 * 64);
}

// Weight rows [begin, end) against every left row (K values of value_bytes each); a short last block
// repeats its last row.
template <typename T>
void weightRows(const Block<T>& block, const T* weight, const void* x, int64_t value_bytes, const T* bias,
                int64_t M, int64_t K, int64_t N, T* out, int64_t begin, int64_t end) {
  float sums[kGroupRows * kMaxLeftRows];  // [weight row of the group][left row]
  float dots[4 * kMaxLeftRows];
  const T* rows[4];
  const int W = block.weight_rows, first = block.first_rows;
  const int64_t chunk = chunkLength(M, K, value_bytes), row_bytes = K * static_cast<int64_t>(sizeof(T));
  // Pass p's dots are [weight row][left row of the pass], the second pass's after the first's.
  auto dot = [&](int64_t i, int64_t r) {
    return r < first ? dots[i * first + r] : dots[W * first + i * (M - first) + r - first];
  };
  for (int64_t group = begin; group < end; group += kGroupRows) {
    const int64_t group_end = std::min(end, group + kGroupRows);
    std::fill(sums, sums + kGroupRows * M, 0.f);  // a short last block writes past group_end
    for (int64_t k0 = 0; k0 < K; k0 += chunk) {
      const char* left = static_cast<const char*>(x) + k0 * value_bytes;
      // Only AVX2's passes have a rest.
      const char* rest = left + first * K * value_bytes;
      const int64_t length = std::min(chunk, K - k0);
      for (int64_t n = group; n < group_end; n += W) {
        const int64_t count = std::min<int64_t>(W, group_end - n);
        for (int i = 0; i < W; ++i) rows[i] = weight + (n + std::min<int64_t>(i, count - 1)) * K + k0;
        if (!block.rest) {  // one pass: its dots are the group's, [weight row][left row]
          block.first(rows, left, length, K, row_bytes, sums + (n - group) * M);
          continue;
        }
        std::fill(dots, dots + W * M, 0.f);
        block.first(rows, left, length, K, row_bytes, dots);
        block.rest(rows, rest, length, K, row_bytes, dots + W * first);
        for (int64_t i = 0; i < count; ++i) {
          for (int64_t r = 0; r < M; ++r) sums[(n - group + i) * M + r] += dot(i, r);
        }
      }
    }
    for (int64_t n = group; n < group_end; ++n) {
      const float b = bias ? static_cast<float>(bias[n]) : 0.f;
      for (int64_t r = 0; r < M; ++r) out[r * N + n] = static_cast<T>(sums[(n - group) * M + r] + b);
    }
  }
}

template <typename T>
void streamWeight(const T* left, int64_t left_stride, int64_t M, const T* weight, const T* bias, T* out, int64_t N,
                  int64_t K) {
  const SimdLevel level = simdLevel();
  LeftRows layout = LeftRows::kWidened;
  if (std::is_same_v<T, c10::BFloat16> && level >= SimdLevel::kAvx512 && K % 32 == 0) {
    layout = level >= SimdLevel::kAvx512Bf16 ? LeftRows::kBf16 : LeftRows::kWidenedEvenOdd;
  }
  const Block<T> block =
      blockForRows<T>(static_cast<int>(M), level, layout, std::make_index_sequence<kMaxLeftRows>{});
  // Left rows packed once (at most 8 x K values; long ones are read a chunk at a time, above).
  std::vector<T> packed;
  std::vector<float> widened;
  const void* x = nullptr;
  const int64_t value_bytes = layout == LeftRows::kBf16 ? sizeof(T) : sizeof(float);
  if (layout == LeftRows::kBf16) {
    packed.resize(M * K);
    for (int64_t m = 0; m < M; ++m) std::copy(left + m * left_stride, left + m * left_stride + K, &packed[m * K]);
    x = packed.data();
  } else {
    widened.resize(M * K);
    for (int64_t m = 0; m < M; ++m) {
      const T* row = left + m * left_stride;
      float* to = &widened[m * K];
      if (layout == LeftRows::kWidenedEvenOdd) {
        for (int64_t k = 0; k < K; k += 32) {
          for (int j = 0; j < 16; ++j) {
            to[k + j] = static_cast<float>(row[k + 2 * j]);
            to[k + 16 + j] = static_cast<float>(row[k + 2 * j + 1]);
          }
        }
      } else {
        for (int64_t k = 0; k < K; ++k) to[k] = static_cast<float>(row[k]);
      }
    }
    x = widened.data();
  }
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_rows = std::max<int64_t>(16, (int64_t{64} << 10) / (static_cast<int64_t>(sizeof(T)) * K));
  parallelRows(N, min_rows, [&](int64_t begin, int64_t end) {
    weightRows(block, weight, x, value_bytes, bias, M, K, N, out, begin, end);
  });
}

}  // namespace

bool hasFewRowsGemm() { return simdLevel() >= SimdLevel::kAvx2; }

void fewRowsTimesWeight(const float* left, int64_t left_stride, int64_t M, const float* weight, const float* bias,
                        float* out, int64_t N, int64_t K) {
  streamWeight(left, left_stride, M, weight, bias, out, N, K);
}

void fewRowsTimesWeight(const c10::BFloat16* left, int64_t left_stride, int64_t M, const c10::BFloat16* weight,
                        const c10::BFloat16* bias, c10::BFloat16* out, int64_t N, int64_t K) {
  streamWeight(left, left_stride, M, weight, bias, out, N, K);
}

}  // namespace torch_neuronx
