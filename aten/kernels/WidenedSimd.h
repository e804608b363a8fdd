// Vector loops over fp32 or bf16 data, widened to fp32 and accumulated in
// fp32, with the widest SIMD the CPU has (AVX-512, AVX2, else scalar). The
// bandwidth-bound decode kernels (one-row products, decode attention) spend
// their time here.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

#include "runtime/SimdLevel.h"

namespace torch_neuronx {

// sum over i < n of x[i] * y[i]
float dotWidened(const c10::BFloat16* x, const float* y, int64_t n);
float dotWidened(const float* x, const float* y, int64_t n);
// Both in bf16: with AVX512-BF16, pairs of exact products summed into fp32
// lanes by one instruction (denormals flushed, as the hardware does).
float dotWidened(const c10::BFloat16* x, const c10::BFloat16* y, int64_t n);

// The SIMD level of the device's loops: runtime/SimdLevel.h.
using nrt::SimdLevel;
using nrt::simdLevel;

// y[i] += alpha * x[i] for i < n
void axpyWidened(float alpha, const c10::BFloat16* x, float* y, int64_t n);
void axpyWidened(float alpha, const float* x, float* y, int64_t n);

}  // namespace torch_neuronx
