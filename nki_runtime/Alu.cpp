#include "nki_runtime/Alu.h"

#include <cmath>
#include <limits>

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
    case AluOp::kAbsMax:
      return std::fmax(std::fabs(a), std::fabs(b));
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
  }
  return x;
}

void applyRow(AluOp op, const float* a, const float* b, float* out, int64_t n) {
  switch (op) {
    case AluOp::kAdd:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
      return;
    case AluOp::kSubtract:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
      return;
    case AluOp::kMultiply:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
      return;
    case AluOp::kDivide:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] / b[i];
      return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = apply(op, a[i], b[i]);
  }
}

void applyRow(Function function, const float* x, float* out, int64_t n) {
  switch (function) {
    case Function::kCopy:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i];
      return;
    case Function::kRelu:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
      return;
    case Function::kSquare:
      for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i];
      return;
    case Function::kRsqrt:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.f / std::sqrt(x[i]);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = apply(function, x[i]);
  }
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
