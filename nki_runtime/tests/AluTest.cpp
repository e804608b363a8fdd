// The row loops of the engines' arithmetic against the element-wise definitions (Alu.h's apply).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nki_runtime/Alu.h"

using namespace nki;

namespace {

std::vector<float> values(int64_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 13) * scale + shift;
  return v;
}

}  // namespace

TEST(Alu, ScalarThenRowMatchesTwoElementWiseSteps) {
  const int64_t n = 37;  // a vector body and a scalar tail on every SIMD level
  const std::vector<float> a = values(n, 0.75f, -4.f), b = values(n, -0.5f, 3.25f);
  const float s = 1.5f;
  for (AluOp op0 : {AluOp::kAdd, AluOp::kMultiply, AluOp::kSubtract, AluOp::kDivide}) {
    for (AluOp op1 : {AluOp::kAdd, AluOp::kMultiply, AluOp::kMaximum}) {
      for (bool s_first : {false, true}) {
        for (bool b_first : {false, true}) {
          std::vector<float> out(n);
          applyRowScalarThenRow(op0, a.data(), s, s_first, op1, b.data(), b_first, out.data(), n);
          for (int64_t i = 0; i < n; ++i) {
            const float x = s_first ? apply(op0, s, a[i]) : apply(op0, a[i], s);
            const float want = b_first ? apply(op1, b[i], x) : apply(op1, x, b[i]);
            ASSERT_EQ(out[i], want) << static_cast<int>(op0) << " " << static_cast<int>(op1) << " " << s_first
                                    << b_first << " " << i;
          }
        }
      }
    }
  }
}

TEST(Alu, ScalarOperandOnEitherSideInPlace) {
  const int64_t n = 21;
  std::vector<float> a = values(n, 1.f, 1.f);
  const std::vector<float> original = a;
  applyRowScalar(AluOp::kSubtract, a.data(), 10.f, a.data(), n, /*scalar_first=*/true);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a[i], 10.f - original[i]);
}

TEST(Alu, ReductionsOfRows) {
  std::vector<float> x = values(1001, 1.f, -6.f);  // small integers: every sum exact in any order
  float sum = 0.f, largest = -std::numeric_limits<float>::infinity();
  for (float v : x) sum += v, largest = std::fmax(largest, v);
  EXPECT_EQ(reduceRow(AluOp::kAdd, x.data(), 1001, 2.f), sum + 2.f);
  EXPECT_EQ(reduceRow(AluOp::kMaximum, x.data(), 1001, -std::numeric_limits<float>::infinity()), largest);
  x[500] = std::numeric_limits<float>::quiet_NaN();  // fmax's rule: the NaN loses
  EXPECT_EQ(reduceRow(AluOp::kMaximum, x.data(), 1001, -std::numeric_limits<float>::infinity()), largest);
  EXPECT_EQ(reduceRow(AluOp::kSubtract, x.data(), 3, 0.f), 0.f - x[0] - x[1] - x[2]);  // in order
}
