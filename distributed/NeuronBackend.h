// The "neuron" c10d backend: collectives between ranks on one host over shared
// memory. Tensors may be neuron or CPU tensors, contiguous or not. Collectives
// run synchronously on the calling thread and return completed NeuronWork.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <mutex>

#include "distributed/ShmCollectives.h"

namespace torch_neuronx::distributed {

class NeuronBackend : public c10d::Backend {
 public:
  // Collective: every rank of the group constructs its backend with the same store.
  NeuronBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Runs `body` under the group lock with the op's timeout, turns transport
  // failures into DistBackendError, and returns completed work over `outputs`.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType op, std::chrono::milliseconds timeout,
                                     std::vector<at::Tensor> outputs, Body body);
  void allreduceOne(const at::Tensor& tensor, c10d::ReduceOp::RedOpType op);

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // one collective at a time: steps are numbered per group
  ShmCollectives collectives_;
};

}  // namespace torch_neuronx::distributed
