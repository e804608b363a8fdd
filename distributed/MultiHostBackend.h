// The "neuron" backend when a group's ranks sit on several hosts.
//
// Within a host, ranks share memory (a NeuronBackend over that host's ranks);
// between hosts, data goes through Gloo from torch, an existing engine, not a
// protocol of ours. all_reduce and broadcast, what data parallelism lives on,
// go hierarchically: within each host to its leader (the host's lowest rank),
// between the leaders over Gloo, then from each leader to its host, so a
// tensor crosses the network once per host rather than once per rank. The
// other collectives and send/recv go through one Gloo group over all ranks,
// on the tensors' host memory (zero copy for contiguous neuron tensors).
//
// Like NeuronBackend, it checks arguments on the calling thread and runs the
// collective on its own CollectiveQueue, so the same ordering, async and
// error semantics hold. Before a collective moves data, the ranks exchange
// what each is about to do in one small Gloo all_gather and run the check of
// Agreement.h, the one NeuronBackend's ranks run on their shared-memory slots:
// different sizes, dtypes, roots or ops on different ranks, or a rank whose
// arguments were refused, raise the same error on every rank at once instead
// of leaving ranks on other hosts to wait for the timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/CollectiveQueue.h"
#include "distributed/ShmTransport.h"

namespace torch_neuronx::distributed {

class MultiHostBackend : public c10d::Backend {
 public:
  struct Groups {
    c10::intrusive_ptr<c10d::Backend> local;    // this host's ranks in rank order (shared memory)
    c10::intrusive_ptr<c10d::Backend> leaders;  // host h's leader is rank h (Gloo); null on other ranks
    c10::intrusive_ptr<c10d::Backend> all;      // every rank (Gloo)
  };
  // host_of_rank[r]: rank r's host, numbered in the order of the hosts' lowest ranks.
  MultiHostBackend(int rank, int size, std::vector<int> host_of_rank, Groups groups,
                   std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // torch then builds subgroups with new_group, which lays them out afresh.
  bool supportsSplitting() const override { return false; }

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

  // What the queued collectives need, shared with them (not `this`: see CollectiveQueue).
  struct Layout {
    int rank;
    int size;
    std::vector<int> host_of_rank;
    Groups groups;
    int host() const { return host_of_rank[rank]; }
    int localRank(int global) const;  // `global`'s rank among its host's ranks
  };

 private:
  // Runs `check()` on the calling thread; when it raises, the other ranks learn
  // why through the agreement exchange they are about to make, and raise too.
  template <typename Check>
  void validate(c10d::OpType op, Check check);
  // Queues the agreement on `mine`, then `body(layout, timeout)`; returns its work over `outputs`.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> run(const StepDescriptor& mine, std::chrono::milliseconds timeout,
                                     std::vector<at::Tensor> outputs, Body body);

  // send/recv: the worker posts the Gloo operation, in order with the
  // collectives, and `completions_` waits for it, so a posted send does not
  // hold up the rank's next recv (a ring of sends and recvs would deadlock).
  // `done` gives the source rank of a recv from any source, or -1.
  using PostFn = std::function<c10::intrusive_ptr<c10d::Work>(const Layout&, std::vector<at::Tensor>&)>;
  c10::intrusive_ptr<c10d::Work> runPosted(c10d::OpType op, const at::Tensor& tensor, PostFn post,
                                           std::function<int(c10d::Work&)> done);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<const Layout> layout_;
  std::shared_ptr<CollectiveQueue> completions_ = std::make_shared<CollectiveQueue>();
  CollectiveQueue queue_;  // declared last: its worker stops before the rest goes
};

}  // namespace torch_neuronx::distributed
