// The "neuron" c10d backend: collectives between ranks on one host over shared
// memory. Tensors may be neuron or CPU tensors, contiguous or not. Arguments
// are checked on the calling thread (errors raise at the call); the
// collective itself runs on the group's CollectiveQueue and the returned
// NeuronWork completes when it is done (errors raise at wait()).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <mutex>

#include "distributed/CollectiveQueue.h"
#include "distributed/PointToPoint.h"
#include "distributed/ShmCollectives.h"

namespace torch_neuronx::distributed {

class NeuronBackend : public c10d::Backend {
 public:
  // Collective: every rank of the group constructs its backend with the same store.
  NeuronBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // DeviceMesh creates its per-dimension groups with split_group when the
  // default group has a bound device (init_process_group(device_id=...)).
  bool supportsSplitting() const override { return true; }
  // Collective over the parent group's ranks that call it: each passes the
  // parent ranks of its own subgroup and gets a backend over a new segment, or
  // nullptr when it is not in `ranks`.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;

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
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // What the worker moves data through; shared with the queued tasks.
  struct Channels {
    explicit Channels(ShmTransport transport);
    ShmCollectives collectives;
    PointToPoint p2p;  // over collectives' transport
  };

  // Queues `body(channels)` with the op's timeout and returns its work over
  // `outputs`; transport failures fail the work with a DistBackendError. A
  // body that returns an int reports the rank a recv got its message from.
  // Runs a collective's argument checks on the calling thread. When they
  // raise, the other ranks learn it through one abandoned step (see
  // ShmCollectives::abandon), so they raise too instead of waiting.
  template <typename Check>
  void validate(c10d::OpType op, Check check);
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType op, std::chrono::milliseconds timeout,
                                     std::vector<at::Tensor> outputs, Body body);

  std::mutex mutex_;  // guards timeout_
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Channels> channels_;
  CollectiveQueue queue_;  // declared last: its worker stops before the rest goes
};

}  // namespace torch_neuronx::distributed
