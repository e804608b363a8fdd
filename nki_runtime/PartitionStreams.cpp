#include "nki_runtime/PartitionStreams.h"

#include <algorithm>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/Instructions.h"

namespace nki {
namespace {

bool perRowOpcode(Opcode opcode) {
  switch (opcode) {
    case Opcode::kDmaCopy:
    case Opcode::kTensorCopy:
    case Opcode::kTensorTensor:
    case Opcode::kTensorScalar:
    case Opcode::kActivation:
    case Opcode::kTensorReduce:
    case Opcode::kMemset:
    case Opcode::kSelect:
    case Opcode::kTensorTensorScan:
    case Opcode::kScalarTensorTensor:
      return true;
    default:  // matmul and transpose mix partitions; iota numbers rows in order; the rest walk partitions
      return false;
  }
}

// Whether row p of an access reaches partition p of its tile alone: on-chip,
// axis 0 walks the tile's partitions from partition 0 and the other axes stay within one.
bool withinItsPartition(const Program& program, const Access& access) {
  const TensorInfo& tile = program.tensors[access.tensor];
  if (tile.memory == Memory::kHbm) return true;
  const int64_t per_partition = tile.partitionElements();
  if (access.strides[0] != per_partition || access.offset < 0 || access.offset >= per_partition) return false;
  int64_t reach = access.offset;
  for (int a = 1; a < access.rank; ++a) {
    if (access.strides[a] < 0) return false;
    reach += (access.sizes[a] - 1) * access.strides[a];
  }
  return reach < per_partition;
}

// The partition count of a streamable instruction, or 0.
int64_t streamPartitions(const Program& program, const Instruction& in, bool rows_independent) {
  // A reduction into one axis keeps a value per partition; other instructions' rows are their dst's.
  const bool per_partition_values = in.opcode == Opcode::kTensorReduce && in.dst.rank == 1;
  if (in.indirect || !in.dynamic_offsets.empty() || !rows_independent || !perRowOpcode(in.opcode) ||
      (in.dst.rank < 2 && !per_partition_values)) {
    return 0;
  }
  const int64_t partitions = in.dst.sizes[0];
  if (partitions < 1 || rowsOf(in) % partitions != 0) return 0;
  if (!withinItsPartition(program, in.dst)) return 0;
  for (const Access& input : in.inputs) {
    if (input.rank < 1 || input.sizes[0] != partitions || !withinItsPartition(program, input)) return 0;
  }
  return partitions;
}

// Whether instruction `in` may join a stream holding `members`: no HBM tensor one of them writes is
// reached by another (its rows would meet in another order).
bool hbmApart(const Program& program, const std::vector<const Instruction*>& members, const Instruction& in) {
  const auto hbm = [&](const Access& a) { return program.tensors[a.tensor].memory == Memory::kHbm; };
  for (const Instruction* m : members) {
    for (const Access& a : in.inputs) {
      if (hbm(a) && a.tensor == m->dst.tensor) return false;
    }
    if (hbm(in.dst)) {
      if (in.dst.tensor == m->dst.tensor) return false;
      for (const Access& a : m->inputs) {
        if (a.tensor == in.dst.tensor) return false;
      }
    }
  }
  return true;
}

}  // namespace

std::vector<PartitionStream> planPartitionStreams(const Program& program, const std::vector<uint8_t>& rows_independent) {
  std::vector<PartitionStream> streams;
  const auto& instructions = program.instructions;
  PartitionStream open;
  std::vector<const Instruction*> members;
  std::vector<uint8_t> branched_to(instructions.size() + 1, 0);  // a stream starts where a branch lands
  for (int32_t target : branchTargets(program)) branched_to[target] = 1;
  const auto close = [&] {
    if (open.count >= 2) streams.push_back(open);
    open = PartitionStream{};
    members.clear();
  };
  for (int32_t i = 0; i < static_cast<int32_t>(instructions.size()); ++i) {
    const Instruction& in = instructions[i];
    const int64_t partitions = streamPartitions(program, in, rows_independent[i] != 0);
    const bool joins = partitions > 0 && open.count > 0 && !branched_to[i] && partitions == open.partitions &&
                       in.loops == instructions[open.first].loops && hbmApart(program, members, in);
    if (!joins) {
      close();
      if (partitions == 0) continue;
      open.first = i;
      open.partitions = partitions;
    }
    ++open.count;
    members.push_back(&in);
  }
  close();
  return streams;
}

}  // namespace nki
