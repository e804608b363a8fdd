#include "nki_runtime/IntegerAlu.h"

#include <cstring>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/RowLoops.h"

namespace nki {
namespace {

// An integer element, sign- or zero-extended as its dtype is.
int64_t loadBits(const char* at, Dtype type) {
  switch (type) {
    case Dtype::kInt8: return *reinterpret_cast<const int8_t*>(at);
    case Dtype::kUInt8:
    case Dtype::kBool: return *reinterpret_cast<const uint8_t*>(at);
    case Dtype::kInt16: { int16_t v; std::memcpy(&v, at, 2); return v; }
    case Dtype::kUInt16: { uint16_t v; std::memcpy(&v, at, 2); return v; }
    case Dtype::kUInt32: { uint32_t v; std::memcpy(&v, at, 4); return v; }
    default: { int32_t v; std::memcpy(&v, at, 4); return v; }
  }
}

// The low bytes of `value`, as many as the dtype holds.
void storeBits(int64_t value, char* at, Dtype type) { std::memcpy(at, &value, byteSize(type)); }

int64_t bitsOf(const Bound& b, int k, int64_t element) {
  return loadBits(b.at(b.inputs[k], b.input_types[k], element), b.input_types[k]);
}

// The rows of the instruction: those the executor handed to this call, or all of them.
template <typename Row>
void eachRow(const Bound& b, Row row) {
  const int64_t end = b.row_end >= 0 ? b.row_end : rowCount(b.in.dst);
  forEachRow(b.in.dst, b.views(), row, b.row_end >= 0 ? b.row_begin : 0, end);
}

// dst = op(inputs[0], inputs[1]) element by element, on the integers' bits.
template <typename Op>
void eachPair(const Bound& b, Op op) {
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.dst_type);
  eachRow(b, [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t x = bitsOf(b, 0, o[1] + j * innerStride(b.in.inputs[0]));
      const int64_t y = bitsOf(b, 1, o[2] + j * innerStride(b.in.inputs[1]));
      storeBits(op(x, y), b.dst + (o[0] + j * innerStride(b.in.dst)) * size, b.dst_type);
    }
  });
}

// An immediate as the integer it was written as (its fp32 value rounds past 2**24).
int64_t immediateBits(const Operand& operand) {
  return operand.integral ? operand.bits : static_cast<int64_t>(operand.value);
}

}  // namespace

bool isBitvec(AluOp op) {
  return op == AluOp::kBitwiseAnd || op == AluOp::kBitwiseOr || op == AluOp::kBitwiseXor ||
         op == AluOp::kLeftShift || op == AluOp::kRightShift;
}

int64_t applyBits(AluOp op, int64_t a, int64_t b, int a_bits) {
  const uint64_t width = a_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << a_bits) - 1;
  const auto bits = static_cast<uint64_t>(a);
  switch (op) {
    case AluOp::kBitwiseAnd: return a & b;
    case AluOp::kBitwiseOr: return a | b;
    case AluOp::kBitwiseXor: return a ^ b;
    case AluOp::kLeftShift: return b < 0 || b > 63 ? 0 : static_cast<int64_t>(bits << b);
    case AluOp::kRightShift:  // logical: zeros come in above a's own width
      return b < 0 || b > 63 ? 0 : static_cast<int64_t>((bits & width) >> b);
    default: return a;
  }
}

void bitvecTensorTensor(const Bound& b) {
  const int bits = static_cast<int>(8 * byteSize(b.input_types[0]));
  eachPair(b, [&](int64_t x, int64_t y) { return applyBits(b.in.op0, x, y, bits); });
}

void bitvecTensorScalar(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.dst_type);
  const int bits = static_cast<int>(8 * byteSize(b.input_types[0]));
  const std::pair<AluOp, std::pair<const Operand*, bool>> steps[] = {
      {b.in.op0, {&b.in.operand0, b.in.reverse0}}, {b.in.op1, {&b.in.operand1, b.in.reverse1}}};
  eachRow(b, [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t value = bitsOf(b, 0, o[1] + j * innerStride(b.in.inputs[0]));
      for (const auto& [op, operand] : steps) {
        if (op == AluOp::kBypass) continue;
        const int k = operand.first->input;
        const int64_t other = k >= 0 ? bitsOf(b, k, o[1 + k] + j * innerStride(b.in.inputs[k]))
                                     : immediateBits(*operand.first);
        value = operand.second ? applyBits(op, other, value, 64) : applyBits(op, value, other, bits);
      }
      storeBits(value, b.dst + (o[0] + j * innerStride(b.in.dst)) * size, b.dst_type);
    }
  });
}

bool takesNativeIntegers(const Bound& b) {
  const auto word = [](Dtype type) { return type == Dtype::kInt32 || type == Dtype::kUInt32; };
  if (b.in.engine != Engine::kGpSimd || !word(b.dst_type)) return false;
  for (Dtype type : b.input_types) {
    if (!word(type)) return false;
  }
  switch (b.in.op0) {
    case AluOp::kAdd: case AluOp::kSubtract: case AluOp::kMultiply: case AluOp::kMaximum: case AluOp::kMinimum:
    case AluOp::kEqual: case AluOp::kNotEqual: case AluOp::kGreater: case AluOp::kGreaterEqual:
    case AluOp::kLess: case AluOp::kLessEqual:
      return true;
    default:
      return false;
  }
}

void integerTensorTensor(const Bound& b) {
  // The 32-bit words as dst's type, with the sequencers' integer arithmetic (sums and products wrap).
  if (b.dst_type == Dtype::kUInt32) {
    return eachPair(b, [&](int64_t x, int64_t y) {
      return int64_t{scalarAluU32(b.in.op0, static_cast<uint32_t>(x), static_cast<uint32_t>(y))};
    });
  }
  eachPair(b, [&](int64_t x, int64_t y) {
    return int64_t{scalarAlu(b.in.op0, static_cast<int32_t>(x), static_cast<int32_t>(y))};
  });
}

void bitvecReduce(const Bound& b) {
  const Access& data = b.in.inputs[0];
  const Access& dst = b.in.dst;
  const int kept = dst.rank;
  const Access block = trailingAxes(data, kept);
  const std::size_t dst_size = byteSize(b.dst_type);
  // A dst of one axis is one row of partitions: a partition stream's share of it is a range of its elements.
  const bool share = dst.rank == 1 && b.row_end >= 0;
  const int64_t j_begin = share ? b.row_begin : 0, j_end = share ? b.row_end : inner(dst);
  const auto reduceDstRow = [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = j_begin; j < j_end; ++j) {
      Access here = block;
      here.offset = o[1] + j * data.strides[kept - 1];
      int64_t acc = b.in.op0 == AluOp::kBitwiseAnd ? -1 : 0;  // all ones for an and
      forEachRow(here, {&here}, [&](const std::array<int64_t, 8>& r) {
        for (int64_t i = 0; i < inner(here); ++i) {
          acc = applyBits(b.in.op0, acc, bitsOf(b, 0, r[0] + i * innerStride(here)), 64);
        }
      });
      storeBits(acc, b.dst + (o[0] + j * innerStride(dst)) * dst_size, b.dst_type);
    }
  };
  if (share) return forEachRow(dst, {&dst, &data}, reduceDstRow, 0, 1);
  eachRow(b, reduceDstRow);
}

void integerIota(const Bound& b) {
  const Access& dst = b.in.dst;
  const int64_t n = inner(dst);
  const std::size_t size = byteSize(b.dst_type);
  const bool word = b.dst_type == Dtype::kInt32 || b.dst_type == Dtype::kUInt32;
  forEachAffineRow<int64_t>(dst, {&dst}, b.in.integers,
                            [&](const std::array<int64_t, 8>& o, int64_t start, int64_t step) {
    float* row = scratch(0, n);
    for (int64_t i = 0; i < n; ++i) {
      // int32 arithmetic: it wraps, and the value is cast to dst's dtype only at the end
      const auto value = static_cast<int32_t>(static_cast<uint32_t>(start + i * step));
      if (word) storeBits(value, b.dst + (o[0] + i * innerStride(dst)) * size, b.dst_type);
      else row[i] = static_cast<float>(value);
    }
    if (!word) b.storeDst(row, o[0]);
  });
}

void integerMemset(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.dst_type);
  eachRow(b, [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = 0; j < n; ++j) {
      storeBits(b.in.operand0.bits, b.dst + (o[0] + j * innerStride(b.in.dst)) * size, b.dst_type);
    }
  });
}

}  // namespace nki
