// The host SIMD level the emulated engines' loops use (the device's own
// kernels in aten/kernels, the NKI executor): the widest the CPU has, or a
// lower one named by TORCH_NEURONX_SIMD (scalar, avx2, avx512, avx512bf16,
// amx), so that tests and benchmarks reach the loops other CPUs run
// (avx2: AMD Zen 3; avx512bf16: Zen 4/5; amx: Xeon from Sapphire Rapids).
#pragma once

namespace nrt {

// kAmx: AVX512-BF16 and the AMX tile unit, whose state the OS granted this process.
enum class SimdLevel { kScalar, kAvx2, kAvx512, kAvx512Bf16, kAmx };

// Throws std::invalid_argument for an unknown TORCH_NEURONX_SIMD.
SimdLevel simdLevel();

}  // namespace nrt
