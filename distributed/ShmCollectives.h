// The collective algorithms over a ShmTransport, on flat contiguous CPU tensors
// (HostBuffer gives those for neuron and CPU tensors alike).
//
// Data moves in steps of at most one slot per rank. Every step carries each
// rank's StepDescriptor, and ranks compare them before touching data, so a
// collective called with different sizes, dtypes, roots or ops on different
// ranks raises the same error on every rank and leaves the group usable.
// Reductions combine ranks in rank order on every rank, so all ranks get
// bit-identical results.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string>
#include <vector>

#include "distributed/ShmTransport.h"

namespace torch_neuronx::distributed {

class ShmCollectives {
 public:
  explicit ShmCollectives(ShmTransport transport) : transport_(std::move(transport)) {}

  ShmTransport& transport() { return transport_; }

  void broadcast(const at::Tensor& buffer, int root);
  void allreduce(const at::Tensor& buffer, c10d::ReduceOp::RedOpType op);
  // outputs[r] receives rank r's input; outputs[rank] may be the input itself.
  void allgather(const at::Tensor& input, const std::vector<at::Tensor>& outputs);
  // output = op over ranks of inputs[rank] (each rank's inputs[r] goes to rank r).
  void reduceScatter(const std::vector<at::Tensor>& inputs, const at::Tensor& output, c10d::ReduceOp::RedOpType op);
  // The root's buffer = op over ranks of buffer; other ranks' buffers are unchanged.
  void reduce(const at::Tensor& buffer, int root, c10d::ReduceOp::RedOpType op);
  // On the root, outputs[r] receives rank r's input; elsewhere outputs is empty.
  void gather(const at::Tensor& input, const std::vector<at::Tensor>& outputs, int root);
  // output receives the root's inputs[rank]; inputs is empty except on the root.
  void scatter(const std::vector<at::Tensor>& inputs, const at::Tensor& output, int root);
  // outputs[r] receives rank r's inputs[rank]; pieces may differ in length
  // (all_to_all_single's split sizes), as long as the ranks agree on them.
  void alltoall(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);
  void barrier();
  // This rank's arguments to `op` were refused before it joined: one step
  // whose descriptor says so and whose data holds `why`, so the peers raise a
  // clear error at once (in the same step, which keeps the group usable).
  void abandon(c10d::OpType op, const std::string& why);

 private:
  // Runs the steps of one collective: `write(slot, offset, length)` fills this
  // rank's slot, `read(offset, length)` consumes every rank's slot.
  template <typename Write, typename Read>
  void run(const StepDescriptor& descriptor, int64_t total, int64_t per_step, Write write, Read read);
  // One step: `write(slot)`, publish, wait for every rank, check agreement, `read()`.
  template <typename Write, typename Read>
  void step(const StepDescriptor& descriptor, Write write, Read read);
  // all_reduce of large tensors: per chunk, each rank reduces its 1/size slice
  // of every rank's contribution (one step), then every rank copies the
  // reduced slices (a second step). Each slice is reduced once, in rank order,
  // so all ranks get the same bits as the one-step algorithm gives.
  void allreduceSliced(const at::Tensor& buffer, c10d::ReduceOp::RedOpType op, const StepDescriptor& descriptor);
  // Raises the same error on every rank (but an abandoning one) when the ranks' descriptors differ
  // or some rank abandoned this step (Agreement.h).
  void checkAgreement(const StepDescriptor& mine);
  at::Tensor slotTensor(int rank, size_t byte_offset, int64_t length, at::ScalarType dtype) const;
  // acc = op over ranks, in rank order, of `length` elements at `byte_offset` of every slot.
  void reduceSlots(at::Tensor& acc, size_t byte_offset, int64_t length, c10d::ReduceOp::RedOpType op) const;
  // acc = op over parts, in order; acc may be parts[0] or parts[1] itself.
  void reduceParts(at::Tensor& acc, const std::vector<at::Tensor>& parts, c10d::ReduceOp::RedOpType op) const;
  // all_to_all's first step: every rank learns every piece length, and all
  // raise the same error when what rank s sends to d is not what d expects.
  // Returns sends[s][d], the elements rank s sends to rank d.
  std::vector<std::vector<int64_t>> alltoallPlan(const std::vector<at::Tensor>& inputs,
                                                 const std::vector<at::Tensor>& outputs, at::ScalarType dtype);
  int64_t elementsPerStep(at::ScalarType dtype, int parts) const;

  ShmTransport transport_;
};

}  // namespace torch_neuronx::distributed
