#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nki_runtime/Dtype.h"

using nki::Dtype;

namespace {

float roundTrip(float value, Dtype dtype) {
  char bytes[4] = {};
  nki::fromFloat(value, bytes, dtype);
  return nki::toFloat(bytes, dtype);
}

uint32_t code(float value, Dtype dtype) {
  uint32_t bits = 0;
  nki::fromFloat(value, &bits, dtype);
  return bits;
}

}  // namespace

TEST(Dtype, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(roundTrip(1.0f + std::ldexp(1.f, -8), Dtype::kBFloat16), 1.0f);  // a tie: to even
  EXPECT_EQ(roundTrip(1.0f + 3 * std::ldexp(1.f, -8), Dtype::kBFloat16), 1.0f + std::ldexp(1.f, -6));
  EXPECT_EQ(code(-2.0f, Dtype::kBFloat16), 0xc000u);
  EXPECT_TRUE(std::isnan(roundTrip(NAN, Dtype::kBFloat16)));
}

TEST(Dtype, Float16KnownCodes) {
  EXPECT_EQ(code(1.0f, Dtype::kFloat16), 0x3c00u);
  EXPECT_EQ(code(65504.f, Dtype::kFloat16), 0x7bffu);
  EXPECT_EQ(code(1.f / 3.f, Dtype::kFloat16), 0x3555u);
  EXPECT_EQ(code(std::ldexp(1.f, -24), Dtype::kFloat16), 0x0001u);  // the smallest subnormal
  EXPECT_TRUE(std::isinf(roundTrip(70000.f, Dtype::kFloat16)));
}

TEST(Dtype, Float8Variants) {
  EXPECT_EQ(roundTrip(448.f, Dtype::kFloat8E4M3), 448.f);
  EXPECT_EQ(roundTrip(1000.f, Dtype::kFloat8E4M3), 448.f);  // fn: saturates, no infinity
  EXPECT_EQ(code(1.0f, Dtype::kFloat8E4M3), 0x38u);
  EXPECT_EQ(roundTrip(0.1f, Dtype::kFloat8E4M3), 0.1015625f);
  EXPECT_EQ(code(1.0f, Dtype::kFloat8E5M2), 0x3cu);
  EXPECT_EQ(roundTrip(57344.f, Dtype::kFloat8E5M2), 57344.f);
  EXPECT_TRUE(std::isinf(roundTrip(1e6f, Dtype::kFloat8E5M2)));
}

// Between every two neighbouring finite codes (positive and negative): a value just past either side's half
// takes that side's code, the midpoint takes the even one. Checks the encoder against the decoder alone.
void expectNearestEven(Dtype dtype, uint32_t finite_codes) {
  for (uint32_t sign : {0u, 1u}) {
    const uint32_t sign_bit = sign << (dtype == Dtype::kFloat16 ? 15 : 7);
    for (uint32_t low = 0; low + 1 < finite_codes; ++low) {
      uint32_t a = low | sign_bit, b = (low + 1) | sign_bit;
      const float x = nki::toFloat(&a, dtype), y = nki::toFloat(&b, dtype);
      const float middle = (x + y) / 2;  // exact: both are short floats of neighbouring exponents
      ASSERT_EQ(code(std::nextafter(middle, x), dtype), a) << x << " .. " << y;
      ASSERT_EQ(code(std::nextafter(middle, y), dtype), b) << x << " .. " << y;
      ASSERT_EQ(code(middle, dtype), low % 2 == 0 ? a : b) << "tie between " << x << " and " << y;
    }
  }
}

TEST(Dtype, SmallFloatsRoundToTheNearestCodeTiesToEven) {
  expectNearestEven(Dtype::kFloat8E4M3, 0x7f);   // 0x7f: NaN (fn)
  expectNearestEven(Dtype::kFloat8E5M2, 0x7c);   // 0x7c: infinity
  expectNearestEven(Dtype::kFloat16, 0x7c00);    // 0x7c00: infinity
}

TEST(Dtype, IntegersRoundAndSaturate) {
  EXPECT_EQ(roundTrip(2.5f, Dtype::kInt32), 2.f);
  EXPECT_EQ(roundTrip(300.f, Dtype::kInt8), 127.f);
  EXPECT_EQ(roundTrip(-5.f, Dtype::kUInt8), 0.f);
  EXPECT_EQ(roundTrip(NAN, Dtype::kInt16), 0.f);
  EXPECT_EQ(roundTrip(0.25f, Dtype::kBool), 1.f);
}

TEST(Dtype, TFloat32KeepsTenMantissaBits) {
  EXPECT_EQ(roundTrip(1.0f + std::ldexp(1.f, -10), Dtype::kTFloat32), 1.0f + std::ldexp(1.f, -10));
  EXPECT_EQ(roundTrip(1.0f + std::ldexp(1.f, -12), Dtype::kTFloat32), 1.0f);
}

TEST(Dtype, SentinelIsNaNForFloats) {
  uint16_t halves[3];
  nki::fillSentinel(reinterpret_cast<char*>(halves), sizeof(halves), Dtype::kBFloat16);
  for (uint16_t h : halves) EXPECT_TRUE(std::isnan(nki::toFloat(&h, Dtype::kBFloat16)));
}

TEST(Dtype, Fp8RowsEncodeAsOneValueAtATime) {
  // Every fp32 sign, exponent and top 7 mantissa bits, with low bits that make ties and near-ties:
  // normals, subnormals of both formats, the largest finite values and beyond, infinities, NaNs. A row
  // of 4099 values also ends in a partial vector.
  std::vector<float> values;
  for (uint32_t top = 0; top < (1u << 16); ++top) {
    for (uint32_t low : {0x0000u, 0x8000u, 0x7fffu, 0x4001u}) {
      const uint32_t bits = (top << 16) | low;
      float value;
      std::memcpy(&value, &bits, 4);
      values.push_back(value);
    }
  }
  for (Dtype type : {Dtype::kFloat8E4M3, Dtype::kFloat8E5M2}) {
    for (std::size_t start = 0; start < values.size(); start += 4099) {
      const std::size_t count = std::min<std::size_t>(4099, values.size() - start);
      std::vector<uint8_t> row(count), one(count);
      nki::storeRow(values.data() + start, static_cast<int64_t>(count), reinterpret_cast<char*>(row.data()), 1,
                    type);
      for (std::size_t i = 0; i < count; ++i) nki::fromFloat(values[start + i], &one[i], type);
      ASSERT_EQ(row, one) << nki::name(type) << " from value " << start;
    }
  }
}
