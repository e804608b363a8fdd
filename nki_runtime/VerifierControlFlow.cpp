#include "nki_runtime/Checker.h"

namespace nki {

void Checker::checkLoop(int i, const Instruction& in) {
  const bool counted = !in.coefficients.empty() && in.coefficients[0] > 0;
  const std::size_t expected = !counted ? 1 : in.opcode == Opcode::kLoopBegin ? 2 : 0;
  const auto is_register = [&](const Access& a) { return a.elements() == 1 && tensor(a).dtype == Dtype::kInt32; };
  bool ok = in.inputs.size() == expected && is_register(in.dst);
  for (const Access& input : in.inputs) ok = ok && is_register(input);
  if (!ok) fail(i, "a device loop's bounds, counter and condition are registers (one int32 each)");
}

}  // namespace nki
