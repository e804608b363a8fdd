#include "aten/kernels/RowSelect.h"

#include <cmath>

#include "runtime/SimdLevel.h"

namespace torch_neuronx {
namespace {

// Blocks of a fixed length: at -O2 the compiler vectorises only loops whose trip count the vector
// width divides, and the loads are unconditional so that the selects need no masked loads.
constexpr int64_t kSelectBlock = 64;
constexpr int64_t kLanes = 64;  // four vectors of AVX-512: the maxima's dependency chains overlap

template <typename Bits>
__attribute__((always_inline)) inline void selectBody(const bool* mask, const Bits* values, Bits fill,
                                                      bool fill_where_true, Bits* out, int64_t n) {
  const auto* m = reinterpret_cast<const uint8_t*>(mask);
  const uint8_t fill_when = fill_where_true ? 1 : 0;
  int64_t j = 0;
  for (; j + kSelectBlock <= n; j += kSelectBlock) {
    for (int64_t l = 0; l < kSelectBlock; ++l) {
      const Bits v = values[j + l];
      out[j + l] = m[j + l] == fill_when ? fill : v;
    }
  }
  for (; j < n; ++j) out[j] = m[j] == fill_when ? fill : values[j];
}

// The first element that is NaN (kNan) or equals top, found a block at a time.
template <bool kNan, typename T>
__attribute__((always_inline)) inline int64_t firstMatch(const T* v, int64_t n, float top) {
  const auto matches = [top](float x) { return kNan ? x != x : x == top; };
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t j = 0; j < whole; j += kLanes) {
    int32_t hit = 0;
    for (int64_t l = 0; l < kLanes; ++l) hit |= matches(static_cast<float>(v[j + l]));
    if (!hit) continue;
    for (int64_t l = 0; l < kLanes; ++l) {
      if (matches(static_cast<float>(v[j + l]))) return j + l;
    }
  }
  for (int64_t j = whole; j < n; ++j) {
    if (matches(static_cast<float>(v[j]))) return j;
  }
  return 0;  // not reached: some element equals the maximum or is NaN
}

template <typename T>
__attribute__((always_inline)) inline int64_t argmaxBody(const T* v, int64_t n) {
  float best[kLanes];
  int32_t nan[kLanes] = {};
  for (int64_t l = 0; l < kLanes; ++l) best[l] = -INFINITY;
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t j = 0; j < whole; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float x = static_cast<float>(v[j + l]);
      best[l] = x > best[l] ? x : best[l];
      nan[l] |= x != x;
    }
  }
  float top = -INFINITY;
  bool any_nan = false;
  for (int64_t l = 0; l < kLanes; ++l) {
    top = best[l] > top ? best[l] : top;
    any_nan = any_nan || nan[l] != 0;
  }
  for (int64_t j = whole; j < n; ++j) {
    const float x = static_cast<float>(v[j]);
    top = x > top ? x : top;
    any_nan = any_nan || x != x;
  }
  return any_nan ? firstMatch<true>(v, n, top) : firstMatch<false>(v, n, top);
}

template <typename Bits>
__attribute__((target("avx512f,avx512bw"))) void selectAvx512(const bool* mask, const Bits* values, Bits fill,
                                                              bool fill_where_true, Bits* out, int64_t n) {
  selectBody(mask, values, fill, fill_where_true, out, n);
}
template <typename Bits>
__attribute__((target("avx2"))) void selectAvx2(const bool* mask, const Bits* values, Bits fill, bool fill_where_true,
                                                Bits* out, int64_t n) {
  selectBody(mask, values, fill, fill_where_true, out, n);
}

template <typename T>
__attribute__((target("avx512f,avx512bw"))) int64_t argmaxAvx512(const T* v, int64_t n) {
  return argmaxBody(v, n);
}
template <typename T>
__attribute__((target("avx2,fma"))) int64_t argmaxAvx2(const T* v, int64_t n) {
  return argmaxBody(v, n);
}

}  // namespace

template <typename Bits>
void selectRow(const bool* mask, const Bits* values, Bits fill, bool fill_where_true, Bits* out, int64_t n) {
  const nrt::SimdLevel level = nrt::simdLevel();
  if (level >= nrt::SimdLevel::kAvx512) return selectAvx512(mask, values, fill, fill_where_true, out, n);
  if (level == nrt::SimdLevel::kAvx2) return selectAvx2(mask, values, fill, fill_where_true, out, n);
  selectBody(mask, values, fill, fill_where_true, out, n);
}

template <typename T>
int64_t argmaxRow(const T* values, int64_t n) {
  const nrt::SimdLevel level = nrt::simdLevel();
  if (level >= nrt::SimdLevel::kAvx512) return argmaxAvx512(values, n);
  if (level == nrt::SimdLevel::kAvx2) return argmaxAvx2(values, n);
  return argmaxBody(values, n);
}

template void selectRow(const bool*, const uint8_t*, uint8_t, bool, uint8_t*, int64_t);
template void selectRow(const bool*, const uint16_t*, uint16_t, bool, uint16_t*, int64_t);
template void selectRow(const bool*, const uint32_t*, uint32_t, bool, uint32_t*, int64_t);
template void selectRow(const bool*, const uint64_t*, uint64_t, bool, uint64_t*, int64_t);
template int64_t argmaxRow(const float*, int64_t);
template int64_t argmaxRow(const c10::BFloat16*, int64_t);
template int64_t argmaxRow(const c10::Half*, int64_t);

}  // namespace torch_neuronx
