#include "nki_runtime/Checker.h"

namespace nki {

bool Checker::onRegisters(const Instruction& in) const {
  const auto is_register = [&](const Access& a) { return a.elements() == 1 && tensor(a).dtype == Dtype::kInt32; };
  bool ok = is_register(in.dst);
  for (const Access& input : in.inputs) ok = ok && is_register(input);
  return ok;
}

void Checker::checkLoop(int i, const Instruction& in) {
  const bool counted = !in.coefficients.empty() && in.coefficients[0] > 0;
  const std::size_t expected = !counted ? 1 : in.opcode == Opcode::kLoopBegin ? 2 : 0;
  if (in.inputs.size() != expected || !onRegisters(in)) {
    fail(i, "a device loop's bounds, counter and condition are registers (one int32 each)");
  }
}

// Two scalars of one width (int32, uint32 or int64) into a third of it, or into an int32 for a comparison.
void Checker::checkScalarAlu(int i, const Instruction& in) {
  const auto scalar = [&](const Access& a) {
    const Dtype type = tensor(a).dtype;
    return a.elements() == 1 && (type == Dtype::kInt32 || type == Dtype::kUInt32 || type == Dtype::kInt64);
  };
  if (in.inputs.size() != 2 || !scalar(in.dst) || !scalar(in.inputs[0]) || !scalar(in.inputs[1])) {
    fail(i, "computes a register from two registers (one int32, uint32 or int64 each)");
    return;
  }
  const Dtype width = tensor(in.inputs[0]).dtype;
  if (tensor(in.inputs[1]).dtype != width) {
    fail(i, "combines a ", name(width), " and a ", name(tensor(in.inputs[1]).dtype), " scalar; widths must match");
  }
  const Dtype result = isComparison(in.op0) ? Dtype::kInt32 : width;
  if (tensor(in.dst).dtype != result) fail(i, "writes a ", name(result), " result into a ", name(tensor(in.dst).dtype));
  if (width == Dtype::kInt64 && in.op0 != AluOp::kAdd && in.op0 != AluOp::kSubtract && in.op0 != AluOp::kMultiply) {
    fail(i, "64-bit scalars add, subtract and multiply only");
  } else if (!isScalarAluOp(in.op0)) {
    fail(i, "the sequencers add, subtract, multiply, divide, take remainders (nl.fmod, nl.mod), maxima, minima ",
         "and comparisons of int32 scalars; no other operator");
  }
}

// A branch tests one register (or none: it always jumps) and lands further on, in the device loop it
// leaves from: a jump into or out of a loop's body would leave its counter behind.
void Checker::checkBranch(int i, const Instruction& in) {
  if (in.inputs.size() > 1 || !onRegisters(in)) fail(i, "a branch tests at most one register (one int32)");
  if (in.coefficients.size() != 1) return;  // branchTargets named it
  const auto target = static_cast<int32_t>(in.coefficients[0]);
  for (const LoopSpan& loop : loops_) {
    const bool from_body = loop.begin < i && i < loop.end;
    const bool into_body = loop.begin < target && target <= loop.end;
    if (from_body != into_body) {
      fail(i, "jumps ", from_body ? "out of" : "into", " the body of the device loop at line ",
           program_.instructions[loop.begin].line);
      return;
    }
  }
}

}  // namespace nki
