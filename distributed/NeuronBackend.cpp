#include "distributed/NeuronBackend.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <optional>
#include <sstream>
#include <type_traits>

#include <ATen/ATen.h>

#include "distributed/CollectiveArgs.h"
#include "distributed/HostBuffer.h"
#include "distributed/NeuronWork.h"

namespace torch_neuronx::distributed {
namespace {

constexpr const char* kSegmentKey = "torch_neuronx/shm_segment";
constexpr size_t kDefaultSlotMiB = 4;

// Bytes of data per rank and step. Larger slots mean fewer steps for large
// tensors, at size x slot bytes of /dev/shm per group.
size_t slotBytes() {
  const char* env = std::getenv("TORCH_NEURONX_DIST_SLOT_MB");
  const long mib = env ? std::atol(env) : static_cast<long>(kDefaultSlotMiB);
  TORCH_CHECK(mib > 0 && mib <= 1024, "TORCH_NEURONX_DIST_SLOT_MB must be between 1 and 1024, got ", env);
  return static_cast<size_t>(mib) << 20;
}

// Unique per group: several groups (and several jobs) share /dev/shm.
std::string segmentName() {
  static std::atomic<uint64_t> groups{0};
  std::random_device random;
  std::ostringstream name;
  name << "/torch_neuronx_" << ::getpid() << "_" << groups.fetch_add(1) << "_" << std::hex << random();
  return name.str();
}

// Rank 0 creates the segment and publishes its name and slot size in the
// group's store; the others open it. Rank 0 unlinks the name once all are in.
ShmTransport rendezvous(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  if (rank == 0) {
    const size_t slot = slotBytes();
    ShmTransport transport = ShmTransport::create(segmentName(), rank, size, slot);
    const std::string value = transport.name() + " " + std::to_string(slot);
    store.set(kSegmentKey, std::vector<uint8_t>(value.begin(), value.end()));
    transport.awaitAttachedAndUnlink(timeout);
    return transport;
  }
  const std::vector<uint8_t> bytes = store.get(kSegmentKey);
  const std::string value(bytes.begin(), bytes.end());
  const size_t space = value.find(' ');
  TORCH_CHECK(space != std::string::npos, "neuron process group: malformed rendezvous data '", value, "'");
  return ShmTransport::open(value.substr(0, space), rank, size, std::stoull(value.substr(space + 1)));
}

ShmTransport connect(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "neuron process group: invalid rank ", rank, " of ", size);
  try {
    ShmTransport transport = rendezvous(store, rank, size, timeout);
    transport.setTimeout(timeout);
    return transport;
  } catch (const TransportError& e) {
    C10_THROW_ERROR(DistBackendError, e.what());
  }
}

void allreduceOne(ShmCollectives& collectives, const at::Tensor& tensor, const Reduction& reduction) {
  HostBuffer buffer(tensor);
  if (reduction.factor) buffer.flat().mul_(*reduction.factor);
  collectives.allreduce(buffer.flat(), reduction.op);
  buffer.writeBack();
}

}  // namespace

NeuronBackend::Channels::Channels(ShmTransport transport)
    : collectives(std::move(transport)), p2p(collectives.transport()) {}

NeuronBackend::NeuronBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      channels_(std::make_shared<Channels>(connect(*store, rank, size, timeout))) {}

c10::intrusive_ptr<c10d::Backend::Options> NeuronBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

c10::intrusive_ptr<c10d::Backend> NeuronBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::vector<int>& ranks,
                                                       const c10::intrusive_ptr<Options>& opts) {
  const auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end()) return nullptr;  // as NCCL: a rank outside every subgroup gets no backend
  for (int r : ranks) {
    TORCH_CHECK(r >= 0 && r < getSize(), "neuron process group: split rank ", r, " is not in the parent group of ",
                getSize());
  }
  // The subgroup's rank is the position in `ranks`, the order torch's
  // split_group uses for its global-to-group rank mapping. `store` is already
  // prefixed with the subgroup's unique name, so its segment key cannot clash
  // with the parent's or a sibling's.
  const int rank = static_cast<int>(me - ranks.begin());
  const auto timeout = opts ? opts->timeout : timeout_;
  return c10::make_intrusive<NeuronBackend>(store, rank, static_cast<int>(ranks.size()), timeout);
}

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

template <typename Check>
void NeuronBackend::validate(c10d::OpType op, Check check) {
  try {
    check();
  } catch (const c10::Error& e) {
    // The other ranks are about to join this collective: one step that says
    // why this rank will not lets them raise now instead of at the timeout.
    queue_.submit([channels = channels_, op, why = std::string(e.what_without_backtrace())] {
      try {
        channels->collectives.abandon(op, why);
      } catch (...) {
        // The group is broken or the peers never came: their own calls report it.
      }
    });
    throw;
  }
}

template <typename Body>
c10::intrusive_ptr<c10d::Work> NeuronBackend::run(c10d::OpType op, std::chrono::milliseconds timeout,
                                                  std::vector<at::Tensor> outputs, Body body) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (timeout == c10d::kUnsetTimeout) timeout = timeout_;
  }
  return NeuronWork::enqueue(queue_, getRank(), op, std::move(outputs),
                             [channels = channels_, timeout, body = std::move(body)]() mutable -> int {
                               channels->collectives.transport().setTimeout(timeout);
                               if constexpr (std::is_void_v<std::invoke_result_t<Body&, Channels&>>) {
                                 body(*channels);
                                 return -1;
                               } else {
                                 return body(*channels);  // a recv from any source: where its message came from
                               }
                             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  validate(c10d::OpType::BROADCAST, [&] { checkRoot(opts.rootRank, getSize(), "broadcast"); });
  const int root = static_cast<int>(opts.rootRank);
  return run(c10d::OpType::BROADCAST, opts.timeout, tensors, [tensors, root](Channels& c) {
    for (const auto& t : tensors) {
      HostBuffer buffer(t);
      c.collectives.broadcast(buffer.flat(), root);
      buffer.writeBack();
    }
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::ALLREDUCE, [&] { reduction = reductionOf(opts.reduceOp, dtypeOf(tensors)); });
  return run(c10d::OpType::ALLREDUCE, opts.timeout, tensors, [tensors, reduction](Channels& c) {
    for (const auto& t : tensors) allreduceOne(c.collectives, t, reduction);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::ALLREDUCE_COALESCED, [&] { reduction = reductionOf(opts.reduceOp, dtypeOf(tensors)); });
  return run(c10d::OpType::ALLREDUCE_COALESCED, opts.timeout, tensors, [tensors, reduction](Channels& c) {
    for (const auto& t : tensors) allreduceOne(c.collectives, t, reduction);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::ALLGATHER, [&] { checkAllgather(outputs, inputs, getSize()); });
  return run(c10d::OpType::ALLGATHER, opts.timeout, outputs[0],
             [input = inputs[0], outputs = outputs[0]](Channels& c) {
               HostBuffer in(input);
               std::vector<HostBuffer> outs(outputs.begin(), outputs.end());
               c.collectives.allgather(in.flat(), flats(outs));
               writeBack(outs);
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::_ALLGATHER_BASE,
           [&] { checkSameKind(output, input, input.numel() * getSize(), "all_gather_into_tensor output"); });
  return run(c10d::OpType::_ALLGATHER_BASE, opts.timeout, {output},
             [input, output, size = getSize()](Channels& c) {
               HostBuffer in(input);
               HostBuffer out(output);
               c.collectives.allgather(in.flat(), pieces(out.flat(), size));
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::REDUCE_SCATTER, [&] {
    checkReduceScatter(outputs, inputs, getSize());
    reduction = reductionOf(opts.reduceOp, outputs[0].scalar_type());
  });
  return run(c10d::OpType::REDUCE_SCATTER, opts.timeout, outputs,
             [inputs = inputs[0], output = outputs[0], reduction](Channels& c) {
               std::vector<HostBuffer> ins(inputs.begin(), inputs.end());
               HostBuffer out(output);
               c.collectives.reduceScatter(contributions(flats(ins), reduction), out.flat(), reduction.op);
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::_REDUCE_SCATTER_BASE, [&] {
    checkSameKind(input, output, output.numel() * getSize(), "reduce_scatter_tensor input");
    reduction = reductionOf(opts.reduceOp, output.scalar_type());
  });
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout, {output},
             [input, output, reduction, size = getSize()](Channels& c) {
               HostBuffer in(input);
               HostBuffer out(output);
               c.collectives.reduceScatter(pieces(contribution(in.flat(), reduction), size), out.flat(),
                                           reduction.op);
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
           [&] { checkCoalesced(outputs, inputs, getSize(), "all_gather_into_tensor_coalesced"); });
  return run(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, opts.timeout, outputs,
             [inputs, outputs, size = getSize()](Channels& c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 HostBuffer in(inputs[i]);
                 HostBuffer out(outputs[i]);
                 c.collectives.allgather(in.flat(), pieces(out.flat(), size));
                 out.writeBack();
               }
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::ReduceScatterOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, [&] {
    checkCoalesced(inputs, outputs, getSize(), "reduce_scatter_tensor_coalesced");
    reduction = reductionOf(opts.reduceOp, dtypeOf(outputs));
  });
  return run(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, opts.timeout, outputs,
             [inputs, outputs, reduction, size = getSize()](Channels& c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 HostBuffer in(inputs[i]);
                 HostBuffer out(outputs[i]);
                 c.collectives.reduceScatter(pieces(contribution(in.flat(), reduction), size), out.flat(),
                                             reduction.op);
                 out.writeBack();
               }
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  Reduction reduction{};
  validate(c10d::OpType::REDUCE, [&] {
    checkRoot(opts.rootRank, getSize(), "reduce");
    reduction = reductionOf(opts.reduceOp, dtypeOf(tensors));
  });
  return run(c10d::OpType::REDUCE, opts.timeout, tensors,
             [tensors, reduction, root = static_cast<int>(opts.rootRank)](Channels& c) {
               for (const auto& t : tensors) {
                 HostBuffer buffer(t);
                 if (!reduction.factor) {
                   c.collectives.reduce(buffer.flat(), root, reduction.op);
                 } else {  // the other ranks' tensors stay as they were: reduce a scaled copy
                   at::Tensor scaled = contribution(buffer.flat(), reduction);
                   c.collectives.reduce(scaled, root, reduction.op);
                   if (c.collectives.transport().rank() == root) buffer.flat().copy_(scaled);
                 }
                 buffer.writeBack();
               }
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  std::vector<at::Tensor> outs;
  validate(c10d::OpType::GATHER, [&] {
    checkRoot(opts.rootRank, getSize(), "gather");
    outs = gatherOutputs(outputs, inputs, getRank() == opts.rootRank, getSize());
  });
  return run(c10d::OpType::GATHER, opts.timeout, outs,
             [input = inputs[0], outs, root = static_cast<int>(opts.rootRank)](Channels& c) {
               HostBuffer in(input);
               std::vector<HostBuffer> buffers(outs.begin(), outs.end());
               c.collectives.gather(in.flat(), flats(buffers), root);
               writeBack(buffers);
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::GatherOptions& opts) {
  const bool root = getRank() == opts.rootRank;
  validate(c10d::OpType::GATHER, [&] {
    checkRoot(opts.rootRank, getSize(), "gather_single");
    if (root) checkSameKind(output, input, input.numel() * getSize(), "gather_single output");
  });
  return run(c10d::OpType::GATHER, opts.timeout, {output},
             [input, output, root, root_rank = static_cast<int>(opts.rootRank), size = getSize()](Channels& c) {
               HostBuffer in(input);
               if (!root) return c.collectives.gather(in.flat(), {}, root_rank);
               HostBuffer out(output);
               c.collectives.gather(in.flat(), pieces(out.flat(), size), root_rank);
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  std::vector<at::Tensor> ins;
  validate(c10d::OpType::SCATTER, [&] {
    checkRoot(opts.rootRank, getSize(), "scatter");
    ins = scatterInputs(inputs, outputs, getRank() == opts.rootRank, getSize());
  });
  return run(c10d::OpType::SCATTER, opts.timeout, outputs,
             [ins, output = outputs[0], root = static_cast<int>(opts.rootRank)](Channels& c) {
               std::vector<HostBuffer> buffers(ins.begin(), ins.end());
               HostBuffer out(output);
               c.collectives.scatter(flats(buffers), out.flat(), root);
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_split_sizes,
                                                            std::vector<int64_t>& input_split_sizes,
                                                            const c10d::AllToAllOptions& opts) {
  std::vector<int64_t> out_sizes;
  std::vector<int64_t> in_sizes;
  validate(c10d::OpType::ALLTOALL_BASE, [&] {
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "all_to_all_single: input is ", input.scalar_type(),
                " but output is ", output.scalar_type());
    out_sizes = splitSizes(output_split_sizes, output, getSize(), "output");
    in_sizes = splitSizes(input_split_sizes, input, getSize(), "input");
  });
  return run(c10d::OpType::ALLTOALL_BASE, opts.timeout, {output},
             [input, output, in_sizes = std::move(in_sizes), out_sizes = std::move(out_sizes)](Channels& c) {
               HostBuffer in(input);
               HostBuffer out(output);
               c.collectives.alltoall(splitPieces(in.flat(), in_sizes), splitPieces(out.flat(), out_sizes));
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  validate(c10d::OpType::ALLTOALL, [&] { checkAlltoall(outputs, inputs, getSize()); });
  return run(c10d::OpType::ALLTOALL, opts.timeout, outputs, [inputs, outputs](Channels& c) {
    std::vector<HostBuffer> ins(inputs.begin(), inputs.end());
    std::vector<HostBuffer> outs(outputs.begin(), outputs.end());
    c.collectives.alltoall(flats(ins), flats(outs));
    writeBack(outs);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkPeer(dst, getRank(), getSize(), "send: destination");
  return run(c10d::OpType::SEND, c10d::kUnsetTimeout, tensors, [tensors, dst, tag](Channels& c) {
    for (const auto& t : tensors) c.p2p.send(HostBuffer(t).flat(), dst, tag);
  });
}

namespace {

// Receives every tensor from `src` (-1: any rank); returns the rank they came from.
int receive(PointToPoint& p2p, const std::vector<at::Tensor>& tensors, int src, int tag) {
  int from = src;
  for (const auto& t : tensors) {
    HostBuffer buffer(t);
    from = p2p.recv(buffer.flat(), from, tag);  // the later tensors come from the same rank
    buffer.writeBack();
  }
  return from;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> NeuronBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkPeer(src, getRank(), getSize(), "recv: source");
  return run(c10d::OpType::RECV, c10d::kUnsetTimeout, tensors,
             [tensors, src, tag](Channels& c) { receive(c.p2p, tensors, src, tag); });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return run(c10d::OpType::RECVANYSOURCE, c10d::kUnsetTimeout, tensors,
             [tensors, tag](Channels& c) { return receive(c.p2p, tensors, -1, tag); });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions& opts) {
  return run(c10d::OpType::BARRIER, opts.timeout, {}, [](Channels& c) { c.collectives.barrier(); });
}

}  // namespace torch_neuronx::distributed
