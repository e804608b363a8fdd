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

// AVX2 widens with one byte shuffle of the 8 values loaded into both 128-bit lanes: the shuffle runs
// beside the multiply-adds, where a zero-extension and a shift would take a multiply-add port (8 bf16
// rows against a weight in cache on a Xeon: 81 -> 95 GFLOP/s on one core).
__attribute__((target("avx2"))) inline __m256 load8(const c10::BFloat16* p) {
  const __m256i into_high_halves = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,    //
                                                    -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_shuffle_epi8(both, into_high_halves));
}
__attribute__((target("avx2"))) inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

}  // namespace torch_neuronx::widening
