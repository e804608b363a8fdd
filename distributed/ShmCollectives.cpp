#include "distributed/ShmCollectives.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "distributed/Agreement.h"
#include "distributed/CollectiveArgs.h"

namespace torch_neuronx::distributed {
namespace {

using RedOp = c10d::ReduceOp::RedOpType;

// acc = acc (op) other. For bool, add and mul are logical or and and.
void combine(at::Tensor& acc, const at::Tensor& other, RedOp op) {
  switch (op) {
    case RedOp::SUM:
    case RedOp::AVG: acc.add_(other); break;
    case RedOp::PRODUCT: acc.mul_(other); break;
    case RedOp::MIN: at::minimum_out(acc, acc, other); break;
    case RedOp::MAX: at::maximum_out(acc, acc, other); break;
    case RedOp::BAND: acc.bitwise_and_(other); break;
    case RedOp::BOR: acc.bitwise_or_(other); break;
    case RedOp::BXOR: acc.bitwise_xor_(other); break;
    default: TORCH_CHECK(false, "unsupported ReduceOp ", reduceOpName(op));
  }
}

// out = a (op) b in one pass (a copy followed by an in-place op reads and
// writes the output twice; reductions are bound by memory bandwidth).
void combineInto(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, RedOp op) {
  switch (op) {
    case RedOp::SUM:
    case RedOp::AVG: at::add_out(out, a, b); break;
    case RedOp::PRODUCT: at::mul_out(out, a, b); break;
    case RedOp::MIN: at::minimum_out(out, a, b); break;
    case RedOp::MAX: at::maximum_out(out, a, b); break;
    case RedOp::BAND: at::bitwise_and_out(out, a, b); break;
    case RedOp::BOR: at::bitwise_or_out(out, a, b); break;
    case RedOp::BXOR: at::bitwise_xor_out(out, a, b); break;
    default: TORCH_CHECK(false, "unsupported ReduceOp ", reduceOpName(op));
  }
}

// Below this size all_reduce takes the one-step algorithm: the sliced one
// needs two steps per chunk, which costs more than it saves on small tensors.
constexpr size_t kSlicedAllreduceBytes = 256 << 10;

void copyBytes(void* to, const void* from, size_t bytes) {
  if (to != from && bytes > 0) std::memcpy(to, from, bytes);
}

uint8_t* bytesAt(const at::Tensor& t, int64_t element_offset) {
  return static_cast<uint8_t*>(t.data_ptr()) + element_offset * t.element_size();
}

}  // namespace

int64_t ShmCollectives::elementsPerStep(at::ScalarType dtype, int parts) const {
  // Each part starts on a cache line; element sizes divide 64.
  const size_t part_bytes = transport_.slotBytes() / parts / 64 * 64;
  TORCH_CHECK(part_bytes > 0, "the neuron process group's slots are too small for ", parts, " ranks");
  return static_cast<int64_t>(part_bytes / c10::elementSize(dtype));
}

at::Tensor ShmCollectives::slotTensor(int rank, size_t byte_offset, int64_t length, at::ScalarType dtype) const {
  void* data = const_cast<uint8_t*>(transport_.data(rank)) + byte_offset;
  return at::from_blob(data, {length}, at::TensorOptions().dtype(dtype).device(at::kCPU));
}

void ShmCollectives::reduceSlots(at::Tensor& acc, size_t byte_offset, int64_t length, RedOp op) const {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < transport_.size(); ++r) parts.push_back(slotTensor(r, byte_offset, length, acc.scalar_type()));
  reduceParts(acc, parts, op);
}

void ShmCollectives::reduceParts(at::Tensor& acc, const std::vector<at::Tensor>& parts, RedOp op) const {
  if (parts.size() == 1) {
    copyBytes(acc.data_ptr(), parts[0].data_ptr(), acc.nbytes());
  } else {
    combineInto(acc, parts[0], parts[1], op);
    for (size_t r = 2; r < parts.size(); ++r) combine(acc, parts[r], op);
  }
  if (op == RedOp::AVG) average(acc, static_cast<int>(parts.size()));
}

void ShmCollectives::abandon(c10d::OpType op, const std::string& why) {
  const size_t length = std::min(why.size(), transport_.slotBytes());
  StepDescriptor d{static_cast<int32_t>(op), 0, -1, -1, static_cast<int64_t>(length), kAbandoned};
  step(d, [&](uint8_t* slot) { std::memcpy(slot, why.data(), length); }, [] {});
}

void ShmCollectives::checkAgreement(const StepDescriptor& mine) {
  std::vector<StepDescriptor> all;
  std::vector<std::string> reasons;
  for (int r = 0; r < transport_.size(); ++r) {
    const StepDescriptor& theirs = transport_.descriptor(r);
    all.push_back(theirs);
    const char* text = reinterpret_cast<const char*>(transport_.data(r));
    reasons.emplace_back(theirs.count == kAbandoned ? std::string(text, static_cast<size_t>(theirs.numel)) : "");
  }
  const std::optional<std::string> error = disagreement(mine, all, reasons);
  if (!error) return;
  // Every rank saw the same descriptors, so all of them raise here, in step.
  transport_.endStep();
  TORCH_CHECK(false, *error);
}

template <typename Write, typename Read>
void ShmCollectives::step(const StepDescriptor& descriptor, Write write, Read read) {
  write(transport_.beginStep(collectiveName(static_cast<c10d::OpType>(descriptor.op))));
  transport_.publish(descriptor);
  transport_.waitForPeers();
  checkAgreement(descriptor);
  read();
  transport_.endStep();
}

template <typename Write, typename Read>
void ShmCollectives::run(const StepDescriptor& descriptor, int64_t total, int64_t per_step, Write write, Read read) {
  int64_t offset = 0;
  do {  // at least one step, so even empty tensors check agreement
    const int64_t length = std::min(per_step, total - offset);
    step(descriptor, [&](uint8_t* slot) { write(slot, offset, length); }, [&] { read(offset, length); });
    offset += length;
  } while (offset < total);
}

void ShmCollectives::broadcast(const at::Tensor& buffer, int root) {
  const auto dtype = buffer.scalar_type();
  const size_t es = buffer.element_size();
  const bool is_root = transport_.rank() == root;
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::BROADCAST), static_cast<int32_t>(dtype), root, -1,
                   buffer.numel(), 0};
  run(d, buffer.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) {
        if (is_root) copyBytes(slot, bytesAt(buffer, offset), length * es);
      },
      [&](int64_t offset, int64_t length) {
        if (!is_root) copyBytes(bytesAt(buffer, offset), transport_.data(root), length * es);
      });
}

void ShmCollectives::allreduce(const at::Tensor& buffer, RedOp op) {
  const auto dtype = buffer.scalar_type();
  checkReducible(dtype, op);
  const size_t es = buffer.element_size();
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::ALLREDUCE), static_cast<int32_t>(dtype), -1,
                   static_cast<int32_t>(op), buffer.numel(), 0};
  if (transport_.size() > 1 && buffer.nbytes() >= kSlicedAllreduceBytes) return allreduceSliced(buffer, op, d);
  run(d, buffer.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) { copyBytes(slot, bytesAt(buffer, offset), length * es); },
      [&](int64_t offset, int64_t length) {
        at::Tensor acc = buffer.narrow(0, offset, length);
        reduceSlots(acc, 0, length, op);
      });
}

void ShmCollectives::allreduceSliced(const at::Tensor& buffer, RedOp op, const StepDescriptor& d) {
  const auto dtype = buffer.scalar_type();
  const size_t es = buffer.element_size();
  const int size = transport_.size();
  const int me = transport_.rank();
  const int64_t per_step = elementsPerStep(dtype, 1);
  const int64_t align = 64 / es;  // slices start on cache lines
  for (int64_t offset = 0; offset < buffer.numel(); offset += per_step) {
    const int64_t length = std::min(per_step, buffer.numel() - offset);
    const int64_t slice = ((length + size - 1) / size + align - 1) / align * align;
    const auto begin = [&](int r) { return std::min<int64_t>(r * slice, length); };
    const auto count = [&](int r) { return begin(r + 1) - begin(r); };
    at::Tensor mine = buffer.narrow(0, offset + begin(me), count(me));
    // Ranks 0 and 1 are the first two operands of the first binary op, so
    // they read their own part in place; later ranks' own part would be
    // overwritten before its turn, so it goes through the slot like the others'.
    const auto ownInPlace = me < 2;
    step(d,
         [&](uint8_t* slot) {
           for (int r = 0; r < size; ++r) {
             if (r != me || !ownInPlace) copyBytes(slot + begin(r) * es, bytesAt(buffer, offset + begin(r)), count(r) * es);
           }
         },
         [&] {
           std::vector<at::Tensor> parts;
           for (int r = 0; r < size; ++r) {
             parts.push_back(r == me && ownInPlace ? mine : slotTensor(r, begin(me) * es, count(me), dtype));
           }
           reduceParts(mine, parts, op);
         });
    step(d, [&](uint8_t* slot) { copyBytes(slot + begin(me) * es, mine.data_ptr(), count(me) * es); },
         [&] {
           for (int r = 0; r < size; ++r) {
             if (r != me) copyBytes(bytesAt(buffer, offset + begin(r)), transport_.data(r) + begin(r) * es, count(r) * es);
           }
         });
  }
}

void ShmCollectives::allgather(const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  const auto dtype = input.scalar_type();
  const size_t es = input.element_size();
  const int me = transport_.rank();
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::ALLGATHER), static_cast<int32_t>(dtype), -1, -1,
                   input.numel(), 0};
  run(d, input.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) { copyBytes(slot, bytesAt(input, offset), length * es); },
      [&](int64_t offset, int64_t length) {
        for (int r = 0; r < transport_.size(); ++r) {
          const void* from = r == me ? bytesAt(input, offset) : transport_.data(r);
          copyBytes(bytesAt(outputs[r], offset), from, length * es);
        }
      });
}

void ShmCollectives::reduceScatter(const std::vector<at::Tensor>& inputs, const at::Tensor& output, RedOp op) {
  const auto dtype = output.scalar_type();
  checkReducible(dtype, op);
  const size_t es = output.element_size();
  const int size = transport_.size();
  // The slot is split into one part per destination rank.
  const int64_t per_step = elementsPerStep(dtype, size);
  const size_t part_bytes = per_step * es;
  const size_t mine = transport_.rank() * part_bytes;
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::REDUCE_SCATTER), static_cast<int32_t>(dtype), -1,
                   static_cast<int32_t>(op), output.numel(), 0};
  run(d, output.numel(), per_step,
      [&](uint8_t* slot, int64_t offset, int64_t length) {
        for (int r = 0; r < size; ++r) copyBytes(slot + r * part_bytes, bytesAt(inputs[r], offset), length * es);
      },
      [&](int64_t offset, int64_t length) {
        at::Tensor acc = output.narrow(0, offset, length);
        reduceSlots(acc, mine, length, op);
      });
}

void ShmCollectives::reduce(const at::Tensor& buffer, int root, RedOp op) {
  const auto dtype = buffer.scalar_type();
  checkReducible(dtype, op);
  const size_t es = buffer.element_size();
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::REDUCE), static_cast<int32_t>(dtype), root,
                   static_cast<int32_t>(op), buffer.numel(), 0};
  run(d, buffer.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) { copyBytes(slot, bytesAt(buffer, offset), length * es); },
      [&](int64_t offset, int64_t length) {
        if (transport_.rank() != root) return;
        at::Tensor acc = buffer.narrow(0, offset, length);
        reduceSlots(acc, 0, length, op);
      });
}

void ShmCollectives::gather(const at::Tensor& input, const std::vector<at::Tensor>& outputs, int root) {
  const auto dtype = input.scalar_type();
  const size_t es = input.element_size();
  const int me = transport_.rank();
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::GATHER), static_cast<int32_t>(dtype), root, -1,
                   input.numel(), 0};
  run(d, input.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) {
        if (me != root) copyBytes(slot, bytesAt(input, offset), length * es);
      },
      [&](int64_t offset, int64_t length) {
        if (me != root) return;
        for (int r = 0; r < transport_.size(); ++r) {
          const void* from = r == me ? bytesAt(input, offset) : transport_.data(r);
          copyBytes(bytesAt(outputs[r], offset), from, length * es);
        }
      });
}

void ShmCollectives::scatter(const std::vector<at::Tensor>& inputs, const at::Tensor& output, int root) {
  const auto dtype = output.scalar_type();
  const size_t es = output.element_size();
  const int me = transport_.rank();
  // The root's slot is split into one part per destination rank.
  const int64_t per_step = elementsPerStep(dtype, transport_.size());
  const size_t part_bytes = per_step * es;
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::SCATTER), static_cast<int32_t>(dtype), root, -1,
                   output.numel(), 0};
  run(d, output.numel(), per_step,
      [&](uint8_t* slot, int64_t offset, int64_t length) {
        if (me != root) return;
        for (int r = 0; r < transport_.size(); ++r) {
          if (r != me) copyBytes(slot + r * part_bytes, bytesAt(inputs[r], offset), length * es);
        }
      },
      [&](int64_t offset, int64_t length) {
        const void* from = me == root ? bytesAt(inputs[me], offset) : transport_.data(root) + me * part_bytes;
        copyBytes(bytesAt(output, offset), from, length * es);
      });
}

std::vector<std::vector<int64_t>> ShmCollectives::alltoallPlan(const std::vector<at::Tensor>& inputs,
                                                               const std::vector<at::Tensor>& outputs,
                                                               at::ScalarType dtype) {
  const int size = transport_.size();
  std::vector<std::vector<int64_t>> sends(size, std::vector<int64_t>(size));
  std::string error;
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::ALLTOALL), static_cast<int32_t>(dtype), -1, -1, 0, size};
  // One step: each slot holds its rank's input lengths, then its output lengths.
  run(d, 0, 1,
      [&](uint8_t* slot, int64_t, int64_t) {
        auto* lengths = reinterpret_cast<int64_t*>(slot);
        for (int r = 0; r < size; ++r) {
          lengths[r] = inputs[r].numel();
          lengths[size + r] = outputs[r].numel();
        }
      },
      [&](int64_t, int64_t) {
        std::ostringstream mismatches;
        for (int s = 0; s < size; ++s) {
          const auto* from = reinterpret_cast<const int64_t*>(transport_.data(s));
          for (int r = 0; r < size; ++r) {
            sends[s][r] = from[r];
            const int64_t expected = reinterpret_cast<const int64_t*>(transport_.data(r))[size + s];
            if (from[r] != expected) {
              mismatches << "\n  rank " << s << " sends " << from[r] << " elements to rank " << r << ", which expects "
                         << expected;
            }
          }
        }
        error = mismatches.str();
      });
  // Raised after the step is complete, so every rank stays in step.
  TORCH_CHECK(error.empty(), "neuron process group: all_to_all split sizes disagree between ranks:", error);
  return sends;
}

void ShmCollectives::alltoall(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  const auto dtype = outputs.at(0).scalar_type();
  const size_t es = c10::elementSize(dtype);
  const int size = transport_.size();
  const int me = transport_.rank();
  const auto sends = alltoallPlan(inputs, outputs, dtype);
  int64_t longest = 0;
  for (const auto& row : sends) longest = std::max(longest, *std::max_element(row.begin(), row.end()));
  // Each slot is split into one part per destination; the longest piece sets the number of steps.
  const int64_t per_step = elementsPerStep(dtype, size);
  const size_t part_bytes = per_step * es;
  const auto clip = [](int64_t piece, int64_t offset, int64_t length) {
    return std::max<int64_t>(0, std::min(length, piece - offset));
  };
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::ALLTOALL), static_cast<int32_t>(dtype), -1, -1, longest, size};
  run(d, longest, per_step,
      [&](uint8_t* slot, int64_t offset, int64_t length) {
        for (int r = 0; r < size; ++r) {
          const int64_t n = clip(inputs[r].numel(), offset, length);
          if (r != me && n > 0) copyBytes(slot + r * part_bytes, bytesAt(inputs[r], offset), n * es);
        }
      },
      [&](int64_t offset, int64_t length) {
        for (int s = 0; s < size; ++s) {
          const int64_t n = clip(sends[s][me], offset, length);
          if (n <= 0) continue;
          const void* from = s == me ? bytesAt(inputs[me], offset) : transport_.data(s) + me * part_bytes;
          copyBytes(bytesAt(outputs[s], offset), from, n * es);
        }
      });
}

void ShmCollectives::barrier() {
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::BARRIER), 0, -1, -1, 0, 0};
  run(d, 0, 1, [](uint8_t*, int64_t, int64_t) {}, [](int64_t, int64_t) {});
}

}  // namespace torch_neuronx::distributed
