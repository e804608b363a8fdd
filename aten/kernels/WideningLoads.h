// Vector loads that widen to fp32: 16 lanes (AVX-512) or 8 (AVX2) of fp32 or
// bf16. For kernel sources only; each function carries its own target, so
// callers compiled for another baseline pick them by runtime dispatch.
#pragma once

#include <c10/util/BFloat16.h>
#include <immintrin.h>

namespace torch_neuronx::widening {

// bf16 is the top half of an fp32: widening is a 16-bit shift.
__attribute__((target("avx512f"))) inline __m512 load16(const c10::BFloat16* p) {
  __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}
__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

__attribute__((target("avx2"))) inline __m256 load8(const c10::BFloat16* p) {
  __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}
__attribute__((target("avx2"))) inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

}  // namespace torch_neuronx::widening
