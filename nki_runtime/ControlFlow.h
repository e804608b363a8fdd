// What the engines' sequencers do besides issuing instructions: loops that run on the device
// (nl.fori_loop, nl.while_loop, nl.dynamic_range), branches (nl.if_else), scalar arithmetic on registers
// (nisa.scalar_alu, NkiScalar) and access patterns offset by a register (`.ap(scalar_offset=...)`).
// A register is an int32 element of a tensor of the program (loaded, stored and moved by DMA); a loop is a
// kLoopBegin ... kLoopEnd pair around one traced copy of its body, a branch a forward jump, and the
// executor follows both.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki {

struct LoopSpan {
  int32_t begin = 0;  // the kLoopBegin
  int32_t end = 0;    // its kLoopEnd
};

// The program's loops in the order of their begins, or an error naming what does not pair up.
std::vector<LoopSpan> loopSpans(const Program& program, std::string* error = nullptr);

// Where each kBranch goes, forward within the program (at most its end), in program order; an error names
// a branch that goes elsewhere.
std::vector<int32_t> branchTargets(const Program& program, std::string* error = nullptr);

// a op b on 32-bit registers, as nisa.scalar_alu: sums and products wrap, division rounds toward zero, the
// remainder takes a's sign (kMod) or b's (kFloorMod), a comparison gives 1 or 0. Division by zero is a
// std::domain_error, an operator the sequencer lacks a std::invalid_argument.
int32_t scalarAlu(AluOp op, int32_t a, int32_t b);
// The same on 64-bit scalars (nl.int64), which add, subtract and multiply only, wrapping.
int64_t scalarAlu64(AluOp op, int64_t a, int64_t b);
// The same on unsigned 32-bit scalars (nl.uint32, SDK 2.34): arithmetic modulo 2^32, unsigned division,
// remainders, maxima, minima and comparisons (which give 1 or 0).
uint32_t scalarAluU32(AluOp op, uint32_t a, uint32_t b);
bool isScalarAluOp(AluOp op);
bool isComparison(AluOp op);

// Where a register lives in host memory, given the one-element view of it: an int32, or an int64 (uint32)
// where its tensor is int64 (uint32): a scalar read from an nl.int64 (nl.uint32) tile.
using RegisterAt = std::function<void*(const Access&)>;
int64_t registerValue(const Program& program, const Access& a, const RegisterAt& reg);
void setRegister(const Program& program, const Access& a, const RegisterAt& reg, int64_t value);

// A run's sequencer: its loop counters (one per kLoopBegin), its branches and its scalar arithmetic.
class Sequencer {
 public:
  explicit Sequencer(const Program& program) : program_(program), counters_(program.instructions.size()) {}

  static bool runs(Opcode opcode) {
    return opcode == Opcode::kLoopBegin || opcode == Opcode::kLoopEnd || opcode == Opcode::kScalarAlu ||
           opcode == Opcode::kBranch;
  }

  // Runs sequencer instruction i; returns the instruction that runs next. A loop that repeats more than
  // kMaxIterations times in one run is an error (std::runtime_error), not a hang.
  int32_t next(int32_t i, const RegisterAt& reg);

  static constexpr int64_t kMaxIterations = int64_t{1} << 24;

 private:
  int32_t loop(int32_t i, const RegisterAt& reg);

  struct Counter {
    int64_t value = 0, upper = 0, iterations = 0;
  };
  const Program& program_;
  std::vector<Counter> counters_;
};

// `in` with its views moved by the registers its dynamic offsets name; std::out_of_range when a moved
// view leaves its tensor (or, on chip, its partitions' free range).
Instruction withDynamicOffsets(const Program& program, const Instruction& in, const RegisterAt& reg);

}  // namespace nki
