// The verifier's rules for tensor indirection (TensorIndirection.h), from AWS's NkiTensor.indirect and the
// ISA pages of the instructions that take it (NKI 0.5, NeuronCore-v4). Which instruction and which of its
// operands may be indirect is checked where the tracer knows them (torch_neuronx/nki/indirection.py).
#include <algorithm>

#include "nki_runtime/Checker.h"

namespace nki {

void Checker::checkColumnIndirection(int i, const Instruction& in) {
  if (!limits_.tensor_indirection) {
    fail(i, "an .indirect() view is NeuronCore-v4 (trn3) tensor indirection; the kernel is checked for ",
         limits_.name, " (nki.jit(platform_target=\"trn3\"))");
    return;
  }
  const bool scatter = in.opcode == Opcode::kColumnScatter;
  const Access& data = scatter ? in.dst : in.inputs.at(0);
  const Access& staged = scatter ? in.inputs.at(0) : in.dst;
  const Access& index = in.inputs.at(1);
  requireMemory(i, data, "the indirect view's data", {Memory::kSbuf, Memory::kPsum});
  requireMemory(i, index, "the index", {Memory::kSbuf});
  if (in.engine == Engine::kGpSimd) requireMemory(i, data, "the data of a GpSimd instruction", {Memory::kSbuf});
  if (scatter && in.engine == Engine::kScalar && tensor(data).memory == Memory::kPsum) {
    fail(i, "the Scalar engine cannot scatter into PSUM through an .indirect() dst");
  }
  if (data.rank != 2 || staged.rank != 2 || index.rank != 2) {
    fail(i, "the data, the index and the operand must be [partitions, free] views");
    return;
  }
  if (tensor(index).dtype != Dtype::kUInt16) fail(i, "the index must be uint16, not ", name(tensor(index).dtype));
  if (tensor(data).dtype != tensor(staged).dtype) fail(i, "the operand and its data differ in dtype");
  const int64_t partitions = data.sizes[0];
  if (index.sizes[0] != partitions || staged.sizes[0] != partitions) {
    fail(i, "the index has ", index.sizes[0], " partitions and the data ", partitions, ": they must agree");
    return;
  }
  const auto group = static_cast<int64_t>(in.coefficients.empty() ? 0.f : in.coefficients[0]);
  if (group != 16 && group != 32) {
    fail(i, "a partition group is 16 (Vector, Scalar, GpSimd) or 32 (Tensor engine) partitions, not ", group);
    return;
  }
  const int64_t columns = staged.sizes[1];
  if (index.sizes[1] * group < columns) {
    fail(i, "num_elem ", columns, " needs ", (columns + group - 1) / group, " index columns (", group,
         " offsets each, one per partition of a group); the index has ", index.sizes[1]);
  }
  const int64_t last_group = (partitions - 1) / group * group;
  if (last_group + std::min(columns, group) > partitions) {
    fail(i, "the group of partitions from ", last_group, " reads index rows up to ",
         last_group + std::min(columns, group) - 1, ", past the view's ", partitions, " partitions");
  }
  const int64_t index_partition = index.offset / tensor(index).partitionElements();
  if (index_partition % 32 != 0) {
    fail(i, "the index starts on partition ", index_partition, "; an index starts on a quadrant (0, 32, 64, 96)");
  }
  const int64_t data_partition = data.offset / tensor(data).partitionElements();
  if (!scatter && data_partition != index_partition) {
    fail(i, "the data starts on partition ", data_partition, " and its index on ", index_partition,
         ": an indirect input starts on its index's partition");
  }
}

}  // namespace nki
