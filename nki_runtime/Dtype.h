// The element types of NeuronCore memory and their conversions to and from
// fp32, in which the engines compute (the Tensor engine accumulates in fp32;
// the Vector and Scalar engines compute in fp32 whatever they load).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nki {

enum class Dtype : uint8_t {
  kFloat32,
  kBFloat16,
  kFloat16,
  kTFloat32,     // stored in 32 bits, 10 mantissa bits kept
  kFloat8E4M3,   // the "fn" variant: no infinities, largest 448
  kFloat8E5M2,
  kInt8,
  kInt16,
  kInt32,
  kUInt8,
  kUInt16,
  kUInt32,
  kBool,         // one byte, 0 or 1
  // Microscaling (OCP MX) data, four values packed in one element: only DMA and tensor_copy move them (as
  // bits), quantize_mx writes them and nc_matmul_mx reads them (Microscaling.h).
  kFloat8E5M2x4,  // four float8_e5m2 in 32 bits, value j in byte j
  kFloat8E4M3x4,  // four float8_e4m3fn in 32 bits
  kFloat4E2M1x4,  // four float4_e2m1fn in 16 bits, value j in bits 4j..4j+3
  // 64-bit integers (nl.int64, SDK 2.33+): moved by DMA and read into the sequencers' scalars
  // (nisa.scalar_load); no compute engine takes them.
  kInt64,
};

std::size_t byteSize(Dtype dtype);
bool isFloat(Dtype dtype);  // false for the packed MX types: no engine computes on them as they are
bool isPacked(Dtype dtype);
std::string_view name(Dtype dtype);

// Rounds to nearest even; integers saturate (NaN becomes 0), as the engines' output stage does.
float toFloat(const void* element, Dtype dtype);
void fromFloat(float value, void* element, Dtype dtype);

// Strided runs of elements: the executor's inner loops.
void loadRow(const char* base, int64_t stride_bytes, int64_t count, Dtype dtype, float* out);
void storeRow(const float* values, int64_t count, char* base, int64_t stride_bytes, Dtype dtype);

// What a fresh on-chip buffer holds before anything writes it: NaN for
// floats, so a read before a write shows in the result.
void fillSentinel(char* base, std::size_t bytes, Dtype dtype);

}  // namespace nki
