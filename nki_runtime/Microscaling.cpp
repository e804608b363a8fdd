#include "nki_runtime/Microscaling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "nki_runtime/Fp32Matmul.h"
#include "nki_runtime/RowLoops.h"

namespace nki {
namespace {

// The values of every code of a small float, and of every E8M0 scale (and its inverse), decoded once.
struct ValueTables {
  std::array<float, 256> e5m2{}, e4m3{};
  std::array<float, 16> e2m1{};
  std::array<float, 256> scale{}, inverse_scale{};  // code 255: NaN
  ValueTables() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int code = 0; code < 256; ++code) {
      const auto byte = static_cast<uint8_t>(code);
      e5m2[code] = toFloat(&byte, Dtype::kFloat8E5M2);
      e4m3[code] = toFloat(&byte, Dtype::kFloat8E4M3);
      scale[code] = code == 255 ? nan : std::ldexp(1.f, code - 127);
      inverse_scale[code] = code == 255 ? nan : std::ldexp(1.f, 127 - code);
    }
    // e2m1: sign, two exponent bits (bias 1), one mantissa bit; no infinity or NaN.
    constexpr float kMagnitudes[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    for (int code = 0; code < 16; ++code) e2m1[code] = (code & 8 ? -1.f : 1.f) * kMagnitudes[code & 7];
  }
};

const ValueTables& tables() {
  static const ValueTables kTables;
  return kTables;
}

Dtype unpackedType(Dtype packed) {
  return packed == Dtype::kFloat8E5M2x4 ? Dtype::kFloat8E5M2 : Dtype::kFloat8E4M3;
}

float largestFinite(Dtype packed) { return packed == Dtype::kFloat8E5M2x4 ? 57344.f : 448.f; }

const uint8_t* scaleAt(const char* base, const Access& scales, int64_t group, int64_t partitions, int64_t column) {
  return reinterpret_cast<const uint8_t*>(base) + scales.offset + scaleRow(group, partitions) * scales.strides[0] +
         column * scales.strides[1];
}

// The table of a packed type's fp8 values; nullptr for fp4.
const float* fp8Values(Dtype packed) {
  switch (packed) {
    case Dtype::kFloat8E5M2x4:
      return tables().e5m2.data();
    case Dtype::kFloat8E4M3x4:
      return tables().e4m3.data();
    default:
      return nullptr;
  }
}

// Value j of a packed element: byte j through `fp8` (fp8Values), or nibble j of fp4.
float unpack(const uint8_t* bytes, int j, const float* fp8) {
  return fp8 != nullptr ? fp8[bytes[j]] : tables().e2m1[(bytes[j / 2] >> (4 * (j % 2))) & 15];
}

// A packed [K, F] tile as dense fp32 [4K, F]: row 4k + j holds value j of partition k's elements, scaled.
void dequantize(const char* data, Dtype type, const Access& tile, const char* scale_base, const Access& scales,
                float* out) {
  const int64_t K = tile.sizes[0], F = tile.sizes[1];
  const std::size_t size = byteSize(type);
  const ValueTables& t = tables();
  const float* fp8 = fp8Values(type);
  for (int64_t k = 0; k < K; ++k) {
    float* rows = out + 4 * k * F;
    const uint8_t* scale_row = scaleAt(scale_base, scales, k / 8, K, 0);
    for (int64_t f = 0; f < F; ++f) {
      const float factor = t.scale[scale_row[f * scales.strides[1]]];
      const auto* bytes = reinterpret_cast<const uint8_t*>(data) +
                          (tile.offset + k * tile.strides[0] + f * tile.strides[1]) * size;
      for (int j = 0; j < 4; ++j) rows[j * F + f] = unpack(bytes, j, fp8) * factor;
    }
  }
}

}  // namespace

int maxExponent(Dtype packed) {
  switch (packed) {
    case Dtype::kFloat8E5M2x4:
      return 15;
    case Dtype::kFloat8E4M3x4:
      return 8;
    default:
      return 2;
  }
}

float packedValue(const char* element, Dtype packed, int j) {
  return unpack(reinterpret_cast<const uint8_t*>(element), j, fp8Values(packed));
}

// AWS's quantize_mx: "a block scale that is two times larger" than the OCP specification's
// 2^(floor(log2(max |v|)) - emax), leaving room to round the group's largest values without saturating.
void quantizeMxScales(const Bound& b) {
  const Access& src = b.in.inputs[0];
  const int64_t P = src.sizes[0], F = src.sizes[1] / 4;
  const int emax = static_cast<int>(b.in.coefficients.at(0));
  float* row = scratch(0, 4 * F);
  std::vector<int> largest(F);
  const std::size_t in_size = byteSize(b.input_types[0]);
  for (int64_t g = 0; g < P / 8; ++g) {
    std::fill(largest.begin(), largest.end(), 0);
    for (int64_t p = 8 * g; p < 8 * g + 8; ++p) {
      loadRow(b.inputs[0] + (src.offset + p * src.strides[0]) * in_size, src.strides[1] * in_size, 4 * F,
              b.input_types[0], row);
      for (int64_t f = 0; f < F; ++f) {
        for (int j = 0; j < 4; ++j) {
          uint32_t bits;
          std::memcpy(&bits, row + 4 * f + j, 4);
          largest[f] = std::max(largest[f], static_cast<int>((bits >> 23) & 0xff));  // fp32's biased exponent
        }
      }
    }
    const Access& dst = b.in.dst;
    for (int64_t f = 0; f < F; ++f) {
      const int code = std::clamp(largest[f] - emax + 1, 0, 254);
      auto* out = reinterpret_cast<uint8_t*>(b.dst) + dst.offset + scaleRow(g, P) * dst.strides[0] +
                  f * dst.strides[1];
      *out = static_cast<uint8_t>(code);
    }
  }
}

void quantizeMx(const Bound& b) {
  const Access &src = b.in.inputs[0], &scales = b.in.inputs[1], &dst = b.in.dst;
  const int64_t P = src.sizes[0], F = dst.sizes[1];
  const Dtype packed = b.dst_type, value_type = unpackedType(packed);
  const float limit = largestFinite(packed);
  const std::size_t in_size = byteSize(b.input_types[0]), out_size = byteSize(packed);
  float* row = scratch(0, 4 * F);
  for (int64_t p = 0; p < P; ++p) {
    loadRow(b.inputs[0] + (src.offset + p * src.strides[0]) * in_size, src.strides[1] * in_size, 4 * F,
            b.input_types[0], row);
    for (int64_t f = 0; f < F; ++f) {
      const float factor = tables().inverse_scale[*scaleAt(b.inputs[1], scales, p / 8, P, f)];
      for (int j = 0; j < 4; ++j) {
        const float value = row[4 * f + j] * factor;  // a power of two: rounds as ldexp
        row[4 * f + j] = std::isnan(value) ? value : std::clamp(value, -limit, limit);
      }
    }
    // The 4 values of an element are its 4 bytes; elements one after another make one row of bytes.
    char* first = b.dst + (dst.offset + p * dst.strides[0]) * out_size;
    if (dst.strides[1] == 1) {
      storeRow(row, 4 * F, first, 1, value_type);
      continue;
    }
    for (int64_t f = 0; f < F; ++f) storeRow(row + 4 * f, 4, first + f * dst.strides[1] * out_size, 1, value_type);
  }
}

void matmulMx(const Bound& b) {
  const Access &stationary = b.in.inputs[0], &moving = b.in.inputs[1], &dst = b.in.dst;
  const int64_t K = stationary.sizes[0], M = stationary.sizes[1], N = moving.sizes[1];
  float* s = scratch(0, 4 * K * M);
  float* m = scratch(1, 4 * K * N);
  dequantize(b.inputs[0], b.input_types[0], stationary, b.inputs[2], b.in.inputs[2], s);
  dequantize(b.inputs[1], b.input_types[1], moving, b.inputs[3], b.in.inputs[3], m);
  float* out = scratch(2, M * N);
  if (b.in.accumulate) {
    widen(b.dst, b.dst_type, dst, out);
  } else {
    std::fill(out, out + M * N, 0.f);
  }
  multiplyInto(s, m, out, 4 * K, M, N);
  const std::size_t size = byteSize(b.dst_type);
  for (int64_t i = 0; i < M; ++i) {
    storeRow(out + i * N, N, b.dst + (dst.offset + i * dst.strides[0]) * size, dst.strides[1] * size, b.dst_type);
  }
}

}  // namespace nki
