#include "distributed/ShmCollectives.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace torch_neuronx::distributed {
namespace {

using RedOp = c10d::ReduceOp::RedOpType;

const char* reduceOpName(int op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "none";
}

// Rejects before any data moves (an error inside a step would leave peers waiting).
void checkReducible(at::ScalarType dtype, RedOp op) {
  const bool bitwise = op == RedOp::BAND || op == RedOp::BOR || op == RedOp::BXOR;
  TORCH_CHECK(op != RedOp::PREMUL_SUM && op <= RedOp::BXOR, "the neuron process group does not support ReduceOp ",
              reduceOpName(op));
  TORCH_CHECK(!bitwise || at::isIntegralType(dtype, /*includeBool=*/true), "ReduceOp ", reduceOpName(op),
              " needs an integer or bool tensor, got ", dtype);
  TORCH_CHECK(!(op == RedOp::AVG && dtype == at::kBool), "ReduceOp AVG is not defined for bool tensors");
  TORCH_CHECK(!at::isComplexType(dtype) || op == RedOp::SUM || op == RedOp::AVG || op == RedOp::PRODUCT,
              "ReduceOp ", reduceOpName(op), " is not defined for complex tensors");
}

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

// AVG divides the sum by the group size; integers divide as NCCL does (truncating).
void average(at::Tensor& acc, int size) {
  if (at::isIntegralType(acc.scalar_type(), /*includeBool=*/false)) {
    acc.div_(size, "trunc");
  } else {
    acc.div_(size);
  }
}

std::string describe(const StepDescriptor& d) {
  std::ostringstream out;
  out << collectiveName(static_cast<c10d::OpType>(d.op));
  if (d.op != static_cast<int32_t>(c10d::OpType::BARRIER)) {
    out << " of " << d.numel << " " << c10::toString(static_cast<at::ScalarType>(d.dtype)) << " elements";
  }
  if (d.root >= 0) out << " from root " << d.root;
  if (d.reduce >= 0) out << " with " << reduceOpName(d.reduce);
  return out.str();
}

void copyBytes(void* to, const void* from, size_t bytes) {
  if (to != from && bytes > 0) std::memcpy(to, from, bytes);
}

uint8_t* bytesAt(const at::Tensor& t, int64_t element_offset) {
  return static_cast<uint8_t*>(t.data_ptr()) + element_offset * t.element_size();
}

}  // namespace

const char* collectiveName(c10d::OpType op) {
  switch (op) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "all_reduce_coalesced";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case c10d::OpType::BARRIER: return "barrier";
    default: return "collective";
  }
}

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

void ShmCollectives::checkAgreement(const StepDescriptor& mine) {
  bool agree = true;
  for (int r = 0; r < transport_.size(); ++r) agree = agree && transport_.descriptor(r) == transport_.descriptor(0);
  if (agree) return;
  std::ostringstream message;
  message << "neuron process group: ranks called mismatched collectives (every rank must pass the same sizes, "
             "dtypes, root and op):";
  for (int r = 0; r < transport_.size(); ++r) message << "\n  rank " << r << ": " << describe(transport_.descriptor(r));
  // Every rank saw the same descriptors, so all of them raise here, in step.
  transport_.endStep();
  TORCH_CHECK(false, message.str());
}

template <typename Write, typename Read>
void ShmCollectives::run(const StepDescriptor& descriptor, int64_t total, int64_t per_step, Write write, Read read) {
  const char* what = collectiveName(static_cast<c10d::OpType>(descriptor.op));
  int64_t offset = 0;
  do {  // at least one step, so even empty tensors check agreement
    const int64_t length = std::min(per_step, total - offset);
    write(transport_.beginStep(what), offset, length);
    transport_.publish(descriptor);
    transport_.waitForPeers();
    checkAgreement(descriptor);
    read(offset, length);
    transport_.endStep();
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
  run(d, buffer.numel(), elementsPerStep(dtype, 1),
      [&](uint8_t* slot, int64_t offset, int64_t length) { copyBytes(slot, bytesAt(buffer, offset), length * es); },
      [&](int64_t offset, int64_t length) {
        at::Tensor acc = buffer.narrow(0, offset, length);
        copyBytes(acc.data_ptr(), transport_.data(0), length * es);
        for (int r = 1; r < transport_.size(); ++r) combine(acc, slotTensor(r, 0, length, dtype), op);
        if (op == RedOp::AVG) average(acc, transport_.size());
      });
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
        copyBytes(acc.data_ptr(), transport_.data(0) + mine, length * es);
        for (int r = 1; r < size; ++r) combine(acc, slotTensor(r, mine, length, dtype), op);
        if (op == RedOp::AVG) average(acc, size);
      });
}

void ShmCollectives::barrier() {
  StepDescriptor d{static_cast<int32_t>(c10d::OpType::BARRIER), 0, -1, -1, 0, 0};
  run(d, 0, 1, [](uint8_t*, int64_t, int64_t) {}, [](int64_t, int64_t) {});
}

}  // namespace torch_neuronx::distributed
