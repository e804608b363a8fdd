#include "nki_runtime/Verifier.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string_view>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/Microscaling.h"

namespace nki {
namespace {

std::string_view memoryName(Memory memory) {
  switch (memory) {
    case Memory::kHbm:
      return "HBM";
    case Memory::kSbuf:
      return "SBUF";
    case Memory::kPsum:
      return "PSUM";
  }
  return "?";
}

std::string_view opcodeName(Opcode opcode) {
  static constexpr std::string_view kNames[] = {
      "dma_copy", "nc_matmul", "nc_transpose", "tensor_tensor", "tensor_scalar", "activation",
      "tensor_reduce", "tensor_copy", "memset", "iota", "tensor_tensor_scan", "select",
      "scalar_tensor_tensor", "max8", "nc_find_index8", "bn_stats", "bn_aggr", "tensor_partition_reduce",
      "affine_select", "nc_match_replace8", "range_select", "nc_stream_shuffle", "nonzero_with_count", "nc_n_gather",
      "rng", "rand2", "dropout", "rand_set_state", "rand_get_state", "set_rng_seed", "device_print",
      "sequence_bounds", "local_gather", "quantize_mx", "quantize_mx", "nc_matmul_mx", "dma_compute", "loop_begin", "loop_end"};
  return kNames[static_cast<int>(opcode)];
}

std::string_view engineName(Engine engine) {
  static constexpr std::string_view kNames[] = {"DMA", "Tensor", "Vector", "Scalar", "GpSimd"};
  return kNames[static_cast<int>(engine)];
}

bool isFp8(Dtype dtype) { return dtype == Dtype::kFloat8E4M3 || dtype == Dtype::kFloat8E5M2; }

// A view as a box in its tensor's row-major coordinates (per dimension: first
// index, last index, step), when each of its axes walks one dimension.
struct Box {
  std::vector<int64_t> first, last, step;
};

bool boxOf(const Access& access, const TensorInfo& tensor, Box& box) {
  const auto& shape = tensor.shape;
  const int dims = static_cast<int>(shape.size());
  std::vector<int64_t> strides(dims, 1);
  for (int d = dims - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  box.first.assign(dims, 0);
  box.step.assign(dims, 1);
  int64_t rest = access.offset;
  for (int d = 0; d < dims; ++d) {
    box.first[d] = rest / strides[d];
    rest %= strides[d];
  }
  box.last = box.first;
  std::vector<bool> used(dims, false);
  for (int a = 0; a < access.rank; ++a) {
    if (access.sizes[a] == 1) continue;
    const int64_t stride = access.strides[a];
    int d = 0;
    while (d < dims && (stride <= 0 || stride % strides[d] != 0)) ++d;
    if (d == dims || used[d]) return false;
    used[d] = true;
    box.step[d] = stride / strides[d];
    box.last[d] = box.first[d] + box.step[d] * (access.sizes[a] - 1);
    if (box.last[d] >= shape[d]) return false;
  }
  return true;
}

// Whether two views of one tensor may share an element (exact for boxes, else by their extents).
bool mayOverlap(const Access& a, const Access& b, const TensorInfo& tensor) {
  Box x, y;
  if (!boxOf(a, tensor, x) || !boxOf(b, tensor, y)) return true;
  for (std::size_t d = 0; d < x.first.size(); ++d) {
    if (x.last[d] < y.first[d] || y.last[d] < x.first[d]) return false;
    if (x.step[d] == y.step[d] && x.step[d] > 1 && (x.first[d] - y.first[d]) % x.step[d] != 0) return false;
  }
  return true;
}

class Checker {
 public:
  Checker(const Program& program, const CoreLimits& limits) : program_(program), limits_(limits) {}

  std::vector<Violation> run() {
    checkTensors();
    std::string loop_error;
    loops_ = loopSpans(program_, &loop_error);
    if (!loop_error.empty()) fail(-1, loop_error);
    for (std::size_t i = 0; i < program_.instructions.size(); ++i) checkInstruction(static_cast<int>(i));
    if (violations_.empty()) checkCapacity();
    if (violations_.empty()) checkAffineIterations();
    return std::move(violations_);
  }

 private:
  template <typename... Parts>
  void fail(int instruction, const Parts&... parts) {
    std::ostringstream text;
    if (instruction >= 0) text << opcodeName(program_.instructions[instruction].opcode) << ": ";
    (text << ... << parts);
    const int line = instruction >= 0 ? program_.instructions[instruction].line : 0;
    violations_.push_back({instruction, line, text.str()});
  }

  const TensorInfo& tensor(const Access& access) const { return program_.tensors[access.tensor]; }

  // An alias (.ap(dtype=...)) holds exactly its owner's bytes: all of them for HBM, each partition's on chip.
  void checkAlias(const TensorInfo& alias) {
    const TensorInfo& owner = program_.tensors[alias.alias_of];
    const auto bytes = [](const TensorInfo& info, int64_t elements) {
      return elements * static_cast<int64_t>(byteSize(info.dtype));
    };
    const bool on_chip = owner.memory != Memory::kHbm;
    const bool same = alias.memory == owner.memory && owner.alias_of < 0 && owner.blocks == 1 &&
                      (on_chip ? alias.shape[0] == owner.shape[0] &&
                                     bytes(alias, alias.partitionElements()) == bytes(owner, owner.partitionElements())
                               : bytes(alias, alias.elements()) == bytes(owner, owner.elements()));
    if (!same) fail(-1, "'", alias.name, "' is not the bytes of '", owner.name, "' seen as ", name(alias.dtype));
  }

  void checkTensors() {
    for (std::size_t t = 0; t < program_.tensors.size(); ++t) {
      const TensorInfo& info = program_.tensors[t];
      if (info.alias_of >= 0) {
        if (info.alias_of >= static_cast<int32_t>(program_.tensors.size())) {
          fail(-1, "'", info.name, "' is an alias of no tensor");
          continue;
        }
        checkAlias(info);
      }
      if (info.memory == Memory::kHbm) continue;
      if (info.shape.empty() || info.shape[0] > limits_.partitions) {
        fail(-1, memoryName(info.memory), " tensor '", info.name, "' has ", info.shape.empty() ? 0 : info.shape[0],
             " partitions; ", limits_.name, " has ", limits_.partitions, " (nl.tile_size.pmax)");
      }
      // Each block of a [blocks, par_dim, free] tensor is a tile of its own.
      const int64_t bytes = info.partitionElements() * static_cast<int64_t>(byteSize(info.dtype)) / info.blocks;
      if (info.memory == Memory::kPsum && bytes > limits_.psum_bank_bytes) {
        fail(-1, "PSUM tile '", info.name, "' holds ", bytes, " bytes per partition; a PSUM tile is at most one ",
             limits_.psum_bank_bytes, "-byte bank (", limits_.psum_bank_bytes / 4, " fp32, nl.tile_size.psum_fmax)");
      }
    }
  }

  // Bounds, and for on-chip memory: the view's axis 0 walks partitions, the others stay in one (except for
  // the DMA engines, which address SBUF byte by byte: a DMA transpose reads across partitions).
  bool checkAccess(int i, const Access& access, std::string_view role) {
    if (access.tensor < 0 || access.tensor >= static_cast<int>(program_.tensors.size()) || access.rank < 1) {
      fail(i, role, " is not a view of a tensor of the kernel");
      return false;
    }
    const TensorInfo& info = tensor(access);
    for (int a = 0; a < access.rank; ++a) {
      if (access.sizes[a] < 1) {
        fail(i, role, " of '", info.name, "' has an empty axis ", a);
        return false;
      }
    }
    if (access.lowest() < 0 || access.highest() > info.elements()) {
      fail(i, role, " reads or writes outside '", info.name, "' (", info.elements(), " elements): elements ",
           access.lowest(), " to ", access.highest() - 1);
      return false;
    }
    if (info.memory == Memory::kHbm) return true;
    if (i >= 0 && program_.instructions[i].engine == Engine::kDma) return true;
    const int64_t per_partition = info.partitionElements();
    if (access.sizes[0] > limits_.partitions) {
      fail(i, role, " of '", info.name, "' spans ", access.sizes[0], " partitions; at most ", limits_.partitions,
           " (nl.tile_size.pmax)");
      return false;
    }
    int64_t free_low = access.offset % per_partition, free_high = free_low;
    for (int a = 1; a < access.rank; ++a) {
      const int64_t reach = (access.sizes[a] - 1) * access.strides[a];
      (reach < 0 ? free_low : free_high) += reach;
    }
    const bool partition_axis_ok = access.sizes[0] == 1 || access.strides[0] % per_partition == 0;
    if (!partition_axis_ok || free_low < 0 || free_high >= per_partition) {
      fail(i, role, " of '", info.name, "' mixes partitions within a free axis; on-chip tiles are [partition, free...]",
           " (move data across partitions with nc_transpose or DMA)");
      return false;
    }
    if (access.strides[0] == 0 && access.sizes[0] > 1 && program_.instructions[i].engine != Engine::kDma) {
      fail(i, role, " of '", info.name, "' broadcasts along the partition axis, which only DMA can do");
      return false;
    }
    return true;
  }

  void requireMemory(int i, const Access& access, std::string_view role, std::initializer_list<Memory> allowed) {
    const Memory memory = tensor(access).memory;
    if (std::find(allowed.begin(), allowed.end(), memory) != allowed.end()) return;
    std::ostringstream names;
    for (Memory m : allowed) names << (names.tellp() > 0 ? " or " : "") << memoryName(m);
    fail(i, "the ", engineName(program_.instructions[i].engine), " engine cannot ",
         role == "dst" ? "write " : "read ", memoryName(memory), " ('", tensor(access).name, "' as ", role,
         "); it must be ", names.str());
  }

  void requireSameShape(int i, const Access& a, const Access& b, std::string_view role) {
    bool same = a.rank == b.rank;
    for (int x = 0; same && x < a.rank; ++x) same = a.sizes[x] == b.sizes[x];
    if (!same) fail(i, role, " has a shape that differs from dst's");
  }

  // An indirect DMA: inputs[0] is one row of the source pattern, inputs[1] the index tile (SBUF, 32-bit
  // integers), one index for each row of dst along the indirect axis; for a scatter dst is the one-row
  // pattern and the index tile has one index for each row of the source.
  void checkIndirect(int i, const Instruction& in) {
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

  void checkInstruction(int i) {
    const Instruction& in = program_.instructions[i];
    if (!checkAccess(i, in.dst, "dst")) return;
    for (std::size_t k = 0; k < in.inputs.size(); ++k) {
      if (!checkAccess(i, in.inputs[k], "input " + std::to_string(k))) return;
    }
    if (!checkPacked(i, in)) return;
    if (in.opcode == Opcode::kDevicePrint) return;  // reads any memory, writes nothing
    const bool dma = in.engine == Engine::kDma;
    if (dma != (in.opcode == Opcode::kDmaCopy || in.opcode == Opcode::kDmaCompute)) {
      fail(i, "runs on the ", engineName(in.engine), " engine, which does not execute it");
      return;
    }
    const std::initializer_list<Memory> dma_memories = {Memory::kHbm, Memory::kSbuf};
    // Named lists: a braced list's array lives as long as the list it initialises, not past a ?: of two.
    const std::initializer_list<Memory> sbuf_only = {Memory::kSbuf};
    const std::initializer_list<Memory> sbuf_or_psum = {Memory::kSbuf, Memory::kPsum};
    const std::initializer_list<Memory>& on_chip = in.engine == Engine::kGpSimd ? sbuf_only : sbuf_or_psum;
    switch (in.opcode) {
      case Opcode::kDmaCopy:
        requireMemory(i, in.dst, "dst", dma_memories);
        requireMemory(i, in.inputs[0], "src", dma_memories);
        // A src and dst of different dtypes are cast by the DMA engines (nki.isa.dma_copy: "a cast will
        // happen if the src and dst have different dtype"; AWS's matmul tutorial stores fp32 tiles into
        // bf16 HBM so).
        if (in.indirect) return checkIndirect(i, in);
        if (in.dst.elements() != in.inputs[0].elements()) fail(i, "src and dst hold different numbers of elements");
        return;
      case Opcode::kDmaCompute:
        requireMemory(i, in.dst, "dst", dma_memories);
        if (in.inputs.empty() || in.inputs.size() > 16) fail(i, "takes 1 to 16 sources, not ", in.inputs.size());
        for (const Access& input : in.inputs) {
          requireMemory(i, input, "src", dma_memories);
          requireSameShape(i, input, in.dst, "a source");
        }
        return;
      case Opcode::kLoopBegin:
      case Opcode::kLoopEnd:
        return checkLoop(i, in);
      case Opcode::kMatmul:
        return checkMatmul(i, in);
      case Opcode::kMatmulMx:
        return checkMatmulMx(i, in);
      case Opcode::kQuantizeMxScales:
      case Opcode::kQuantizeMx:
        return checkQuantizeMx(i, in);
      case Opcode::kTranspose:
        return checkTranspose(i, in);
      default:
        break;
    }
    requireMemory(i, in.dst, "dst", on_chip);
    for (const Access& input : in.inputs) requireMemory(i, input, "input", on_chip);
    if (in.opcode == Opcode::kTensorReduce) {
      const Access& data = in.inputs[0];
      bool kept = in.dst.rank == data.rank - in.reduce_axes && in.reduce_axes >= 1;
      for (int a = 0; kept && a < in.dst.rank; ++a) kept = in.dst.sizes[a] == data.sizes[a];
      if (!kept) fail(i, "dst must have the data's shape without its reduced free axes");
      if (in.reduce_axes >= data.rank) fail(i, "cannot reduce the partition axis (use tensor_partition_reduce)");
      return;
    }
    if (in.opcode == Opcode::kPartitionReduce) return checkPartitionReduce(i, in);
    if (in.opcode == Opcode::kStreamShuffle) return checkStreamShuffle(i, in);
    if (in.opcode == Opcode::kNonzeroWithCount) return checkNonzeroWithCount(i, in);
    if (in.opcode == Opcode::kSequenceBounds) return checkSequenceBounds(i, in);
    if (in.opcode == Opcode::kLocalGather) return checkLocalGather(i, in);
    if (in.opcode == Opcode::kGather) return checkGather(i, in);
    if (in.opcode == Opcode::kRangeSelect && (in.dst.rank != 2 || in.coefficients.size() != 2)) {
      fail(i, "selects along the free axis of a [partitions, free] tile, from a start and a fill value");
    }
    if ((in.opcode == Opcode::kIota || in.opcode == Opcode::kAffineSelect) &&
        in.coefficients.size() != static_cast<std::size_t>(in.dst.rank) + 1) {
      fail(i, "an affine pattern needs an offset and one step per axis (", in.dst.rank, "), got ",
           in.coefficients.size(), " values");
    }
    if (checkSummary(i, in)) return;
    if (in.opcode == Opcode::kScalarTensorTensor && tensor(in.inputs[0]).memory == Memory::kPsum &&
        tensor(in.inputs[1]).memory == Memory::kPsum) {
      fail(i, "data and the tensor operand cannot both be in PSUM");
    }
    for (std::size_t k = 0; k < in.inputs.size(); ++k) requireSameShape(i, in.inputs[k], in.dst, "an input");
  }

  static int64_t perPartition(const Access& access) { return access.elements() / access.sizes[0]; }

  void checkPartitionReduce(int i, const Instruction& in) {
    const Access& data = in.inputs[0];
    bool one_partition = in.dst.rank == data.rank && in.dst.sizes[0] == 1;
    for (int a = 1; one_partition && a < data.rank; ++a) one_partition = in.dst.sizes[a] == data.sizes[a];
    if (!one_partition) fail(i, "dst must be one partition with the data's free shape");
    if (in.op0 != AluOp::kAdd && in.op0 != AluOp::kMaximum && in.op0 != AluOp::kMinimum) {
      fail(i, "reduces partitions with add, maximum or minimum only");
    }
  }

  // Within each quadrant of 32 partitions, dst partition i copies src partition mask[i] (255: keeps its own).
  void checkStreamShuffle(int i, const Instruction& in) {
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

  void checkGather(int i, const Instruction& in) {
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

  void checkNonzeroWithCount(int i, const Instruction& in) {
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

  void checkSequenceBounds(int i, const Instruction& in) {
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

  // AWS's limits of nki.isa.local_gather: whole GpSimd cores (16 partitions each), uint16 indices, no
  // conversion, 1 to 32 elements per index (powers of two), at most 4096 indices per core.
  void checkLocalGather(int i, const Instruction& in) {
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

  // Instructions that summarise each partition's data in a fixed number of values: false for the others.
  bool checkSummary(int i, const Instruction& in) {
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

  // What nc_matmul and nc_matmul_mx share: stationary [K, M] and moving [K, N] in SBUF (the first two of
  // `inputs` inputs), dst [M, N] in PSUM, float32 or bfloat16, M and N within the Tensor engine's limits.
  // False when the tiles are not there to check further.
  bool checkTileProduct(int i, const Instruction& in, std::size_t inputs, std::string_view layout) {
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

  void checkMatmul(int i, const Instruction& in) {
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

  // Packed MX data is written by quantize_mx, read by nc_matmul_mx and moved unconverted by DMA and
  // tensor_copy; no other instruction can take it.
  bool checkPacked(int i, const Instruction& in) {
    const bool moves = in.opcode == Opcode::kDmaCopy || in.opcode == Opcode::kTensorCopy;
    const auto allowed = [&](const Access& access, int input) {
      const Dtype type = tensor(access).dtype;
      if (!isPacked(type)) return true;
      if (moves) return !in.inputs.empty() && tensor(in.inputs[0]).dtype == tensor(in.dst).dtype;
      if (in.opcode == Opcode::kQuantizeMx) return input < 0 && type != Dtype::kFloat4E2M1x4;
      return in.opcode == Opcode::kMatmulMx && (input == 0 || input == 1);
    };
    bool ok = allowed(in.dst, -1);
    for (std::size_t k = 0; ok && k < in.inputs.size(); ++k) ok = allowed(in.inputs[k], static_cast<int>(k));
    if (!ok) {
      fail(i, "packed MX data (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4) is written by quantize_mx ",
           "(fp8 only), read by nc_matmul_mx, and copied by dma_copy and tensor_copy to the same dtype only");
    }
    return ok;
  }

  bool requireMicroscaling(int i) {
    if (limits_.microscaling) return true;
    fail(i, "runs on NeuronCore-v4 (trn3) and newer; the kernel is checked for ", limits_.name,
         " (nki.jit(platform_target=\"trn3\"))");
    return false;
  }

  // The scales of a packed [K, F] tile: [K / 8, F] up to 32 partitions, else as tall as the data with
  // each quadrant's scales in its first four partitions (Microscaling.h).
  void checkScales(int i, const Access& scales, const Access& data, std::string_view role) {
    requireMemory(i, scales, role, {Memory::kSbuf});
    if (tensor(scales).dtype != Dtype::kUInt8) fail(i, role, " must be uint8, not ", name(tensor(scales).dtype));
    const int64_t K = data.sizes[0];
    const int64_t rows = K <= 32 ? K / 8 : scaleRow(K / 8 - 1, K) + 1;
    const bool tall_enough = K <= 32 ? scales.sizes[0] == rows : scales.sizes[0] >= rows;
    if (scales.rank != 2 || !tall_enough || scales.sizes[1] != data.sizes[1]) {
      fail(i, role, " must be [", rows, K <= 32 ? "" : "+", ", ", data.sizes[1], "] for data of ", K,
           " partitions (one scale per 8 partitions and packed element; above 32 partitions, each quadrant's ",
           "scales in its first 4 partitions)");
    }
  }

  // A device loop reads and writes registers: single int32 elements. A counted loop's begin reads its
  // bounds, its end nothing; a while loop's begin and end read its condition.
  void checkLoop(int i, const Instruction& in) {
    const bool counted = !in.coefficients.empty() && in.coefficients[0] > 0;
    const std::size_t expected = !counted ? 1 : in.opcode == Opcode::kLoopBegin ? 2 : 0;
    const auto is_register = [&](const Access& a) { return a.elements() == 1 && tensor(a).dtype == Dtype::kInt32; };
    bool ok = in.inputs.size() == expected && is_register(in.dst);
    for (const Access& input : in.inputs) ok = ok && is_register(input);
    if (!ok) fail(i, "a device loop's bounds, counter and condition are registers (one int32 each)");
  }

  static bool mxPartitions(int64_t partitions) { return partitions % 32 == 0 && partitions <= 128; }

  void checkMatmulMx(int i, const Instruction& in) {
    if (!requireMicroscaling(i)) return;
    if (!checkTileProduct(i, in, 4, "takes packed [K, M] stationary and [K, N] moving tiles with their scales "
                                    "and writes [M, N]")) {
      return;
    }
    const Access &stationary = in.inputs[0], &moving = in.inputs[1];
    for (const Access* data : {&stationary, &moving}) {
      if (!isPacked(tensor(*data).dtype)) {
        fail(i, "multiplies packed MX tiles (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4), not ",
             name(tensor(*data).dtype));
      }
    }
    if (stationary.sizes[0] != moving.sizes[0] || !mxPartitions(stationary.sizes[0])) {
      fail(i, "stationary and moving must span the same partitions, a multiple of 32 up to 128, not ",
           stationary.sizes[0], " and ", moving.sizes[0]);
      return;
    }
    checkScales(i, in.inputs[2], stationary, "stationary_scale");
    checkScales(i, in.inputs[3], moving, "moving_scale");
  }

  void checkQuantizeMx(int i, const Instruction& in) {
    if (!requireMicroscaling(i)) return;
    const bool scales = in.opcode == Opcode::kQuantizeMxScales;
    if (in.inputs.size() != (scales ? 1u : 2u) || in.dst.rank != 2 || in.inputs[0].rank != 2) {
      fail(i, "quantizes a [P, F] tile into a [P, F / 4] packed tile and its scales");
      return;
    }
    const Access& src = in.inputs[0];
    requireMemory(i, src, "src", {Memory::kSbuf});
    requireMemory(i, in.dst, scales ? "dst_scale" : "dst", {Memory::kSbuf});
    const Dtype from = tensor(src).dtype;
    if (from != Dtype::kBFloat16 && from != Dtype::kFloat16) fail(i, "src must be bfloat16 or float16, not ", name(from));
    if (!mxPartitions(src.sizes[0]) || src.sizes[1] % 4 != 0) {
      fail(i, "src must span a multiple of 32 partitions up to 128 and a multiple of 4 elements, not [",
           src.sizes[0], ", ", src.sizes[1], "]");
      return;
    }
    Access packed = src;  // the shape of the packed data
    packed.sizes[1] = src.sizes[1] / 4;
    if (scales) {
      if (in.coefficients.size() != 1) fail(i, "takes the packed type's largest exponent");
      return checkScales(i, in.dst, packed, "dst_scale");
    }
    const Dtype to = tensor(in.dst).dtype;
    if (to != Dtype::kFloat8E5M2x4 && to != Dtype::kFloat8E4M3x4) {
      fail(i, "dst must be float8_e5m2_x4 or float8_e4m3fn_x4, not ", name(to));
    }
    if (in.dst.sizes[0] != src.sizes[0] || in.dst.sizes[1] != packed.sizes[1]) {
      fail(i, "dst must be [", src.sizes[0], ", ", packed.sizes[1], "] (four values per packed element), not [",
           in.dst.sizes[0], ", ", in.dst.sizes[1], "]");
    }
    checkScales(i, in.inputs[1], packed, "dst_scale");
  }

  void checkTranspose(int i, const Instruction& in) {
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

  struct Span {
    int first = -1, last = -1;
  };

  // The blocks of a [blocks, par_dim, free] tensor an access reaches, first and last. Stored partition
  // first, a block is a run of partitionElements() / blocks elements within each partition.
  static std::pair<int64_t, int64_t> blocksReached(const Access& access, const TensorInfo& info) {
    if (info.blocks <= 1) return {0, 0};
    const int64_t per_partition = info.partitionElements(), per_block = per_partition / info.blocks;
    int64_t low = access.offset % per_partition, high = low;
    for (int a = 0; a < access.rank; ++a) {
      if (access.strides[a] % per_partition == 0) continue;  // walks partitions
      const int64_t reach = (access.sizes[a] - 1) * access.strides[a];
      (reach < 0 ? low : high) += reach;
    }
    return {std::max<int64_t>(0, low / per_block), std::min<int64_t>(info.blocks - 1, high / per_block)};
  }

  // Which on-chip tiles are alive at once, per SPMD instance: SBUF bytes per partition and PSUM banks. Each
  // block of a block tensor is a tile with a life of its own, as the compiler allocates them.
  void checkCapacity() {
    std::vector<std::vector<Span>> spans(program_.tensors.size());
    for (std::size_t t = 0; t < spans.size(); ++t) spans[t].resize(std::max<int64_t>(1, program_.tensors[t].blocks));
    const auto touch = [&](const Access& access, int i) {  // an alias's use is its owner's (no blocks)
      const auto [first, last] = blocksReached(access, program_.tensors[access.tensor]);
      for (int64_t block = first; block <= last; ++block) {
        Span& span = spans[ownerOf(program_, access.tensor)][block];
        if (span.first < 0) span.first = i;
        span.last = i;
      }
    };
    for (std::size_t i = 0; i < program_.instructions.size(); ++i) {
      const Instruction& in = program_.instructions[i];
      touch(in.dst, static_cast<int>(i));
      for (const Access& input : in.inputs) touch(input, static_cast<int>(i));
    }
    for (auto loop = loops_.rbegin(); loop != loops_.rend(); ++loop) {  // a body runs again: see Executor
      for (auto& blocks : spans) {
        for (Span& span : blocks) {
          if (span.first >= 0 && span.first < loop->begin && span.last >= loop->begin) {
            span.last = std::max(span.last, loop->end);
          }
        }
      }
    }
    std::map<int, std::vector<std::pair<int, int>>> changes;  // instruction -> (tensor, +1 born / -1 dies)
    for (std::size_t t = 0; t < spans.size(); ++t) {
      if (program_.tensors[t].memory == Memory::kHbm) continue;
      for (const Span& span : spans[t]) {
        if (span.first < 0) continue;
        changes[span.first].push_back({static_cast<int>(t), +1});
        changes[span.last + 1].push_back({static_cast<int>(t), -1});
      }
    }
    int64_t sbuf = 0;
    int banks = 0;
    for (const auto& [i, events] : changes) {
      for (const auto& [t, change] : events) {  // one block (the whole tensor if it has none)
        const TensorInfo& info = program_.tensors[t];
        const int64_t tile = info.partitionElements() * static_cast<int64_t>(byteSize(info.dtype)) / info.blocks;
        if (info.memory == Memory::kSbuf) {
          sbuf += change * tile;
        } else {  // a tile never straddles banks
          banks += change * static_cast<int>((tile + limits_.psum_bank_bytes - 1) / limits_.psum_bank_bytes);
        }
      }
      const int at = std::min<int>(i, static_cast<int>(program_.instructions.size()) - 1);
      if (sbuf > limits_.sbuf_partition_bytes) {
        fail(at, "the live SBUF tensors need ", sbuf, " bytes per partition; ", limits_.name, " has ",
             limits_.sbuf_partition_bytes);
        return;
      }
      if (banks > limits_.psum_banks) {
        fail(at, "the live PSUM tensors need ", banks, " banks; ", limits_.name, " has ", limits_.psum_banks,
             " per partition");
        return;
      }
    }
  }

  struct Touch {
    int instruction;
    int iteration;
    int64_t low, high;
    bool write;
    const Access* access;
  };

  // Iterations of an affine_range run in any order (or at once): one that
  // reads or overwrites what another wrote is a loop-carried dependency.
  // Accumulations (matmul into PSUM, `+=` reductions) commute and are allowed. The rows an indirect DMA
  // addresses are known only as it runs, so they are not checked here.
  void checkAffineIterations() {
    std::map<std::pair<int, int>, std::vector<Touch>> touches;  // (loop, tensor) -> touches
    for (std::size_t i = 0; i < program_.instructions.size(); ++i) {
      const Instruction& in = program_.instructions[i];
      if (in.loops < 0) continue;
      for (const LoopIteration& level : program_.loop_nests[in.loops]) {
        const Access* addressed = !in.indirect ? nullptr : in.indirect_destination ? &in.dst : &in.inputs[0];
        const auto add = [&](const Access& access, bool write) {  // in bytes of the memory's owner
          if (&access == addressed) return;
          const auto size = static_cast<int64_t>(byteSize(program_.tensors[access.tensor].dtype));
          touches[{level.loop, ownerOf(program_, access.tensor)}].push_back(
              {static_cast<int>(i), level.iteration, access.lowest() * size, access.highest() * size, write, &access});
        };
        if (!in.accumulate) add(in.dst, true);
        for (const Access& input : in.inputs) {
          if (!(in.accumulate && input.tensor == in.dst.tensor)) add(input, false);
        }
      }
    }
    for (auto& [key, list] : touches) {
      std::sort(list.begin(), list.end(), [](const Touch& a, const Touch& b) { return a.low < b.low; });
      for (std::size_t a = 0; a < list.size(); ++a) {
        for (std::size_t b = a + 1; b < list.size() && list[b].low < list[a].high; ++b) {
          const Touch &x = list[a], &y = list[b];
          if (x.iteration == y.iteration || !(x.write || y.write)) continue;
          const bool one_view_kind = x.access->tensor == y.access->tensor;
          if (one_view_kind && !mayOverlap(*x.access, *y.access, program_.tensors[x.access->tensor])) continue;
          const Touch& later = x.instruction > y.instruction ? x : y;
          fail(later.instruction, "iterations ", std::min(x.iteration, y.iteration), " and ",
               std::max(x.iteration, y.iteration), " of an affine_range both use '",
               program_.tensors[key.second].name, "' and one writes it: a loop-carried dependency ",
               "(use nl.sequential_range, or give each iteration its own tile)");
          return;
        }
      }
    }
  }

  const Program& program_;
  const CoreLimits& limits_;
  std::vector<Violation> violations_;
  std::vector<LoopSpan> loops_;
};

}  // namespace

std::vector<Violation> verify(const Program& program, const CoreLimits& limits) {
  return Checker(program, limits).run();
}

}  // namespace nki
