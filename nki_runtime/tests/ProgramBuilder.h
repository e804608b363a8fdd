// Small programs written by hand, as the tracer would record them.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "nki_runtime/Program.h"

namespace nki::testing {

// A row-major view of all of `shape`, starting at `offset`.
inline Access whole(int32_t tensor, std::vector<int64_t> shape, int64_t offset = 0) {
  Access access;
  access.tensor = tensor;
  access.offset = offset;
  access.rank = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int a = access.rank - 1; a >= 0; --a) {
    access.sizes[a] = shape[a];
    access.strides[a] = stride;
    stride *= shape[a];
  }
  return access;
}

inline Access view(int32_t tensor, int64_t offset, std::initializer_list<std::pair<int64_t, int64_t>> axes) {
  Access access;
  access.tensor = tensor;
  access.offset = offset;
  for (const auto& [size, stride] : axes) {
    access.sizes[access.rank] = size;
    access.strides[access.rank] = stride;
    ++access.rank;
  }
  return access;
}

class ProgramBuilder {
 public:
  ProgramBuilder() { program_.kernel = "test_kernel"; }

  int32_t argument(std::vector<int64_t> shape, Dtype dtype = Dtype::kFloat32) {
    return add(Memory::kHbm, dtype, std::move(shape), program_.arguments++);
  }
  int32_t tile(Memory memory, std::vector<int64_t> shape, Dtype dtype = Dtype::kFloat32) {
    return add(memory, dtype, std::move(shape), -1);
  }
  Instruction& emit(Opcode opcode, Engine engine, Access dst, std::vector<Access> inputs = {}) {
    Instruction in;
    in.opcode = opcode;
    in.engine = engine;
    in.dst = dst;
    in.inputs = std::move(inputs);
    in.line = static_cast<int32_t>(program_.instructions.size()) + 1;
    program_.instructions.push_back(in);
    return program_.instructions.back();
  }
  Instruction& copy(Access dst, Access src) { return emit(Opcode::kDmaCopy, Engine::kDma, dst, {src}); }
  const std::vector<int64_t>& shape(int32_t tensor) const { return program_.tensors[tensor].shape; }
  Program& program() { return program_; }

 private:
  int32_t add(Memory memory, Dtype dtype, std::vector<int64_t> shape, int32_t argument) {
    TensorInfo info;
    info.name = "t" + std::to_string(program_.tensors.size());
    info.memory = memory;
    info.dtype = dtype;
    info.shape = std::move(shape);
    info.argument = argument;
    program_.tensors.push_back(info);
    return static_cast<int32_t>(program_.tensors.size()) - 1;
  }
  Program program_;
};

}  // namespace nki::testing
