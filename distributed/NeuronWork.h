// The Work of a neuron collective. The collective runs on the group's
// CollectiveQueue; the worker completes the work (or fails it with the
// collective's error) and then its future, which carries the output tensors
// for DDP communication hooks.
//
// wait() blocks the calling thread until the collective is done. The emulated
// cores execute every stream's work at submission, so a stream "waits" when
// its host thread does: work queued on any stream after wait() returns sees
// the collective's results, as after NCCL's stream wait.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <functional>
#include <vector>

#include "distributed/CollectiveQueue.h"

namespace torch_neuronx::distributed {

class NeuronWork : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs);

  // Queues `body` on `queue` and returns its work over `outputs`. `body`
  // returns the rank a recv from any source got its message from, or -1;
  // what it throws fails the work (transport failures as DistBackendError).
  static c10::intrusive_ptr<NeuronWork> enqueue(CollectiveQueue& queue, int rank, c10d::OpType op,
                                                std::vector<at::Tensor> outputs, std::function<int()> body);

  // From the worker: the collective finished. source_rank: where a recv from
  // any source got its message, else -1.
  void complete(int source_rank = -1);
  void fail(std::exception_ptr error);

  void synchronize() override {}
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;

 private:
  std::vector<at::Tensor> outputs_;
  int source_rank_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_neuronx::distributed
