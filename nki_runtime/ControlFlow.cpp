#include "nki_runtime/ControlFlow.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "nki_runtime/Alu.h"

namespace nki {

std::vector<LoopSpan> loopSpans(const Program& program, std::string* error) {
  std::vector<LoopSpan> spans;
  std::vector<std::size_t> open;  // indices into spans of the loops not yet ended
  const auto& instructions = program.instructions;
  const auto fail = [&](const std::string& text) {
    if (error != nullptr && error->empty()) *error = text;
  };
  for (int32_t i = 0; i < static_cast<int32_t>(instructions.size()); ++i) {
    const Instruction& in = instructions[i];
    if (in.opcode == Opcode::kLoopBegin) {
      open.push_back(spans.size());
      spans.push_back({i, -1});
    } else if (in.opcode == Opcode::kLoopEnd) {
      if (open.empty()) {
        fail("a loop ends at line " + std::to_string(in.line) + " that never began");
        continue;
      }
      spans[open.back()].end = i;
      open.pop_back();
    }
  }
  if (!open.empty()) fail("a loop begun at line " + std::to_string(instructions[spans[open.back()].begin].line) +
                          " never ends");
  for (const LoopSpan& span : spans) {
    if (span.end < 0) continue;
    const auto& begin = instructions[span.begin];
    const auto& end = instructions[span.end];
    if (begin.coefficients.size() != 2 || end.coefficients.size() != 2 ||
        static_cast<int32_t>(begin.coefficients[1]) != span.end ||
        static_cast<int32_t>(end.coefficients[1]) != span.begin || begin.coefficients[0] != end.coefficients[0]) {
      fail("the loop at line " + std::to_string(begin.line) + " does not name its own end");
    }
  }
  return spans;
}

std::vector<int32_t> branchTargets(const Program& program, std::string* error) {
  std::vector<int32_t> targets;
  const auto size = static_cast<int32_t>(program.instructions.size());
  for (int32_t i = 0; i < size; ++i) {
    const Instruction& in = program.instructions[i];
    if (in.opcode != Opcode::kBranch) continue;
    const int32_t target = in.coefficients.size() == 1 ? static_cast<int32_t>(in.coefficients[0]) : -1;
    if (target <= i || target > size) {
      if (error != nullptr && error->empty()) {
        *error = "the branch at line " + std::to_string(in.line) + " does not go forward within the kernel";
      }
      continue;
    }
    targets.push_back(target);
  }
  return targets;
}

bool isScalarAluOp(AluOp op) {
  switch (op) {
    case AluOp::kAdd: case AluOp::kSubtract: case AluOp::kMultiply: case AluOp::kDivide: case AluOp::kMod:
    case AluOp::kFloorMod:
    case AluOp::kMaximum: case AluOp::kMinimum: case AluOp::kEqual: case AluOp::kNotEqual: case AluOp::kGreater:
    case AluOp::kGreaterEqual: case AluOp::kLess: case AluOp::kLessEqual:
      return true;
    default:
      return false;
  }
}

namespace {

// The sequencers' 32-bit arithmetic, signed (int32) or not (uint32): sums and products wrap; a signed
// division rounds toward zero.
template <typename T>
T integerAlu(AluOp op, T a, T b) {
  using Bits = std::make_unsigned_t<T>;
  const auto ua = static_cast<Bits>(a), ub = static_cast<Bits>(b);
  switch (op) {
    case AluOp::kAdd: return static_cast<T>(ua + ub);
    case AluOp::kSubtract: return static_cast<T>(ua - ub);
    case AluOp::kMultiply: return static_cast<T>(ua * ub);
    case AluOp::kDivide:
    case AluOp::kMod:
    case AluOp::kFloorMod: {
      if (b == 0) throw std::domain_error("scalar_alu: division by zero");
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == -1) return op == AluOp::kDivide ? a : 0;  // past int32
        if (op == AluOp::kFloorMod) return floorRemainder<T>(a % b, b);
      }
      return op == AluOp::kDivide ? a / b : a % b;  // without signs both remainders agree
    }
    case AluOp::kMaximum: return std::max(a, b);
    case AluOp::kMinimum: return std::min(a, b);
    case AluOp::kEqual: return a == b;
    case AluOp::kNotEqual: return a != b;
    case AluOp::kGreater: return a > b;
    case AluOp::kGreaterEqual: return a >= b;
    case AluOp::kLess: return a < b;
    case AluOp::kLessEqual: return a <= b;
    default:
      throw std::invalid_argument("scalar_alu: the sequencer has no such operator");
  }
}

Dtype widthOf(const Program& program, const Access& a) { return program.tensors[a.tensor].dtype; }

// a op b as the scalars' width (their dtype, both the same) computes it.
int64_t scalarAluOf(Dtype width, AluOp op, int64_t a, int64_t b) {
  if (width == Dtype::kInt64) return scalarAlu64(op, a, b);
  if (width == Dtype::kUInt32) return scalarAluU32(op, static_cast<uint32_t>(a), static_cast<uint32_t>(b));
  return scalarAlu(op, static_cast<int32_t>(a), static_cast<int32_t>(b));
}

}  // namespace

int32_t scalarAlu(AluOp op, int32_t a, int32_t b) { return integerAlu(op, a, b); }

uint32_t scalarAluU32(AluOp op, uint32_t a, uint32_t b) { return integerAlu(op, a, b); }

int64_t scalarAlu64(AluOp op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);  // two's complement, wrapping
  switch (op) {
    case AluOp::kAdd: return static_cast<int64_t>(ua + ub);
    case AluOp::kSubtract: return static_cast<int64_t>(ua - ub);
    case AluOp::kMultiply: return static_cast<int64_t>(ua * ub);
    default:
      throw std::invalid_argument("scalar_alu: 64-bit scalars add, subtract and multiply only");
  }
}

bool isComparison(AluOp op) {
  return op == AluOp::kEqual || op == AluOp::kNotEqual || op == AluOp::kGreater || op == AluOp::kGreaterEqual ||
         op == AluOp::kLess || op == AluOp::kLessEqual;
}

int64_t registerValue(const Program& program, const Access& a, const RegisterAt& reg) {
  switch (widthOf(program, a)) {
    case Dtype::kInt64: return *static_cast<const int64_t*>(reg(a));
    case Dtype::kUInt32: return *static_cast<const uint32_t*>(reg(a));
    default: return *static_cast<const int32_t*>(reg(a));
  }
}

void setRegister(const Program& program, const Access& a, const RegisterAt& reg, int64_t value) {
  switch (widthOf(program, a)) {
    case Dtype::kInt64: *static_cast<int64_t*>(reg(a)) = value; return;
    case Dtype::kUInt32: *static_cast<uint32_t*>(reg(a)) = static_cast<uint32_t>(value); return;
    default: *static_cast<int32_t*>(reg(a)) = static_cast<int32_t>(value); return;
  }
}

int32_t Sequencer::next(int32_t i, const RegisterAt& reg) {
  const Instruction& in = program_.instructions[i];
  switch (in.opcode) {
    case Opcode::kScalarAlu: {
      const int64_t a = registerValue(program_, in.inputs[0], reg), b = registerValue(program_, in.inputs[1], reg);
      setRegister(program_, in.dst, reg, scalarAluOf(widthOf(program_, in.inputs[0]), in.op0, a, b));
      return i + 1;
    }
    case Opcode::kBranch:
      return in.inputs.empty() || registerValue(program_, in.inputs[0], reg) == 0
                 ? static_cast<int32_t>(in.coefficients[0])
                 : i + 1;
    default:
      return loop(i, reg);
  }
}

// A counted loop (step > 0): inputs lower and upper at its begin, its register (dst) takes each value.
// A while loop (step 0): it repeats while its register (dst, inputs[0]) is not zero.
int32_t Sequencer::loop(int32_t i, const RegisterAt& reg) {
  const Instruction& in = program_.instructions[i];
  const auto step = static_cast<int64_t>(in.coefficients[0]);
  const auto other = static_cast<int32_t>(in.coefficients[1]);  // the begin's end, the end's begin
  if (in.opcode == Opcode::kLoopBegin) {
    Counter& counter = counters_[i];
    counter.iterations = 0;
    if (step == 0) return registerValue(program_, in.inputs[0], reg) != 0 ? i + 1 : other + 1;
    counter.value = registerValue(program_, in.inputs[0], reg);
    counter.upper = registerValue(program_, in.inputs[1], reg);
    if (counter.value >= counter.upper) return other + 1;
    setRegister(program_, in.dst, reg, counter.value);
    return i + 1;
  }
  Counter& counter = counters_[other];
  if (++counter.iterations >= kMaxIterations) {
    throw std::runtime_error("a device loop (line " + std::to_string(program_.instructions[other].line) +
                             ") ran " + std::to_string(kMaxIterations) + " times in one call: stopped");
  }
  if (step == 0) return registerValue(program_, in.inputs[0], reg) != 0 ? other + 1 : i + 1;
  counter.value += step;
  if (counter.value >= counter.upper) return i + 1;
  setRegister(program_, in.dst, reg, counter.value);
  return other + 1;
}

Instruction withDynamicOffsets(const Program& program, const Instruction& in, const RegisterAt& reg) {
  Instruction moved = in;
  for (const DynamicOffset& dynamic : in.dynamic_offsets) {
    Access& view = dynamic.view < 0 ? moved.dst : moved.inputs.at(dynamic.view);
    const int64_t shift = registerValue(program, dynamic.reg, reg);
    const TensorInfo& tensor = program.tensors[view.tensor];
    // A shift beyond the tensor's size leaves it whatever the view (and a 64-bit one would overflow below).
    const bool reachable = shift >= -tensor.elements() && shift <= tensor.elements();
    if (reachable) view.offset += shift;
    bool inside = reachable && view.lowest() >= 0 && view.highest() <= tensor.elements();
    if (inside && tensor.memory != Memory::kHbm) {  // on chip, the free axes stay within each partition
      const int64_t per_partition = tensor.partitionElements();
      int64_t free_low = view.offset % per_partition, free_high = free_low;
      for (int a = 1; a < view.rank; ++a) {
        const int64_t reach = (view.sizes[a] - 1) * view.strides[a];
        (reach < 0 ? free_low : free_high) += reach;
      }
      inside = free_low >= 0 && free_high < per_partition;
    }
    if (!inside) {
      const std::string where = reachable ? " to elements " + std::to_string(view.lowest()) + " to " +
                                                std::to_string(view.highest() - 1)
                                          : " past its end";
      throw std::out_of_range("scalar_offset " + std::to_string(shift) + " moves a view of '" + tensor.name +
                              "' (" + std::to_string(tensor.elements()) + " elements)" + where);
    }
  }
  return moved;
}

}  // namespace nki
