// The Work of a neuron collective. Collectives run when they are called (the
// emulated cores execute inline), so the work is complete when it is returned;
// its future carries the output tensors, which DDP communication hooks read.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace torch_neuronx::distributed {

class NeuronWork : public c10d::Work {
 public:
  // source_rank: where a recv's message came from (recv from any source), or -1.
  NeuronWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs, int source_rank = -1);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds timeout) override { return true; }
  void synchronize() override {}
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;

 private:
  std::vector<at::Tensor> outputs_;
  int source_rank_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_neuronx::distributed
