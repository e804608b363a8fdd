#include "nki_runtime/Executor.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <utility>

#include "nki_runtime/ControlFlow.h"
#include "nki_runtime/Instructions.h"
#include "nki_runtime/Parallel.h"

namespace nki {
namespace {

constexpr int64_t kAlignment = 64;
// A stream of fewer bytes runs on one thread; a larger one makes at least kStepsToShare steps.
constexpr int64_t kMinStreamParallelBytes = int64_t{64} << 10;
constexpr int64_t kStepsToShare = 8;
// A DMA into an HBM tensor of this size or more stores around the CPU's caches: the kernel's output is
// larger than what they would keep of it.
constexpr int64_t kBypassCachesBytes = int64_t{16} << 20;
// A partition stream takes this many bytes of its instructions' rows at a step: within a core's L2.
constexpr int64_t kStreamStepBytes = int64_t{1024} << 10;

int64_t rowBytes(const Program& program, const Access& access) {
  return access.sizes[access.rank - 1] * static_cast<int64_t>(byteSize(program.tensors[access.tensor].dtype));
}

// A DMA from on-chip memory into an HBM tensor of kBypassCachesBytes or more.
bool bypassesCaches(const Program& program, const Instruction& in) {
  const TensorInfo& target = program.tensors[in.dst.tensor];
  if (in.opcode != Opcode::kDmaCopy || target.memory != Memory::kHbm) return false;
  for (const Access& input : in.inputs) {
    if (program.tensors[input.tensor].memory == Memory::kHbm) return false;
  }
  return target.elements() * static_cast<int64_t>(byteSize(target.dtype)) >= kBypassCachesBytes;
}

bool usesGenerators(Opcode opcode) {
  switch (opcode) {
    case Opcode::kRandomBits:
    case Opcode::kRandomUniform:
    case Opcode::kDropout:
    case Opcode::kRandomSetState:
    case Opcode::kRandomGetState:
    case Opcode::kRandomSeed:
      return true;
    default:
      return false;
  }
}

}  // namespace

Executor::Executor(Program program) : program_(std::move(program)) {
  const auto& instructions = program_.instructions;
  std::string control_error;
  loopSpans(program_, &control_error);
  branchTargets(program_, &control_error);
  if (!control_error.empty()) throw std::invalid_argument("nki: kernel '" + program_.kernel + "': " + control_error);
  for (const Instruction& in : instructions) {
    rows_independent_.push_back(rowsIndependent(program_, in));
    bypass_caches_.push_back(bypassesCaches(program_, in));
    uses_random_ = uses_random_ || usesGenerators(in.opcode);
  }
  streams_ = planPartitionStreams(program_, rows_independent_);
  // A stream's instructions run interleaved: for lifetimes (so that no two of its tiles share arena
  // space) and sentinel fills, all of them happen at its first instruction.
  std::vector<int> time(instructions.size());
  for (std::size_t i = 0; i < instructions.size(); ++i) time[i] = static_cast<int>(i);
  stream_at_.assign(instructions.size(), -1);
  for (std::size_t s = 0; s < streams_.size(); ++s) {
    stream_at_[streams_[s].first] = static_cast<int32_t>(s);
    for (int32_t k = 0; k < streams_[s].count; ++k) time[streams_[s].first + k] = streams_[s].first;
  }
  const std::size_t count = program_.tensors.size();
  std::vector<int> first(count, -1), last(count, -1), first_instruction(count, -1);
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const auto touch = [&](const Access& access) {  // an alias's use is its owner's
      const int32_t t = ownerOf(program_, access.tensor);
      if (first[t] < 0) {
        first[t] = time[i];
        first_instruction[t] = static_cast<int>(i);
      }
      last[t] = time[i];
    };
    touch(instructions[i].dst);
    for (const Access& input : instructions[i].inputs) touch(input);
  }
  // A tensor that lives into a device loop's body lives through all of it: the body runs again. Inner
  // loops (later begins) first, so that an outer loop extends what an inner one did.
  const std::vector<LoopSpan> loops = loopSpans(program_);
  for (auto loop = loops.rbegin(); loop != loops.rend(); ++loop) {
    for (std::size_t t = 0; t < count; ++t) {
      if (first[t] >= 0 && first[t] < loop->begin && last[t] >= loop->begin) last[t] = std::max(last[t], loop->end);
    }
  }
  plans_.resize(count);
  fresh_before_.resize(instructions.size());
  born_at_.resize(instructions.size());
  for (std::size_t t = 0; t < count; ++t) {
    if (first_instruction[t] >= 0 && program_.tensors[t].argument < 0) born_at_[first_instruction[t]].push_back(t);
  }
  // Arena offsets by lifetime, first fit over the free ranges.
  std::vector<std::pair<int, int32_t>> events;  // (instruction * 2 + 1 for birth / * 2 + 2 after death, tensor)
  for (std::size_t t = 0; t < count; ++t) {
    if (first[t] < 0 || program_.tensors[t].argument >= 0) continue;
    events.push_back({first[t] * 2 + 1, static_cast<int32_t>(t)});
    events.push_back({last[t] * 2 + 2, static_cast<int32_t>(t)});
  }
  std::sort(events.begin(), events.end());
  std::vector<std::pair<int64_t, int64_t>> free_ranges;  // (offset, bytes), by offset
  for (const auto& [when, t] : events) {
    const TensorInfo& info = program_.tensors[t];
    const int64_t bytes = (info.elements() * static_cast<int64_t>(byteSize(info.dtype)) + kAlignment - 1) /
                          kAlignment * kAlignment;
    if (when % 2 == 1) {
      auto fit = std::find_if(free_ranges.begin(), free_ranges.end(), [&](auto& r) { return r.second >= bytes; });
      if (fit != free_ranges.end()) {
        plans_[t].offset = fit->first;
        fit->first += bytes;
        fit->second -= bytes;
        if (fit->second == 0) free_ranges.erase(fit);
      } else {
        plans_[t].offset = arena_bytes_;
        arena_bytes_ += bytes;
      }
      const Instruction& in = instructions[first_instruction[t]];
      bool overwritten = in.dst.tensor == t && !in.accumulate && in.dst.elements() == info.elements() &&
                         in.dst.lowest() == 0 && in.dst.highest() == info.elements();
      for (const Access& input : in.inputs) overwritten = overwritten && input.tensor != t;
      plans_[t].sentinel_first = !overwritten;
      if (!overwritten) fresh_before_[first[t]].push_back(t);
    } else {
      auto after = std::lower_bound(free_ranges.begin(), free_ranges.end(), std::make_pair(plans_[t].offset, 0L));
      after = free_ranges.insert(after, {plans_[t].offset, bytes});
      if (after + 1 != free_ranges.end() && after->first + after->second == (after + 1)->first) {
        after->second += (after + 1)->second;
        free_ranges.erase(after + 1);
      }
      if (after != free_ranges.begin() && (after - 1)->first + (after - 1)->second == after->first) {
        (after - 1)->second += after->second;
        free_ranges.erase(after);
      }
    }
  }
  for (std::size_t t = 0; t < count; ++t) {
    if (program_.tensors[t].alias_of >= 0) plans_[t].offset = plans_[program_.tensors[t].alias_of].offset;
  }
}

char* Executor::base(const std::vector<void*>& hbm, char* arena, int32_t tensor) const {
  const TensorInfo& info = program_.tensors[tensor];
  if (info.argument >= 0) return static_cast<char*>(hbm[info.argument]);
  return arena + plans_[tensor].offset;
}

void Executor::run(const std::vector<void*>& hbm, uint64_t seed, const Printer* printer,
                   const Communicator* communicator) const {
  if (static_cast<int32_t>(hbm.size()) != program_.arguments) {
    throw std::invalid_argument("nki: kernel '" + program_.kernel + "' takes " + std::to_string(program_.arguments) +
                                " HBM buffers, got " + std::to_string(hbm.size()));
  }
  thread_local std::vector<char> arena_storage;
  if (static_cast<int64_t>(arena_storage.size()) < arena_bytes_ + kAlignment) {
    arena_storage.resize(arena_bytes_ + kAlignment);
  }
  char* arena = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(arena_storage.data()) + kAlignment - 1) /
                                        kAlignment * kAlignment);
  const bool streams = !streams_.empty() && argumentsApart(hbm);
  std::unique_ptr<EngineGenerators> random = uses_random_ ? std::make_unique<EngineGenerators>(seed) : nullptr;
  const auto& instructions = program_.instructions;
  Sequencer sequencer(program_);
  const RegisterAt reg = [&](const Access& a) -> void* {
    return base(hbm, arena, a.tensor) + a.offset * static_cast<int64_t>(byteSize(program_.tensors[a.tensor].dtype));
  };
  for (int32_t i = 0; i < static_cast<int32_t>(instructions.size());) {
    for (int32_t t : fresh_before_[i]) {
      const TensorInfo& info = program_.tensors[t];
      fillSentinel(base(hbm, arena, t), info.elements() * byteSize(info.dtype), info.dtype);
    }
    const Instruction& in = instructions[i];
    if (Sequencer::runs(in.opcode)) {
      int32_t next = 0;
      try {
        next = sequencer.next(i, reg);
      } catch (const std::domain_error& error) {
        throw std::domain_error("kernel '" + program_.kernel + "', line " + std::to_string(in.line) + ": " +
                                error.what());
      }
      // What a skipped branch or loop body would have created reads as fresh memory after it.
      for (int32_t k = i + 1; k < next; ++k) {
        for (int32_t t : born_at_[k]) {
          const TensorInfo& info = program_.tensors[t];
          fillSentinel(base(hbm, arena, t), info.elements() * byteSize(info.dtype), info.dtype);
        }
      }
      i = next;
      continue;
    }
    if (streams && stream_at_[i] >= 0) {
      const PartitionStream& stream = streams_[stream_at_[i]];
      std::vector<Bound> bounds;
      for (int32_t k = 0; k < stream.count; ++k) {
        bounds.push_back(
            bind(hbm, arena, instructions[stream.first + k], stream.first + k, random.get(), printer, communicator));
      }
      runStream(stream, bounds);
      i += stream.count;
      continue;
    }
    try {  // an index read at run time (indirect DMA, scalar_offset) may reach outside its tensor
      if (in.dynamic_offsets.empty()) {
        execute(bind(hbm, arena, in, i, random.get(), printer, communicator));
      } else {
        const Instruction moved = withDynamicOffsets(program_, in, reg);
        execute(bind(hbm, arena, moved, i, random.get(), printer, communicator));
      }
    } catch (const std::out_of_range& error) {
      throw std::out_of_range("kernel '" + program_.kernel + "', line " + std::to_string(in.line) + ": " +
                              error.what());
    }
    ++i;
  }
}

Bound Executor::bind(const std::vector<void*>& hbm, char* arena, const Instruction& in, int32_t index,
                     EngineGenerators* random, const Printer* printer, const Communicator* communicator) const {
  Bound bound{in, base(hbm, arena, in.dst.tensor), program_.tensors[in.dst.tensor].dtype, {}, {},
              rows_independent_[index] != 0};
  for (const Access& input : in.inputs) {
    bound.inputs.push_back(base(hbm, arena, input.tensor));
    bound.input_types.push_back(program_.tensors[input.tensor].dtype);
  }
  bound.streaming_stores = bypass_caches_[index] != 0;
  bound.random = random;
  bound.printer = printer;
  bound.communicator = communicator;
  const TensorInfo& target = program_.tensors[in.dst.tensor];
  if (target.memory != Memory::kHbm) bound.first_lane = in.dst.offset / target.partitionElements();
  if (in.indirect) {
    const Access& rows = in.indirect_destination ? in.dst : in.inputs[0];
    bound.gathered_elements = program_.tensors[rows.tensor].elements();
  }
  return bound;
}

// Streams keep apart what different HBM tensors hold; two arguments that share memory (a caller's
// choice) run instruction by instruction.
bool Executor::argumentsApart(const std::vector<void*>& hbm) const {
  std::vector<std::pair<const char*, const char*>> ranges;
  for (const TensorInfo& info : program_.tensors) {
    if (info.argument < 0) continue;
    const char* start = static_cast<const char*>(hbm[info.argument]);
    ranges.push_back({start, start + info.elements() * byteSize(info.dtype)});
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t r = 1; r < ranges.size(); ++r) {
    if (ranges[r].first < ranges[r - 1].second) return false;
  }
  return true;
}

// Every instruction of the stream on a step of partitions, then on the next; steps on the host's threads.
void Executor::runStream(const PartitionStream& stream, const std::vector<Bound>& bounds) const {
  std::vector<int64_t> rows_per_partition;
  int64_t partition_bytes = 0;
  for (const Bound& b : bounds) {
    rows_per_partition.push_back(rowsOf(b.in) / stream.partitions);
    int64_t bytes = rowBytes(program_, b.in.dst);
    for (const Access& input : b.in.inputs) bytes += rowBytes(program_, input);
    partition_bytes += bytes * rows_per_partition.back();
  }
  int64_t step = std::clamp<int64_t>(kStreamStepBytes / std::max<int64_t>(partition_bytes, 1), 1, stream.partitions);
  // A stream of a few hundred KiB still makes enough steps for the threads to share.
  if (partition_bytes * stream.partitions >= 2 * kMinStreamParallelBytes) {
    step = std::min(step, (stream.partitions + kStepsToShare - 1) / kStepsToShare);
  }
  const int64_t steps = (stream.partitions + step - 1) / step;
  parallelFor(steps, 1, [&](int64_t first, int64_t last) {
    std::vector<Bound> local = bounds;
    for (int64_t s = first; s < last; ++s) {
      const int64_t p0 = s * step, p1 = std::min(stream.partitions, p0 + step);
      for (std::size_t k = 0; k < local.size(); ++k) {
        local[k].row_begin = p0 * rows_per_partition[k];
        local[k].row_end = p1 * rows_per_partition[k];
        execute(local[k]);
      }
    }
  });
}

}  // namespace nki
