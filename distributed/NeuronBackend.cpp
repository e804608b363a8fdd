#include "distributed/NeuronBackend.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <sstream>

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

void checkSameKind(const at::Tensor& t, const at::Tensor& reference, int64_t numel, const char* what) {
  TORCH_CHECK(t.scalar_type() == reference.scalar_type(), what, ": expected dtype ", reference.scalar_type(),
              ", got ", t.scalar_type());
  TORCH_CHECK(t.numel() == numel, what, ": expected ", numel, " elements, got ", t.numel());
}

std::vector<at::Tensor> flats(const std::vector<HostBuffer>& buffers) {
  std::vector<at::Tensor> result;
  for (const auto& b : buffers) result.push_back(b.flat());
  return result;
}

void writeBack(const std::vector<HostBuffer>& buffers) {
  for (const auto& b : buffers) b.writeBack();
}

// Rank-sized pieces of a flat buffer (the single-tensor collectives).
std::vector<at::Tensor> pieces(const at::Tensor& flat, int size) {
  const int64_t n = flat.numel() / size;
  std::vector<at::Tensor> result;
  for (int r = 0; r < size; ++r) result.push_back(flat.narrow(0, r * n, n));
  return result;
}

}  // namespace

NeuronBackend::NeuronBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout), collectives_(connect(*store, rank, size, timeout)) {}

c10::intrusive_ptr<c10d::Backend::Options> NeuronBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

template <typename Body>
c10::intrusive_ptr<c10d::Work> NeuronBackend::run(c10d::OpType op, std::chrono::milliseconds timeout,
                                                  std::vector<at::Tensor> outputs, Body body) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectives_.transport().setTimeout(timeout == c10d::kUnsetTimeout ? timeout_ : timeout);
  try {
    body();
  } catch (const TransportError& e) {
    C10_THROW_ERROR(DistBackendError, e.what());
  }
  return c10::make_intrusive<NeuronWork>(getRank(), op, std::move(outputs));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "broadcast: invalid root rank ", opts.rootRank);
  return run(c10d::OpType::BROADCAST, opts.timeout, tensors, [&] {
    for (const auto& t : tensors) {
      HostBuffer buffer(t);
      collectives_.broadcast(buffer.flat(), static_cast<int>(opts.rootRank));
      buffer.writeBack();
    }
  });
}

void NeuronBackend::allreduceOne(const at::Tensor& tensor, c10d::ReduceOp::RedOpType op) {
  HostBuffer buffer(tensor);
  collectives_.allreduce(buffer.flat(), op);
  buffer.writeBack();
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  return run(c10d::OpType::ALLREDUCE, opts.timeout, tensors, [&] {
    for (const auto& t : tensors) allreduceOne(t, opts.reduceOp);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  return run(c10d::OpType::ALLREDUCE_COALESCED, opts.timeout, tensors, [&] {
    for (const auto& t : tensors) allreduceOne(t, opts.reduceOp);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "all_gather: the neuron process group takes one tensor");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == getSize(), "all_gather: expected ", getSize(),
              " output tensors, got ", outputs[0].size());
  for (const auto& out : outputs[0]) checkSameKind(out, inputs[0], inputs[0].numel(), "all_gather output");
  return run(c10d::OpType::ALLGATHER, opts.timeout, outputs[0], [&] {
    HostBuffer input(inputs[0]);
    std::vector<HostBuffer> outs(outputs[0].begin(), outputs[0].end());
    collectives_.allgather(input.flat(), flats(outs));
    writeBack(outs);
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  checkSameKind(output, input, input.numel() * getSize(), "all_gather_into_tensor output");
  return run(c10d::OpType::_ALLGATHER_BASE, opts.timeout, {output}, [&] {
    HostBuffer in(input);
    HostBuffer out(output);
    collectives_.allgather(in.flat(), pieces(out.flat(), getSize()));
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "reduce_scatter: the neuron process group takes one tensor");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "reduce_scatter: expected ", getSize(),
              " input tensors, got ", inputs[0].size());
  for (const auto& in : inputs[0]) checkSameKind(in, outputs[0], outputs[0].numel(), "reduce_scatter input");
  return run(c10d::OpType::REDUCE_SCATTER, opts.timeout, outputs, [&] {
    std::vector<HostBuffer> ins(inputs[0].begin(), inputs[0].end());
    HostBuffer out(outputs[0]);
    collectives_.reduceScatter(flats(ins), out.flat(), opts.reduceOp);
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  checkSameKind(input, output, output.numel() * getSize(), "reduce_scatter_tensor input");
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout, {output}, [&] {
    HostBuffer in(input);
    HostBuffer out(output);
    collectives_.reduceScatter(pieces(in.flat(), getSize()), out.flat(), opts.reduceOp);
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions& opts) {
  return run(c10d::OpType::BARRIER, opts.timeout, {}, [&] { collectives_.barrier(); });
}

}  // namespace torch_neuronx::distributed
