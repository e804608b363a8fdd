#include "nki_runtime/Bitvec.h"

#include <cstring>

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
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.dst_type);
  const int bits = static_cast<int>(8 * byteSize(b.input_types[0]));
  eachRow(b, [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t x = bitsOf(b, 0, o[1] + j * innerStride(b.in.inputs[0]));
      const int64_t y = bitsOf(b, 1, o[2] + j * innerStride(b.in.inputs[1]));
      storeBits(applyBits(b.in.op0, x, y, bits), b.dst + (o[0] + j * innerStride(b.in.dst)) * size, b.dst_type);
    }
  });
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
        const int64_t other = operand.first->input >= 0
                                  ? bitsOf(b, operand.first->input, o[1 + operand.first->input] +
                                                                         j * innerStride(b.in.inputs[operand.first->input]))
                                  : static_cast<int64_t>(operand.first->value);
        value = operand.second ? applyBits(op, other, value, 64) : applyBits(op, value, other, bits);
      }
      storeBits(value, b.dst + (o[0] + j * innerStride(b.in.dst)) * size, b.dst_type);
    }
  });
}

}  // namespace nki
