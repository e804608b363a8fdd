#include "nki_runtime/Dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "nki_runtime/Fp8Rows.h"

namespace nki {
namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Keeps the top `kept` mantissa bits of an fp32, rounding to nearest even.
float roundMantissa(float value, int kept) {
  if (!std::isfinite(value)) return value;
  const uint32_t bits = bitsOf(value);
  const int dropped = 23 - kept;
  const uint32_t half = (1u << (dropped - 1)) - 1 + ((bits >> dropped) & 1u);
  return floatOf((bits + half) & ~((1u << dropped) - 1));
}

uint16_t toBFloat16(float value) {
  if (std::isnan(value)) return 0x7fc0;
  return static_cast<uint16_t>(bitsOf(roundMantissa(value, 7)) >> 16);
}

// A small float of kExponentBits and kMantissaBits (bias 2^(kExponentBits - 1) - 1), rounded to nearest
// even from the fp32 bits. Past max_finite: infinity, or max_finite where the format has none (the fn
// variants saturate, as the hardware's conversion does).
template <int kExponentBits, int kMantissaBits>
uint32_t encodeSmallFloat(float value, bool has_infinity, float max_finite) {
  constexpr int kTotal = 1 + kExponentBits + kMantissaBits;
  constexpr int kBias = (1 << (kExponentBits - 1)) - 1;
  constexpr int kDropped = 23 - kMantissaBits;
  constexpr uint32_t kTopExponent = (1u << kExponentBits) - 1;
  const uint32_t bits = bitsOf(value);
  const uint32_t sign_bit = (bits >> 31) << (kTotal - 1);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN
    return has_infinity ? (sign_bit | (kTopExponent << kMantissaBits) | 1u) : (sign_bit | ((1u << (kTotal - 1)) - 1));
  }
  if (magnitude > bitsOf(max_finite)) {
    if (has_infinity) return sign_bit | (kTopExponent << kMantissaBits);
    magnitude = bitsOf(max_finite);
  }
  constexpr uint32_t kSmallestNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  if (magnitude < kSmallestNormal) {  // subnormal: whole units of 2^(1 - kBias - kMantissaBits); may round up
    const float units_per_value = floatOf(static_cast<uint32_t>(127 + kBias - 1 + kMantissaBits) << 23);
    return sign_bit | static_cast<uint32_t>(std::nearbyint(floatOf(magnitude) * units_per_value));
  }
  // Round the fp32 mantissa to kMantissaBits (a carry moves into the exponent), then rebias the exponent.
  const uint32_t rounded = magnitude + ((1u << (kDropped - 1)) - 1) + ((magnitude >> kDropped) & 1u);
  return sign_bit | ((rounded >> kDropped) - (static_cast<uint32_t>(127 - kBias) << kMantissaBits));
}

template <int kExponentBits, int kMantissaBits>
float decodeSmallFloat(uint32_t code, bool has_infinity) {
  const int total = 1 + kExponentBits + kMantissaBits;
  const bool negative = (code >> (total - 1)) & 1u;
  const uint32_t exponent = (code >> kMantissaBits) & ((1u << kExponentBits) - 1);
  const uint32_t mantissa = code & ((1u << kMantissaBits) - 1);
  const int bias = (1 << (kExponentBits - 1)) - 1;
  float value;
  if (has_infinity && exponent == (1u << kExponentBits) - 1) {
    value = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (!has_infinity && exponent == (1u << kExponentBits) - 1 && mantissa == (1u << kMantissaBits) - 1) {
    value = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), 1 - bias - kMantissaBits);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + (1u << kMantissaBits)), static_cast<int>(exponent) - bias -
                                                                                   kMantissaBits);
  }
  return negative ? -value : value;
}

// Every fp8 code's value, decoded once: [0] float8_e4m3 (fn), [1] float8_e5m2.
float decodeFp8(uint8_t code, bool e5m2) {
  static const auto kTables = [] {
    std::array<std::array<float, 256>, 2> tables{};
    for (uint32_t c = 0; c < 256; ++c) {
      tables[0][c] = decodeSmallFloat<4, 3>(c, false);
      tables[1][c] = decodeSmallFloat<5, 2>(c, true);
    }
    return tables;
  }();
  return kTables[e5m2 ? 1 : 0][code];
}

uint16_t toFloat16(float value) {
  return static_cast<uint16_t>(encodeSmallFloat<5, 10>(value, true, 65504.f));
}

template <typename Int>
Int saturate(float value) {
  if (std::isnan(value)) return 0;
  const double rounded = std::nearbyint(static_cast<double>(value));
  const double low = static_cast<double>(std::numeric_limits<Int>::min());
  const double high = static_cast<double>(std::numeric_limits<Int>::max());  // 2^63 for int64: one past it
  if (rounded >= high) return std::numeric_limits<Int>::max();
  return static_cast<Int>(std::max(rounded, low));
}

template <typename Int>
float loadInt(const void* element) {
  Int value;
  std::memcpy(&value, element, sizeof(Int));
  return static_cast<float>(value);
}

template <typename Int>
void storeInt(float value, void* element) {
  const Int converted = saturate<Int>(value);
  std::memcpy(element, &converted, sizeof(Int));
}

}  // namespace

std::size_t byteSize(Dtype dtype) {
  switch (dtype) {
    case Dtype::kInt64:
      return 8;
    case Dtype::kFloat32:
    case Dtype::kTFloat32:
    case Dtype::kInt32:
    case Dtype::kUInt32:
    case Dtype::kFloat8E5M2x4:
    case Dtype::kFloat8E4M3x4:
      return 4;
    case Dtype::kFloat4E2M1x4:
    case Dtype::kBFloat16:
    case Dtype::kFloat16:
    case Dtype::kInt16:
    case Dtype::kUInt16:
      return 2;
    default:
      return 1;
  }
}

bool isFloat(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
    case Dtype::kBFloat16:
    case Dtype::kFloat16:
    case Dtype::kTFloat32:
    case Dtype::kFloat8E4M3:
    case Dtype::kFloat8E5M2:
      return true;
    default:
      return false;
  }
}

bool isPacked(Dtype dtype) {
  return dtype == Dtype::kFloat8E5M2x4 || dtype == Dtype::kFloat8E4M3x4 || dtype == Dtype::kFloat4E2M1x4;
}

std::string_view name(Dtype dtype) {
  static constexpr std::string_view kNames[] = {"float32", "bfloat16", "float16", "tfloat32", "float8_e4m3",
                                                 "float8_e5m2", "int8", "int16", "int32", "uint8", "uint16",
                                                 "uint32", "bool", "float8_e5m2_x4", "float8_e4m3fn_x4",
                                                 "float4_e2m1fn_x4", "int64"};
  return kNames[static_cast<int>(dtype)];
}

float toFloat(const void* element, Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
    case Dtype::kTFloat32: {
      float value;
      std::memcpy(&value, element, 4);
      return value;
    }
    case Dtype::kBFloat16: {
      uint16_t half;
      std::memcpy(&half, element, 2);
      return floatOf(static_cast<uint32_t>(half) << 16);
    }
    case Dtype::kFloat16: {
      uint16_t half;
      std::memcpy(&half, element, 2);
      return decodeSmallFloat<5, 10>(half, true);
    }
    case Dtype::kFloat8E4M3:
      return decodeFp8(*static_cast<const uint8_t*>(element), false);
    case Dtype::kFloat8E5M2:
      return decodeFp8(*static_cast<const uint8_t*>(element), true);
    case Dtype::kInt8:
      return loadInt<int8_t>(element);
    case Dtype::kInt16:
      return loadInt<int16_t>(element);
    case Dtype::kInt32:
      return loadInt<int32_t>(element);
    case Dtype::kUInt8:
    case Dtype::kBool:
      return loadInt<uint8_t>(element);
    case Dtype::kUInt16:
      return loadInt<uint16_t>(element);
    case Dtype::kUInt32:
      return loadInt<uint32_t>(element);
    case Dtype::kInt64:
      return loadInt<int64_t>(element);
    case Dtype::kFloat8E5M2x4:  // the verifier lets no instruction read packed values one by one
    case Dtype::kFloat8E4M3x4:
    case Dtype::kFloat4E2M1x4:
      break;
  }
  return std::numeric_limits<float>::quiet_NaN();
}

void fromFloat(float value, void* element, Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      std::memcpy(element, &value, 4);
      return;
    case Dtype::kTFloat32: {
      const float rounded = roundMantissa(value, 10);
      std::memcpy(element, &rounded, 4);
      return;
    }
    case Dtype::kBFloat16: {
      const uint16_t half = toBFloat16(value);
      std::memcpy(element, &half, 2);
      return;
    }
    case Dtype::kFloat16: {
      const uint16_t half = toFloat16(value);
      std::memcpy(element, &half, 2);
      return;
    }
    case Dtype::kFloat8E4M3:
      *static_cast<uint8_t*>(element) = static_cast<uint8_t>(encodeSmallFloat<4, 3>(value, false, 448.f));
      return;
    case Dtype::kFloat8E5M2:
      *static_cast<uint8_t*>(element) = static_cast<uint8_t>(encodeSmallFloat<5, 2>(value, true, 57344.f));
      return;
    case Dtype::kInt8:
      return storeInt<int8_t>(value, element);
    case Dtype::kInt16:
      return storeInt<int16_t>(value, element);
    case Dtype::kInt32:
      return storeInt<int32_t>(value, element);
    case Dtype::kUInt8:
      return storeInt<uint8_t>(value, element);
    case Dtype::kUInt16:
      return storeInt<uint16_t>(value, element);
    case Dtype::kUInt32:
      return storeInt<uint32_t>(value, element);
    case Dtype::kInt64:
      return storeInt<int64_t>(value, element);
    case Dtype::kBool:
      *static_cast<uint8_t*>(element) = (value != 0.f && !std::isnan(value)) ? 1 : 0;
      return;
    case Dtype::kFloat8E5M2x4:  // written only by quantize_mx (Microscaling.cpp)
    case Dtype::kFloat8E4M3x4:
    case Dtype::kFloat4E2M1x4:
      return;
  }
}

void loadRow(const char* base, int64_t stride_bytes, int64_t count, Dtype dtype, float* out) {
  if (stride_bytes == 0) {  // one element broadcast along the row
    std::fill(out, out + count, toFloat(base, dtype));
    return;
  }
  // The two common cases get loops the compiler vectorises.
  if (dtype == Dtype::kFloat32 && stride_bytes == 4) {
    std::memcpy(out, base, count * 4);
    return;
  }
  if (dtype == Dtype::kBFloat16 && stride_bytes == 2) {
    const auto* halves = reinterpret_cast<const uint16_t*>(base);
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t bits = static_cast<uint32_t>(halves[i]) << 16;
      std::memcpy(out + i, &bits, 4);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = toFloat(base + i * stride_bytes, dtype);
}

void storeRow(const float* values, int64_t count, char* base, int64_t stride_bytes, Dtype dtype) {
  if (dtype == Dtype::kFloat32 && stride_bytes == 4) {
    std::memcpy(base, values, count * 4);
    return;
  }
  if (dtype == Dtype::kBFloat16 && stride_bytes == 2) {
    auto* halves = reinterpret_cast<uint16_t*>(base);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, 4);
      const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
      const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
      halves[i] = nan ? 0x7fc0 : static_cast<uint16_t>(rounded >> 16);
    }
    return;
  }
  if ((dtype == Dtype::kFloat8E4M3 || dtype == Dtype::kFloat8E5M2) && stride_bytes == 1 &&
      storeFp8Row(values, count, reinterpret_cast<uint8_t*>(base), dtype)) {
    return;
  }
  for (int64_t i = 0; i < count; ++i) fromFloat(values[i], base + i * stride_bytes, dtype);
}

void fillSentinel(char* base, std::size_t bytes, Dtype dtype) {
  if (dtype == Dtype::kFloat8E5M2x4 || dtype == Dtype::kFloat8E4M3x4) {
    std::memset(base, 0x7f, bytes);  // NaN in both fp8 formats
    return;
  }
  if (dtype == Dtype::kFloat4E2M1x4) {
    std::memset(base, 0xff, bytes);  // fp4 has no NaN: -6, its largest magnitude
    return;
  }
  if (!isFloat(dtype)) {
    std::memset(base, 0xA5, bytes);  // no NaN for integers: a pattern no kernel writes by accident
    return;
  }
  const std::size_t size = byteSize(dtype);
  char nan[4];
  fromFloat(std::numeric_limits<float>::quiet_NaN(), nan, dtype);
  for (std::size_t i = 0; i + size <= bytes; i += size) std::memcpy(base + i, nan, size);
}

}  // namespace nki
