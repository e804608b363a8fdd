#include "nki_runtime/Fp8Rows.h"

#include <immintrin.h>

#include <bit>

#include "runtime/SimdLevel.h"

namespace nki {
namespace {

// As Dtype.cpp's encodeSmallFloat, per lane: NaN to the format's NaN; past max_finite to infinity (or
// max_finite without one); below the smallest normal to whole units, rounded to nearest even; else the
// mantissa rounded to nearest even and the exponent rebiased.
template <int kExponentBits, int kMantissaBits, bool kHasInfinity>
__attribute__((target("avx512f,avx512bw"))) void encode(const float* values, int64_t count, uint8_t* out,
                                                       float max_finite) {
  constexpr int kTotal = 1 + kExponentBits + kMantissaBits;
  constexpr int kBias = (1 << (kExponentBits - 1)) - 1;
  constexpr int kDropped = 23 - kMantissaBits;
  constexpr uint32_t kTopExponent = (1u << kExponentBits) - 1;
  constexpr uint32_t kSmallestNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  constexpr uint32_t kNan = kHasInfinity ? (kTopExponent << kMantissaBits) | 1u : (1u << (kTotal - 1)) - 1;
  const __m512i magnitude_bits = _mm512_set1_epi32(0x7fffffff), infinity_bits = _mm512_set1_epi32(0x7f800000);
  const __m512i largest = _mm512_set1_epi32(std::bit_cast<int>(max_finite));
  const __m512i smallest_normal = _mm512_set1_epi32(static_cast<int>(kSmallestNormal));
  const __m512i half_minus_one = _mm512_set1_epi32((1 << (kDropped - 1)) - 1), one = _mm512_set1_epi32(1);
  const __m512i rebias = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(127 - kBias) << kMantissaBits));
  const __m512 units_per_value =
      _mm512_castsi512_ps(_mm512_set1_epi32((127 + kBias - 1 + kMantissaBits) << 23));
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = count - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count - i)) - 1);
    const __m512i bits = _mm512_maskz_loadu_epi32(lanes, values + i);
    const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(bits, 31), kTotal - 1);
    __m512i magnitude = _mm512_and_si512(bits, magnitude_bits);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, infinity_bits);
    const __mmask16 over = _mm512_cmpgt_epu32_mask(magnitude, largest);
    if (!kHasInfinity) magnitude = _mm512_mask_mov_epi32(magnitude, over, largest);
    const __mmask16 subnormal = _mm512_cmplt_epu32_mask(magnitude, smallest_normal);
    const __m512i rounded = _mm512_add_epi32(
        _mm512_add_epi32(magnitude, half_minus_one), _mm512_and_si512(_mm512_srli_epi32(magnitude, kDropped), one));
    __m512i code = _mm512_sub_epi32(_mm512_srli_epi32(rounded, kDropped), rebias);
    // cvtps rounds as MXCSR says: nearest even, as std::nearbyint does.
    const __m512i units = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(magnitude), units_per_value));
    code = _mm512_mask_mov_epi32(code, subnormal, units);
    if (kHasInfinity) code = _mm512_mask_mov_epi32(code, over, _mm512_set1_epi32(kTopExponent << kMantissaBits));
    code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(static_cast<int>(kNan)));
    _mm512_mask_cvtepi32_storeu_epi8(out + i, lanes, _mm512_or_si512(code, sign));
  }
}

}  // namespace

bool storeFp8Row(const float* values, int64_t count, uint8_t* out, Dtype type) {
  if (nrt::simdLevel() < nrt::SimdLevel::kAvx512) return false;
  if (type == Dtype::kFloat8E4M3) {
    encode<4, 3, false>(values, count, out, 448.f);
    return true;
  }
  if (type == Dtype::kFloat8E5M2) {
    encode<5, 2, true>(values, count, out, 57344.f);
    return true;
  }
  return false;
}

}  // namespace nki
