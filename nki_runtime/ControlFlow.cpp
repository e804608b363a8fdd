#include "nki_runtime/ControlFlow.h"

#include <stdexcept>

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

// A counted loop (step > 0): inputs lower and upper at its begin, its register (dst) takes each value.
// A while loop (step 0): it repeats while its register (dst, inputs[0]) is not zero.
int32_t LoopRunner::next(int32_t i, const RegisterAt& reg) {
  const Instruction& in = program_.instructions[i];
  const auto step = static_cast<int64_t>(in.coefficients[0]);
  const auto other = static_cast<int32_t>(in.coefficients[1]);  // the begin's end, the end's begin
  if (in.opcode == Opcode::kLoopBegin) {
    Counter& counter = counters_[i];
    counter.iterations = 0;
    if (step == 0) return *reg(in.inputs[0]) != 0 ? i + 1 : other + 1;
    counter.value = *reg(in.inputs[0]);
    counter.upper = *reg(in.inputs[1]);
    if (counter.value >= counter.upper) return other + 1;
    *reg(in.dst) = static_cast<int32_t>(counter.value);
    return i + 1;
  }
  Counter& counter = counters_[other];
  if (++counter.iterations >= kMaxIterations) {
    throw std::runtime_error("a device loop (line " + std::to_string(program_.instructions[other].line) +
                             ") ran " + std::to_string(kMaxIterations) + " times in one call: stopped");
  }
  if (step == 0) return *reg(in.inputs[0]) != 0 ? other + 1 : i + 1;
  counter.value += step;
  if (counter.value >= counter.upper) return i + 1;
  *reg(in.dst) = static_cast<int32_t>(counter.value);
  return other + 1;
}

Instruction withDynamicOffsets(const Program& program, const Instruction& in, const RegisterAt& reg) {
  Instruction moved = in;
  for (const DynamicOffset& dynamic : in.dynamic_offsets) {
    Access& view = dynamic.view < 0 ? moved.dst : moved.inputs.at(dynamic.view);
    const int64_t shift = *reg(dynamic.reg);
    view.offset += shift;
    const TensorInfo& tensor = program.tensors[view.tensor];
    bool inside = view.lowest() >= 0 && view.highest() <= tensor.elements();
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
      throw std::out_of_range("scalar_offset " + std::to_string(shift) + " moves a view of '" + tensor.name +
                              "' (" + std::to_string(tensor.elements()) + " elements) to elements " +
                              std::to_string(view.lowest()) + " to " + std::to_string(view.highest() - 1));
    }
  }
  return moved;
}

}  // namespace nki
