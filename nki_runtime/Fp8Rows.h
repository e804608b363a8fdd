// Rows of fp32 values stored as fp8 (float8_e4m3fn, float8_e5m2) sixteen at a time with AVX-512: the
// rounding of Dtype.cpp's one-value encoder (nearest even; e4m3fn saturates at 448, e5m2 overflows to
// infinity; NaN kept), which the DMA stores and nisa.quantize_mx spend most of their time in.
#pragma once

#include <cstdint>

#include "nki_runtime/Dtype.h"

namespace nki {

// Writes count codes of `type` (kFloat8E4M3 or kFloat8E5M2) to out, one byte each; false (nothing
// written) when the CPU's SIMD level is below AVX-512 or the type is another.
bool storeFp8Row(const float* values, int64_t count, uint8_t* out, Dtype type);

}  // namespace nki
