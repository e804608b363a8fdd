#include "nki_runtime/Dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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

// A small float of `exponent_bits` and `mantissa_bits`; `max_finite` saturates the fn variant.
template <int kExponentBits, int kMantissaBits>
uint32_t encodeSmallFloat(float value, bool has_infinity, float max_finite) {
  const uint32_t sign = std::signbit(value) ? 1u : 0u;
  const int total = 1 + kExponentBits + kMantissaBits;
  const uint32_t sign_bit = sign << (total - 1);
  const int bias = (1 << (kExponentBits - 1)) - 1;
  if (std::isnan(value)) return has_infinity ? (sign_bit | (((1u << kExponentBits) - 1) << kMantissaBits) | 1u)
                                             : (sign_bit | ((1u << (total - 1)) - 1));
  float magnitude = std::fabs(value);
  if (magnitude > max_finite) {
    if (has_infinity) return sign_bit | (((1u << kExponentBits) - 1) << kMantissaBits);
    magnitude = max_finite;  // saturate, as the hardware's fn conversion does
  }
  if (magnitude == 0.f) return sign_bit;
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
  int biased = exponent - 1 + bias;
  float quantum;  // the value of one unit of the last mantissa bit
  if (biased <= 0) {
    biased = 0;
    quantum = std::ldexp(1.f, 1 - bias - kMantissaBits);
  } else {
    quantum = std::ldexp(1.f, exponent - 1 - kMantissaBits);
  }
  const float units = std::nearbyint(magnitude / quantum);  // round half to even (default mode)
  uint32_t code;
  if (biased == 0) {
    code = static_cast<uint32_t>(units);  // subnormal; may round up into the first normal
  } else {
    code = (static_cast<uint32_t>(biased) << kMantissaBits) + static_cast<uint32_t>(units) - (1u << kMantissaBits);
  }
  return sign_bit | code;
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

uint16_t toFloat16(float value) {
  return static_cast<uint16_t>(encodeSmallFloat<5, 10>(value, true, 65504.f));
}

template <typename Int>
Int saturate(float value) {
  if (std::isnan(value)) return 0;
  const double rounded = std::nearbyint(static_cast<double>(value));
  const double low = static_cast<double>(std::numeric_limits<Int>::min());
  const double high = static_cast<double>(std::numeric_limits<Int>::max());
  return static_cast<Int>(std::clamp(rounded, low, high));
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
                                                 "float4_e2m1fn_x4"};
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
      return decodeSmallFloat<4, 3>(*static_cast<const uint8_t*>(element), false);
    case Dtype::kFloat8E5M2:
      return decodeSmallFloat<5, 2>(*static_cast<const uint8_t*>(element), true);
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
