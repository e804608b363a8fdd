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
// has 32, AVX2 16); dots[i * R + r] = dot(weight row i, left row r).
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

// Prefetches the next block of weight rows (the W rows after these) at the place this block reads
// its own: at 4-8 left rows the product runs compute-bound stretches during which the hardware
// prefetchers alone fall behind the memory (8 fp32 rows on AVX-512: 67 -> 53 ms over 1.2 GB).
template <int W, int kStepBytes>
class NextBlock {
 public:
  NextBlock(const void* first_row, int64_t row_bytes)
      : next_(static_cast<const char*>(first_row) + W * row_bytes), row_bytes_(row_bytes) {}
  void step() {
    // Once per cache line: a prefetch per step of 16 or 32 bytes took load slots from the product
    // (8 bf16 rows on AVX2 against a weight in cache: 60 -> 95 GFLOP/s on one core).
    if (kStepBytes >= kLine || (reinterpret_cast<uintptr_t>(next_) & (kLine - 1)) < kStepBytes) {
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) _mm_prefetch(next_ + i * row_bytes_, _MM_HINT_T0);
    }
    next_ += kStepBytes;
  }

 private:
  static constexpr uintptr_t kLine = 64;
  const char* next_;
  int64_t row_bytes_;
};

template <int W, int R, typename T>
void scalarTail(const T* const* w, const float* x, int64_t K, int64_t k, float* dots) {
  for (int i = 0; i < W; ++i) {
    for (int r = 0; r < R; ++r) {
      for (int64_t j = k; j < K; ++j) dots[i * R + r] += static_cast<float>(w[i][j]) * x[r * K + j];
    }
  }
}

template <int W, int R, typename T>
__attribute__((target("avx512f"))) void blockAvx512(const T* const* w, const void* left, int64_t K, float* dots) {
  const float* x = static_cast<const float*>(left);
  __m512 acc[W][R];
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm512_setzero_ps();
  int64_t k = 0;
  NextBlock<W, 16 * sizeof(T)> next(w[0], K * sizeof(T));
  for (; k + 16 <= K; k += 16) {
    next.step();
    __m512 v[W];
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) v[i] = load16(w[i] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_loadu_ps(x + r * K + k);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_fmadd_ps(v[i], xr, acc[i][r]);
    }
  }
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) dots[a] = _mm512_reduce_add_ps(acc[a / R][a % R]);
  scalarTail<W, R>(w, x, K, k, dots);
}

template <int W, int R, typename T>
__attribute__((target("avx2,fma"))) void blockAvx2(const T* const* w, const void* left, int64_t K, float* dots) {
  const float* x = static_cast<const float*>(left);
  __m256 acc[W][R];
#pragma GCC unroll 16
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm256_setzero_ps();
  int64_t k = 0;
  NextBlock<W, 8 * sizeof(T)> next(w[0], K * sizeof(T));
  for (; k + 8 <= K; k += 8) {
    next.step();
    __m256 v[W];
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) v[i] = load8(w[i] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xr = _mm256_loadu_ps(x + r * K + k);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm256_fmadd_ps(v[i], xr, acc[i][r]);
    }
  }
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) dots[a] = horizontalSum(acc[a / R][a % R]);
  scalarTail<W, R>(w, x, K, k, dots);
}

// bf16 weights and bf16 left rows with AVX512-BF16: 32 exact products summed
// into the fp32 lanes per instruction. The left
// rows stay bf16 (half the bytes to load); K must be a multiple of 32.
template <int W, int R>
__attribute__((target("avx512f,avx512bf16"))) void blockBf16Pairs(const c10::BFloat16* const* w, const void* left,
                                                                  int64_t K, float* dots) {
  const c10::BFloat16* x = static_cast<const c10::BFloat16*>(left);
  __m512 acc[W][R];
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) acc[a / R][a % R] = _mm512_setzero_ps();
  NextBlock<W, 64> next(w[0], K * 2);
  for (int64_t k = 0; k < K; k += 32) {
    next.step();
    __m512bh v[W];
#pragma GCC unroll 4
    for (int i = 0; i < W; ++i) v[i] = (__m512bh)_mm512_loadu_si512(w[i] + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh xr = (__m512bh)_mm512_loadu_si512(x + r * K + k);
#pragma GCC unroll 4
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], v[i], xr);
    }
  }
#pragma GCC unroll 32
  for (int a = 0; a < W * R; ++a) dots[a] = _mm512_reduce_add_ps(acc[a / R][a % R]);
}

// A block of weight rows against the left rows [0, first_rows), then (if `rest`) against the others.
template <typename T>
struct Block {
  using Fn = void (*)(const T* const*, const void*, int64_t, float*);
  Fn first = nullptr;
  Fn rest = nullptr;
  int first_rows = 0;
  int weight_rows = 0;
};

template <typename T, int R>
Block<T> blockFor(SimdLevel level, bool bf16_pairs) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (bf16_pairs) return {&blockBf16Pairs<avx512WeightRows(R), R>, nullptr, R, avx512WeightRows(R)};
  }
  if (level >= SimdLevel::kAvx512) return {&blockAvx512<avx512WeightRows(R), R, T>, nullptr, R, avx512WeightRows(R)};
  if constexpr (R > kAvx2PassRows) {
    constexpr int W = avx2WeightRows(kAvx2PassRows);
    return {&blockAvx2<W, kAvx2PassRows, T>, &blockAvx2<W, R - kAvx2PassRows, T>, kAvx2PassRows, W};
  }
  return {&blockAvx2<avx2WeightRows(R), R, T>, nullptr, R, avx2WeightRows(R)};
}

template <typename T, std::size_t... Rs>
Block<T> blockForRows(int rows, SimdLevel level, bool bf16_pairs, std::index_sequence<Rs...>) {
  Block<T> chosen;
  ((rows == static_cast<int>(Rs) + 1 ? (chosen = blockFor<T, static_cast<int>(Rs) + 1>(level, bf16_pairs), 0) : 0),
   ...);
  return chosen;
}

// Weight rows [begin, end) against every left row; a short last block repeats its last row.
template <typename T>
void weightRows(const Block<T>& block, const T* weight, const void* x, const T* bias, int64_t M, int64_t K,
                int64_t N, T* out, int64_t begin, int64_t end) {
  float dots[4 * kMaxLeftRows];
  const T* rows[4];
  const int W = block.weight_rows, first = block.first_rows;
  // Only AVX2's passes have a rest, and their left rows are fp32.
  const float* rest_rows = static_cast<const float*>(x) + first * K;
  // Pass p's dots are [weight row][left row of the pass], the second pass's after the first's.
  auto dot = [&](int64_t i, int64_t r) { return r < first ? dots[i * first + r] : dots[W * first + i * (M - first) + r - first]; };
  for (int64_t n = begin; n < end; n += W) {
    const int64_t count = std::min<int64_t>(W, end - n);
    for (int i = 0; i < W; ++i) rows[i] = weight + (n + std::min<int64_t>(i, count - 1)) * K;
    std::fill(dots, dots + W * M, 0.f);
    block.first(rows, x, K, dots);
    if (block.rest) block.rest(rows, rest_rows, K, dots + W * first);
    for (int64_t i = 0; i < count; ++i) {
      const float b = bias ? static_cast<float>(bias[n + i]) : 0.f;
      for (int64_t r = 0; r < M; ++r) out[r * N + n + i] = static_cast<T>(dot(i, r) + b);
    }
  }
}

template <typename T>
void streamWeight(const T* left, int64_t left_stride, int64_t M, const T* weight, const T* bias, T* out, int64_t N,
                  int64_t K) {
  const SimdLevel level = simdLevel();
  const bool bf16_pairs = std::is_same_v<T, c10::BFloat16> && level >= SimdLevel::kAvx512Bf16 && K % 32 == 0;
  const Block<T> block =
      blockForRows<T>(static_cast<int>(M), level, bf16_pairs, std::make_index_sequence<kMaxLeftRows>{});
  // Left rows packed once (a few KiB, cache-resident for the whole product):
  // bf16 as they are for the pair products, else widened to fp32.
  std::vector<T> packed;
  std::vector<float> widened;
  const void* x = nullptr;
  if (bf16_pairs) {
    packed.resize(M * K);
    for (int64_t m = 0; m < M; ++m) std::copy(left + m * left_stride, left + m * left_stride + K, &packed[m * K]);
    x = packed.data();
  } else {
    widened.resize(M * K);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) widened[m * K + k] = static_cast<float>(left[m * left_stride + k]);
    }
    x = widened.data();
  }
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_rows = std::max<int64_t>(16, (int64_t{64} << 10) / (static_cast<int64_t>(sizeof(T)) * K));
  parallelRows(N, min_rows, [&](int64_t begin, int64_t end) {
    weightRows(block, weight, x, bias, M, K, N, out, begin, end);
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
