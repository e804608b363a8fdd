#include "nki_runtime/Alu.h"

#include <cmath>
#include <limits>

#include "runtime/SimdLevel.h"

namespace nki {

float apply(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::kBypass:
      return a;
    case AluOp::kAdd:
      return a + b;
    case AluOp::kSubtract:
      return a - b;
    case AluOp::kMultiply:
      return a * b;
    case AluOp::kDivide:
      return a / b;
    case AluOp::kMaximum:
      return std::fmax(a, b);
    case AluOp::kMinimum:
      return std::fmin(a, b);
    case AluOp::kPower:
      return std::pow(a, b);
    case AluOp::kMod:
      return std::fmod(a, b);
    case AluOp::kFloorMod:
      return floorRemainder(std::fmod(a, b), b);
    case AluOp::kEqual:
      return a == b;
    case AluOp::kNotEqual:
      return a != b;
    case AluOp::kGreater:
      return a > b;
    case AluOp::kGreaterEqual:
      return a >= b;
    case AluOp::kLess:
      return a < b;
    case AluOp::kLessEqual:
      return a <= b;
    case AluOp::kLogicalAnd:
      return (a != 0.f) && (b != 0.f);
    case AluOp::kLogicalOr:
      return (a != 0.f) || (b != 0.f);
    case AluOp::kLogicalXor:
      return (a != 0.f) != (b != 0.f);
    case AluOp::kAbsMax:  // the signed value of the larger magnitude, b on a tie (nl.abs_max)
      return std::fabs(a) > std::fabs(b) ? a : b;
    case AluOp::kAbsMin:
      return std::fabs(a) < std::fabs(b) ? a : b;
    case AluOp::kBitwiseAnd:  // integers only, as bits (IntegerAlu.cpp): the verifier keeps floats out
    case AluOp::kBitwiseOr:
    case AluOp::kBitwiseXor:
    case AluOp::kLeftShift:
    case AluOp::kRightShift:
      break;
  }
  return a;
}

float apply(Function function, float x) {
  switch (function) {
    case Function::kCopy:
      return x;
    case Function::kExp:
      return std::exp(x);
    case Function::kLog:
      return std::log(x);
    case Function::kTanh:
      return std::tanh(x);
    case Function::kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case Function::kRelu:
      return x > 0.f ? x : 0.f;
    case Function::kGelu:
      return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case Function::kGeluTanh:
      return 0.5f * x * (1.f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Function::kSilu:
      return x / (1.f + std::exp(-x));
    case Function::kSqrt:
      return std::sqrt(x);
    case Function::kRsqrt:
      return 1.f / std::sqrt(x);
    case Function::kReciprocal:
      return 1.f / x;
    case Function::kAbs:
      return std::fabs(x);
    case Function::kNegative:
      return -x;
    case Function::kSquare:
      return x * x;
    case Function::kSin:
      return std::sin(x);
    case Function::kCos:
      return std::cos(x);
    case Function::kErf:
      return std::erf(x);
    case Function::kSoftplus:
      return std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.f);
    case Function::kSign:
      return static_cast<float>((x > 0.f) - (x < 0.f));
    case Function::kFloor:
      return std::floor(x);
    case Function::kCeil:
      return std::ceil(x);
    case Function::kArctan:
      return std::atan(x);
    case Function::kMish:
      return x * std::tanh(std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.f));
    case Function::kGeluSigmoid:  // GELU as x * sigmoid(1.702 x)
      return x / (1.f + std::exp(-1.702f * x));
    case Function::kPrelu:  // with its slope 0; activation (Instructions.cpp) applies the instruction's slope
      return x > 0.f ? x : 0.f;
    // The derivatives backward kernels use: d/dx of gelu, of x * sigmoid(1.702 x), of silu and of erf.
    case Function::kGeluDx:
      return 0.5f * (1.f + std::erf(x * 0.70710678118654752f)) + x * 0.39894228040143268f * std::exp(-0.5f * x * x);
    case Function::kGeluSigmoidDx: {
      const float s = 1.f / (1.f + std::exp(-1.702f * x));
      return s + 1.702f * x * s * (1.f - s);
    }
    case Function::kSiluDx: {
      const float s = 1.f / (1.f + std::exp(-x));
      return s * (1.f + x * (1.f - s));
    }
    case Function::kErfDx:
      return 1.12837916709551257f * std::exp(-x * x);
    case Function::kTan:
      return std::tan(x);
    case Function::kTrunc:
      return std::trunc(x);
  }
  return x;
}

namespace {

// The element-wise loops of the common operators, compiled for each SIMD level (the results are the same
// on each: one IEEE operation per element) and picked by runtime/SimdLevel.h.
struct Add { __attribute__((always_inline)) float operator()(float a, float b) const { return a + b; } };
struct Subtract { __attribute__((always_inline)) float operator()(float a, float b) const { return a - b; } };
struct Multiply { __attribute__((always_inline)) float operator()(float a, float b) const { return a * b; } };
struct Divide { __attribute__((always_inline)) float operator()(float a, float b) const { return a / b; } };

// b_step 0: b[0] for every element (an operand of one value).
template <typename Op>
__attribute__((always_inline)) inline void loop(const float* a, const float* b, int64_t b_step, float* out, int64_t n,
                                                bool b_first, Op op) {
  if (b_step == 0) {
    const float s = b[0];
    if (b_first) {
      for (int64_t i = 0; i < n; ++i) out[i] = op(s, a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], s);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = b_first ? op(b[i], a[i]) : op(a[i], b[i]);
}

__attribute__((always_inline)) inline bool arithmetic(AluOp op, const float* a, const float* b, int64_t b_step,
                                                      float* out, int64_t n, bool b_first) {
  switch (op) {
    case AluOp::kAdd: loop(a, b, b_step, out, n, b_first, Add{}); return true;
    case AluOp::kSubtract: loop(a, b, b_step, out, n, b_first, Subtract{}); return true;
    case AluOp::kMultiply: loop(a, b, b_step, out, n, b_first, Multiply{}); return true;
    case AluOp::kDivide: loop(a, b, b_step, out, n, b_first, Divide{}); return true;
    default: return false;
  }
}

__attribute__((target("avx512f"))) bool arithmeticAvx512(AluOp op, const float* a, const float* b, int64_t b_step,
                                                         float* out, int64_t n, bool b_first) {
  return arithmetic(op, a, b, b_step, out, n, b_first);
}

__attribute__((target("avx2"))) bool arithmeticAvx2(AluOp op, const float* a, const float* b, int64_t b_step,
                                                    float* out, int64_t n, bool b_first) {
  return arithmetic(op, a, b, b_step, out, n, b_first);
}

bool arithmeticAtLevel(AluOp op, const float* a, const float* b, int64_t b_step, float* out, int64_t n,
                       bool b_first) {
  const nrt::SimdLevel level = nrt::simdLevel();
  if (level >= nrt::SimdLevel::kAvx512) return arithmeticAvx512(op, a, b, b_step, out, n, b_first);
  if (level >= nrt::SimdLevel::kAvx2) return arithmeticAvx2(op, a, b, b_step, out, n, b_first);
  return arithmetic(op, a, b, b_step, out, n, b_first);
}

// (a[i] op0 s) op1 b[i] in one pass, operands on either side; the pairs of adds and multiplies only.
template <typename Op0, typename Op1>
__attribute__((always_inline)) inline void fusedLoop(const float* a, float s, bool s_first, const float* b,
                                                     bool b_first, float* out, int64_t n, Op0 op0, Op1 op1) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = s_first ? op0(s, a[i]) : op0(a[i], s);
    out[i] = b_first ? op1(b[i], x) : op1(x, b[i]);
  }
}

template <typename Op0>
__attribute__((always_inline)) inline bool fusedSecond(const float* a, float s, bool s_first, AluOp op1,
                                                       const float* b, bool b_first, float* out, int64_t n, Op0 op0) {
  switch (op1) {
    case AluOp::kAdd: fusedLoop(a, s, s_first, b, b_first, out, n, op0, Add{}); return true;
    case AluOp::kMultiply: fusedLoop(a, s, s_first, b, b_first, out, n, op0, Multiply{}); return true;
    default: return false;
  }
}

__attribute__((always_inline)) inline bool fused(AluOp op0, const float* a, float s, bool s_first, AluOp op1,
                                                 const float* b, bool b_first, float* out, int64_t n) {
  switch (op0) {
    case AluOp::kAdd: return fusedSecond(a, s, s_first, op1, b, b_first, out, n, Add{});
    case AluOp::kMultiply: return fusedSecond(a, s, s_first, op1, b, b_first, out, n, Multiply{});
    default: return false;
  }
}

__attribute__((target("avx512f"))) bool fusedAvx512(AluOp op0, const float* a, float s, bool s_first, AluOp op1,
                                                    const float* b, bool b_first, float* out, int64_t n) {
  return fused(op0, a, s, s_first, op1, b, b_first, out, n);
}

__attribute__((target("avx2"))) bool fusedAvx2(AluOp op0, const float* a, float s, bool s_first, AluOp op1,
                                               const float* b, bool b_first, float* out, int64_t n) {
  return fused(op0, a, s, s_first, op1, b, b_first, out, n);
}

}  // namespace

void applyRowScalarThenRow(AluOp op0, const float* a, float scalar, bool scalar_first, AluOp op1, const float* b,
                           bool b_first, float* out, int64_t n) {
  const nrt::SimdLevel level = nrt::simdLevel();
  const bool done = level >= nrt::SimdLevel::kAvx512 ? fusedAvx512(op0, a, scalar, scalar_first, op1, b, b_first, out, n)
                    : level >= nrt::SimdLevel::kAvx2 ? fusedAvx2(op0, a, scalar, scalar_first, op1, b, b_first, out, n)
                                                      : fused(op0, a, scalar, scalar_first, op1, b, b_first, out, n);
  if (done) return;
  applyRowScalar(op0, a, scalar, out, n, scalar_first);
  if (b_first) {
    applyRow(op1, b, out, out, n);
  } else {
    applyRow(op1, out, b, out, n);
  }
}

void applyRow(AluOp op, const float* a, const float* b, float* out, int64_t n) {
  if (arithmeticAtLevel(op, a, b, 1, out, n, false)) return;
  for (int64_t i = 0; i < n; ++i) out[i] = apply(op, a[i], b[i]);
}

void applyRowScalar(AluOp op, const float* a, float scalar, float* out, int64_t n, bool scalar_first) {
  if (arithmeticAtLevel(op, a, &scalar, 0, out, n, scalar_first)) return;
  for (int64_t i = 0; i < n; ++i) out[i] = scalar_first ? apply(op, scalar, a[i]) : apply(op, a[i], scalar);
}

namespace {

__attribute__((always_inline)) inline bool simpleFunction(Function function, const float* x, float* out, int64_t n) {
  switch (function) {
    case Function::kCopy:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i];
      return true;
    case Function::kRelu:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
      return true;
    case Function::kSquare:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i];
      return true;
    case Function::kRsqrt:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.f / std::sqrt(x[i]);
      return true;
    default:
      return false;
  }
}

__attribute__((target("avx512f"))) bool simpleAvx512(Function function, const float* x, float* out, int64_t n) {
  return simpleFunction(function, x, out, n);
}

__attribute__((target("avx2"))) bool simpleAvx2(Function function, const float* x, float* out, int64_t n) {
  return simpleFunction(function, x, out, n);
}

}  // namespace

void applyRow(Function function, const float* x, float* out, int64_t n) {
  const nrt::SimdLevel level = nrt::simdLevel();
  const bool done = level >= nrt::SimdLevel::kAvx512 ? simpleAvx512(function, x, out, n)
                    : level >= nrt::SimdLevel::kAvx2 ? simpleAvx2(function, x, out, n)
                                                      : simpleFunction(function, x, out, n);
  if (done) return;
  for (int64_t i = 0; i < n; ++i) out[i] = apply(function, x[i]);
}

namespace {

template <typename Combine>
float interleaved(const float* x, int64_t n, float identity, float initial, Combine combine) {
  constexpr int kLanes = 8;
  float partial[kLanes];
  for (float& p : partial) p = identity;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) partial[l] = combine(partial[l], x[i + l]);
  }
  float result = initial;
  for (float p : partial) result = combine(result, p);
  for (; i < n; ++i) result = combine(result, x[i]);
  return result;
}

}  // namespace

float reduceRow(AluOp op, const float* x, int64_t n, float initial) {
  switch (op) {
    case AluOp::kAdd:
      return interleaved(x, n, 0.f, initial, [](float a, float b) { return a + b; });
    case AluOp::kMultiply:
      return interleaved(x, n, 1.f, initial, [](float a, float b) { return a * b; });
    case AluOp::kMaximum:  // fmax's: a NaN loses to any number, in any order
      return interleaved(x, n, -std::numeric_limits<float>::infinity(), initial,
                         [](float a, float b) { return std::fmax(a, b); });
    case AluOp::kMinimum:
      return interleaved(x, n, std::numeric_limits<float>::infinity(), initial,
                         [](float a, float b) { return std::fmin(a, b); });
    default: {
      float result = initial;
      for (int64_t i = 0; i < n; ++i) result = apply(op, result, x[i]);
      return result;
    }
  }
}

}  // namespace nki
