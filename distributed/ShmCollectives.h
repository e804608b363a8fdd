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
  void barrier();

 private:
  // Runs the steps of one collective: `write(slot, offset, length)` fills this
  // rank's slot, `read(offset, length)` consumes every rank's slot.
  template <typename Write, typename Read>
  void run(const StepDescriptor& descriptor, int64_t total, int64_t per_step, Write write, Read read);
  // Raises the same error on every rank when the ranks' descriptors differ.
  void checkAgreement(const StepDescriptor& mine);
  at::Tensor slotTensor(int rank, size_t byte_offset, int64_t length, at::ScalarType dtype) const;
  int64_t elementsPerStep(at::ScalarType dtype, int parts) const;

  ShmTransport transport_;
};

// The user-facing name of a collective ("all_reduce", ...), for messages.
const char* collectiveName(c10d::OpType op);

}  // namespace torch_neuronx::distributed
