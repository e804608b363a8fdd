// Vector loops over fp32 or bf16 data, widened to fp32 and accumulated in
// fp32, with the widest SIMD the CPU has (AVX-512, AVX2, else scalar). The
// bandwidth-bound decode kernels (one-row products, decode attention) spend
// their time here.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace torch_neuronx {

// sum over i < n of x[i] * y[i]
float dotWidened(const c10::BFloat16* x, const float* y, int64_t n);
float dotWidened(const float* x, const float* y, int64_t n);
// Both in bf16: with AVX512-BF16, pairs of exact products summed into fp32
// lanes by one instruction (denormals flushed, as the hardware does).
float dotWidened(const c10::BFloat16* x, const c10::BFloat16* y, int64_t n);

// kAmx: AVX512-BF16 and the AMX tile unit (Intel Xeon from Sapphire Rapids).
enum class SimdLevel { kScalar, kAvx2, kAvx512, kAvx512Bf16, kAmx };

// The widest SIMD the CPU has, or a lower one named by TORCH_NEURONX_SIMD
// (scalar, avx2, avx512, avx512bf16, amx): tests and benchmarks use it to run
// other CPUs' loops (avx2: AMD Zen 3; avx512bf16: Zen 4/5; amx: Xeon).
SimdLevel simdLevel();

// y[i] += alpha * x[i] for i < n
void axpyWidened(float alpha, const c10::BFloat16* x, float* y, int64_t n);
void axpyWidened(float alpha, const float* x, float* y, int64_t n);

}  // namespace torch_neuronx
