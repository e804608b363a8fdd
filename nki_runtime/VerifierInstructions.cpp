#include <algorithm>

#include "nki_runtime/Checker.h"

namespace nki {

void Checker::checkIndirect(int i, const Instruction& in) {
  const int dim = in.indirect_dim;
  if (in.inputs.size() != 2 || dim < 0 || dim >= in.dst.rank || dim >= in.inputs[0].rank) {
    fail(i, "an indirect DMA needs a source pattern, an index tile and an indirect axis of both");
    return;
  }
  const Access& index = in.inputs[1];
  requireMemory(i, index, "the index tile", {Memory::kSbuf});
  const Dtype type = tensor(index).dtype;
  if (type != Dtype::kInt32 && type != Dtype::kUInt32) fail(i, "the index tile is ", name(type), "; int32 or uint32");
  const Access& dense = in.indirect_destination ? in.inputs[0] : in.dst;
  const Access& row = in.indirect_destination ? in.dst : in.inputs[0];
  if (index.elements() != dense.sizes[dim]) {
    fail(i, "the index tile holds ", index.elements(), " indices for ", dense.sizes[dim], " rows along axis ", dim);
  }
  if (row.sizes[dim] != 1 || dense.elements() != row.elements() * dense.sizes[dim]) {
    fail(i, "src and dst hold different numbers of elements");
  }
}

void Checker::checkPartitionReduce(int i, const Instruction& in) {
  const Access& data = in.inputs[0];
  bool one_partition = in.dst.rank == data.rank && in.dst.sizes[0] == 1;
  for (int a = 1; one_partition && a < data.rank; ++a) one_partition = in.dst.sizes[a] == data.sizes[a];
  if (!one_partition) fail(i, "dst must be one partition with the data's free shape");
  if (in.op0 != AluOp::kAdd && in.op0 != AluOp::kMaximum && in.op0 != AluOp::kMinimum) {
    fail(i, "reduces partitions with add, maximum or minimum only");
  }
}

void Checker::checkStreamShuffle(int i, const Instruction& in) {
  const Access& src = in.inputs[0];
  if (in.coefficients.size() != 32) {
    fail(i, "the shuffle mask has 32 entries, not ", in.coefficients.size());
    return;
  }
  if (tensor(src).dtype != tensor(in.dst).dtype) fail(i, "src and dst must have one dtype");
  if (perPartition(src) != perPartition(in.dst)) {
    fail(i, "src holds ", perPartition(src), " elements per partition and dst ", perPartition(in.dst));
  }
  for (int64_t p = 0; p < in.dst.sizes[0]; ++p) {
    const float from = in.coefficients[p % 32];
    if (from == 255.f) continue;
    const int64_t source = p / 32 * 32 + static_cast<int64_t>(from);
    if (from < 0 || from >= 32 || source >= src.sizes[0]) {
      fail(i, "dst partition ", p, " would copy src partition ", source, "; src has ", src.sizes[0],
           " and a mask entry is 0 to 31, or 255");
      return;
    }
  }
}

void Checker::checkGather(int i, const Instruction& in) {
  const Access &data = in.inputs[0], &indices = in.inputs[1];
  if (tensor(data).dtype != tensor(in.dst).dtype) fail(i, "dst must have the data's dtype");
  if (tensor(indices).dtype != Dtype::kUInt32) fail(i, "the indices must be uint32, not ", name(tensor(indices).dtype));
  if (data.sizes[0] != in.dst.sizes[0] || indices.sizes[0] != in.dst.sizes[0]) {
    fail(i, "data, indices and dst must span the same partitions");
  }
  if (perPartition(indices) != perPartition(in.dst)) {
    fail(i, "dst holds ", perPartition(in.dst), " elements per partition for ", perPartition(indices), " indices");
  }
}

void Checker::checkNonzeroWithCount(int i, const Instruction& in) {
  const Access& src = in.inputs[0];
  const Dtype from = tensor(src).dtype, to = tensor(in.dst).dtype;
  if (from != Dtype::kFloat32 && from != Dtype::kInt32) fail(i, "src must be float32 or int32, not ", name(from));
  if (to != Dtype::kInt32) fail(i, "dst must be int32, not ", name(to));
  if (src.sizes[0] != in.dst.sizes[0]) fail(i, "src spans ", src.sizes[0], " partitions, dst ", in.dst.sizes[0]);
  if (perPartition(in.dst) != perPartition(src) + 1) {
    fail(i, "dst holds one more element per partition than src (", perPartition(src) + 1, "), not ",
         perPartition(in.dst));
  }
  if (in.coefficients.size() != 2) fail(i, "takes an index offset and a padding value");
}

void Checker::checkSequenceBounds(int i, const Instruction& in) {
  const Access& ids = in.inputs[0];
  const Dtype from = tensor(ids).dtype, to = tensor(in.dst).dtype;
  if (from != Dtype::kFloat32 && from != Dtype::kInt32) {
    fail(i, "segment_ids must be float32 or int32, not ", name(from));
  }
  if (to != Dtype::kFloat32 && to != Dtype::kInt32) fail(i, "dst must be float32 or int32, not ", name(to));
  if (ids.sizes[0] != 1 || in.dst.sizes[0] != 1) {
    fail(i, "segment_ids and dst must span one partition, not ", ids.sizes[0], " and ", in.dst.sizes[0]);
  }
  if (perPartition(in.dst) != 2 * perPartition(ids)) {
    fail(i, "dst holds a start and an end per segment id (", 2 * perPartition(ids), " elements), not ",
         perPartition(in.dst));
  }
}

void Checker::checkLocalGather(int i, const Instruction& in) {
  const Access& src = in.inputs[0];
  const Access& index = in.inputs[1];
  if (tensor(index).dtype != Dtype::kUInt16) fail(i, "the indices must be uint16, not ", name(tensor(index).dtype));
  if (tensor(src).dtype != tensor(in.dst).dtype) {
    fail(i, "src_buffer and dst must have one dtype (", name(tensor(src).dtype), " and ", name(tensor(in.dst).dtype),
         "): local_gather does not convert");
  }
  if (src.sizes[0] != index.sizes[0] || in.dst.sizes[0] != src.sizes[0] || src.sizes[0] % 16) {
    fail(i, "src_buffer, index and dst must span the same partitions, a multiple of 16 (one GpSimd core each), "
            "not ", src.sizes[0], ", ", index.sizes[0], " and ", in.dst.sizes[0]);
  }
  if (in.coefficients.size() != 2) {
    fail(i, "takes the elements per index and the valid indices per core");
    return;
  }
  const auto per_index = static_cast<int64_t>(in.coefficients[0]);
  const auto valid = static_cast<int64_t>(in.coefficients[1]);
  if (per_index < 1 || per_index > 32 || (per_index & (per_index - 1))) {
    fail(i, "num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, not ", per_index);
  }
  if (valid < 1 || valid > 16 * perPartition(index) || valid > 4096) {
    fail(i, "num_valid_indices must be 1 to ", std::min<int64_t>(4096, 16 * perPartition(index)),
         " (the indices a core's 16 partitions hold, at most 4096), not ", valid);
  }
  if (perPartition(in.dst) != valid * per_index) {
    fail(i, "dst holds ", perPartition(in.dst), " elements per partition for ", valid, " indices of ", per_index,
         " elements (", valid * per_index, ")");
  }
}

bool Checker::checkSummary(int i, const Instruction& in) {
  int64_t values = 0, fewest = 1, most = 0;  // most 0: no limit
  switch (in.opcode) {
    case Opcode::kMax8:
    case Opcode::kFindIndex8:
      values = 8, fewest = 8, most = 16384;
      break;
    case Opcode::kMatchReplace8:  // the data with eight of its values replaced
      values = in.inputs.empty() ? 0 : perPartition(in.inputs[0]), fewest = 1, most = 16384;
      break;
    case Opcode::kBnStats:
      values = 6, most = 512;  // nl.tile_size.bn_stats_fmax
      break;
    case Opcode::kBnAggr:
      values = 2;
      break;
    default:
      return false;
  }
  if (perPartition(in.dst) != values) {
    fail(i, "dst holds ", values, " values per partition, not ", perPartition(in.dst));
  }
  for (const Access& input : in.inputs) {
    if (input.sizes[0] != in.dst.sizes[0]) fail(i, "an input spans ", input.sizes[0], " partitions, dst ", in.dst.sizes[0]);
  }
  const int64_t n = perPartition(in.inputs[0]);
  if (n < fewest || (most > 0 && n > most)) {
    fail(i, "reads ", n, " elements per partition; it takes ", fewest, " to ", most > 0 ? most : n);
  }
  if (in.opcode == Opcode::kBnAggr && n % 3 != 0) {
    fail(i, "reads (count, mean, variance * count) triples: ", n, " elements per partition is not a multiple of 3");
  }
  if (in.opcode == Opcode::kFindIndex8 || in.opcode == Opcode::kMatchReplace8) {
    if (perPartition(in.inputs[1]) != 8) fail(i, "vals holds 8 values per partition, not ", perPartition(in.inputs[1]));
  }
  if (in.opcode == Opcode::kFindIndex8) {
    const Dtype d = tensor(in.dst).dtype;
    if (d != Dtype::kUInt32 && d != Dtype::kUInt16) fail(i, "writes indices: dst must be uint32 or uint16, not ", name(d));
  }
  return true;
}

bool Checker::checkTileProduct(int i, const Instruction& in, std::size_t inputs, std::string_view layout) {
  if (in.inputs.size() != inputs || in.dst.rank != 2 || in.inputs[0].rank != 2 || in.inputs[1].rank != 2) {
    fail(i, layout);
    return false;
  }
  const Access &stationary = in.inputs[0], &moving = in.inputs[1];
  requireMemory(i, stationary, "stationary", {Memory::kSbuf});
  requireMemory(i, moving, "moving", {Memory::kSbuf});
  requireMemory(i, in.dst, "dst", {Memory::kPsum});
  if (stationary.sizes[1] > limits_.stationary_free) {
    fail(i, "stationary free size ", stationary.sizes[1], " exceeds ", limits_.stationary_free,
         " (nl.tile_size.gemm_stationary_fmax)");
  }
  if (moving.sizes[1] > limits_.moving_free) {
    fail(i, "moving free size ", moving.sizes[1], " exceeds ", limits_.moving_free,
         " (nl.tile_size.gemm_moving_fmax)");
  }
  if (in.dst.sizes[0] != stationary.sizes[1] || in.dst.sizes[1] != moving.sizes[1]) {
    fail(i, "dst is [", in.dst.sizes[0], ", ", in.dst.sizes[1], "], the product is [", stationary.sizes[1], ", ",
         moving.sizes[1], "]");
  }
  const Dtype d = tensor(in.dst).dtype;
  if (d != Dtype::kFloat32 && d != Dtype::kBFloat16) {
    fail(i, "accumulates in fp32: dst in PSUM must be float32 (or bfloat16), not ", name(d));
  }
  return true;
}

void Checker::checkMatmul(int i, const Instruction& in) {
  if (!checkTileProduct(i, in, 2, "takes [K, M] stationary and [K, N] moving tiles and writes [M, N]")) return;
  const Access &stationary = in.inputs[0], &moving = in.inputs[1];
  if (stationary.sizes[0] != moving.sizes[0]) {
    fail(i, "the contraction (partition) sizes differ: stationary ", stationary.sizes[0], ", moving ",
         moving.sizes[0]);
  }
  const Dtype s = tensor(stationary).dtype, m = tensor(moving).dtype;
  if (!isFloat(s) || !isFloat(m)) {
    fail(i, "the Tensor engine multiplies floating-point tiles, not ", name(isFloat(s) ? m : s));
  } else if (s != m && !(isFp8(s) && isFp8(m))) {
    fail(i, "stationary is ", name(s), " and moving ", name(m), "; both must have one dtype (or both fp8)");
  }
}

void Checker::checkTranspose(int i, const Instruction& in) {
  const Access& src = in.inputs.empty() ? in.dst : in.inputs[0];
  if (in.inputs.size() != 1 || src.rank != 2 || in.dst.rank != 2 || in.dst.sizes[0] != src.sizes[1] ||
      in.dst.sizes[1] != src.sizes[0]) {
    fail(i, "writes the [F, P] transpose of a [P, F] tile");
    return;
  }
  if (in.engine == Engine::kTensor) {
    requireMemory(i, src, "src", {Memory::kSbuf});
    requireMemory(i, in.dst, "dst", {Memory::kPsum});
    if (src.sizes[1] > limits_.partitions) {
      fail(i, "on the Tensor engine the free size ", src.sizes[1], " becomes partitions: at most ",
           limits_.partitions);
    }
  } else {
    if (src.sizes[0] > 32 || src.sizes[1] > 32) {
      fail(i, "on the Vector engine a transpose is at most 32x32, not ", src.sizes[0], "x", src.sizes[1]);
    }
  }
  if (tensor(src).dtype != tensor(in.dst).dtype) fail(i, "dst must have src's dtype");
}

}  // namespace nki
