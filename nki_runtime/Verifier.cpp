#include "nki_runtime/Verifier.h"

#include <algorithm>
#include <map>

#include "nki_runtime/IntegerAlu.h"
#include "nki_runtime/Checker.h"

namespace nki {

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
      "sequence_bounds", "local_gather", "quantize_mx", "quantize_mx", "nc_matmul_mx", "dma_compute", "loop_begin", "loop_end",
      "scalar_alu", "branch", "collective", "tensor indirection (gather)", "tensor indirection (scatter)"};
  return kNames[static_cast<int>(opcode)];
}

std::string_view engineName(Engine engine) {
  static constexpr std::string_view kNames[] = {"DMA", "Tensor", "Vector", "Scalar", "GpSimd"};
  return kNames[static_cast<int>(engine)];
}

namespace {

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

}  // namespace

std::vector<Violation> Checker::run() {
  checkTensors();
  std::string control_error;
  loops_ = loopSpans(program_, &control_error);
  branchTargets(program_, &control_error);
  if (!control_error.empty()) fail(-1, control_error);
  for (std::size_t i = 0; i < program_.instructions.size(); ++i) checkInstruction(static_cast<int>(i));
  if (violations_.empty()) checkCapacity();
  if (violations_.empty()) checkAffineIterations();
  return std::move(violations_);
}

void Checker::checkAlias(const TensorInfo& alias) {
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

void Checker::checkTensors() {
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

bool Checker::checkAccess(int i, const Access& access, std::string_view role) {
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

void Checker::requireMemory(int i, const Access& access, std::string_view role, std::initializer_list<Memory> allowed) {
  const Memory memory = tensor(access).memory;
  if (std::find(allowed.begin(), allowed.end(), memory) != allowed.end()) return;
  std::ostringstream names;
  for (Memory m : allowed) names << (names.tellp() > 0 ? " or " : "") << memoryName(m);
  fail(i, "the ", engineName(program_.instructions[i].engine), " engine cannot ",
       role == "dst" ? "write " : "read ", memoryName(memory), " ('", tensor(access).name, "' as ", role,
       "); it must be ", names.str());
}

void Checker::requireSameShape(int i, const Access& a, const Access& b, std::string_view role) {
  bool same = a.rank == b.rank;
  for (int x = 0; same && x < a.rank; ++x) same = a.sizes[x] == b.sizes[x];
  if (!same) fail(i, role, " has a shape that differs from dst's");
}

// int64 data (SDK 2.33+) is moved by DMA to the same dtype and read and written by the sequencers' scalars;
// no engine computes on it.
bool Checker::checkWideIntegers(int i, const Instruction& in) {
  bool wide = tensor(in.dst).dtype == Dtype::kInt64, all_wide = wide;
  for (const Access& input : in.inputs) {
    const bool w = tensor(input).dtype == Dtype::kInt64;
    wide = wide || w;
    all_wide = all_wide && w;
  }
  if (!wide || in.opcode == Opcode::kScalarAlu || in.opcode == Opcode::kDevicePrint) return true;
  const bool copy = in.opcode == Opcode::kDmaCopy && !in.accumulate;
  // A gather's index tile is int32/uint32; the data it moves must keep its dtype.
  const bool same = copy && tensor(in.inputs[0]).dtype == tensor(in.dst).dtype;
  if (same && (all_wide || in.indirect)) return true;
  fail(i, "int64 data is moved by dma_copy to int64 and read into scalars (nisa.scalar_load); no engine "
       "computes on it or converts it");
  return false;
}

// The bitvec operators (IntegerAlu.h) take integer tiles as bits, in tensor_tensor and tensor_scalar (and
// and, or, xor in tensor_reduce: AWS's table of legal reduction operators), and do not mix with arithmetic
// ones in one instruction.
bool Checker::checkBitvec(int i, const Instruction& in) {
  if (!isBitvec(in.op0) && !isBitvec(in.op1)) return true;
  const bool reduces = in.op0 == AluOp::kBitwiseAnd || in.op0 == AluOp::kBitwiseOr || in.op0 == AluOp::kBitwiseXor;
  const bool takes = in.opcode == Opcode::kTensorTensor || in.opcode == Opcode::kTensorScalar ||
                     (in.opcode == Opcode::kTensorReduce && reduces && !in.negate);
  const auto plain = [](AluOp op) { return op == AluOp::kBypass || isBitvec(op); };
  bool integers = !isFloat(tensor(in.dst).dtype) && !isPacked(tensor(in.dst).dtype);
  for (const Access& input : in.inputs) {
    integers = integers && !isFloat(tensor(input).dtype) && !isPacked(tensor(input).dtype);
  }
  if (!takes || !plain(in.op0) || !plain(in.op1) || !integers) {
    fail(i, "bitvec operators (bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift, invert) take ",
         "integer tiles in tensor_tensor and tensor_scalar, without arithmetic operators beside them (and ",
         "bitwise_and, bitwise_or and bitwise_xor in tensor_reduce, without negate)");
    return false;
  }
  return true;
}

void Checker::checkInstruction(int i) {
  const Instruction& in = program_.instructions[i];
  if (!checkAccess(i, in.dst, "dst")) return;
  for (std::size_t k = 0; k < in.inputs.size(); ++k) {
    if (!checkAccess(i, in.inputs[k], "input " + std::to_string(k))) return;
  }
  if (!checkPacked(i, in) || !checkWideIntegers(i, in) || !checkBitvec(i, in)) return;
  if (in.opcode == Opcode::kDevicePrint) return;  // reads any memory, writes nothing
  const bool dma = in.engine == Engine::kDma;
  // Collectives move data through the DMA rings (the collective engines drive them).
  if (dma != (in.opcode == Opcode::kDmaCopy || in.opcode == Opcode::kDmaCompute || in.opcode == Opcode::kCollective)) {
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
    case Opcode::kCollective:
      return checkCollective(i, in);
    case Opcode::kLoopBegin:
    case Opcode::kLoopEnd:
      return checkLoop(i, in);
    case Opcode::kScalarAlu:
      return checkScalarAlu(i, in);
    case Opcode::kBranch:
      return checkBranch(i, in);
    case Opcode::kMatmul:
      return checkMatmul(i, in);
    case Opcode::kMatmulMx:
      return checkMatmulMx(i, in);
    case Opcode::kQuantizeMxScales:
    case Opcode::kQuantizeMx:
      return checkQuantizeMx(i, in);
    case Opcode::kTranspose:
      return checkTranspose(i, in);
    case Opcode::kColumnGather:
    case Opcode::kColumnScatter:
      return checkColumnIndirection(i, in);
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

std::pair<int64_t, int64_t> Checker::blocksReached(const Access& access, const TensorInfo& info) {
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

void Checker::checkCapacity() {
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
    // A staged indirect operand is the hardware reading its data's columns in place.
    if (program_.tensors[t].memory == Memory::kHbm || program_.tensors[t].staging) continue;
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

void Checker::checkAffineIterations() {
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

std::vector<Violation> verify(const Program& program, const CoreLimits& limits) {
  return Checker(program, limits).run();
}

}  // namespace nki
