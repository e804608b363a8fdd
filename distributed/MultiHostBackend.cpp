#include "distributed/MultiHostBackend.h"

#include <ATen/ATen.h>

#include <cstring>
#include <numeric>
#include <optional>
#include <type_traits>

#include "distributed/Agreement.h"
#include "distributed/CollectiveArgs.h"
#include "distributed/HostBuffer.h"
#include "distributed/NeuronWork.h"

namespace torch_neuronx::distributed {
namespace {

using Layout = MultiHostBackend::Layout;
using Millis = std::chrono::milliseconds;

// A reduction Gloo runs: PREMUL_SUM scales inputs first, AVG divides the sum afterwards.
struct GlooReduction {
  Reduction reduction{c10d::ReduceOp::SUM, std::nullopt};
  bool average = false;
};

GlooReduction glooReduction(const c10d::ReduceOp& reduce_op, at::ScalarType dtype) {
  Reduction reduction = reductionOf(reduce_op, dtype);
  const bool avg = reduction.op == c10d::ReduceOp::AVG;
  if (avg) reduction.op = c10d::ReduceOp::SUM;
  return {reduction, avg};
}

// glooReduction after the checks NeuronBackend makes of a reduction, so that both refuse the same ones.
GlooReduction checkedReduction(const c10d::ReduceOp& reduce_op, at::ScalarType dtype) {
  checkReducible(dtype, reductionOf(reduce_op, dtype).op);
  return glooReduction(reduce_op, dtype);
}

void finish(const GlooReduction& how, const at::Tensor& sum, int size) {
  if (how.average) average(sum, size);
}

// Debian's Gloo has no 16-bit types. Moving 16-bit floats needs only their
// bytes (2 per element); reducing them goes through float32, which all ranks
// then round alike.
bool isHalfWidth(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

at::Tensor bytesForGloo(const at::Tensor& flat) { return isHalfWidth(flat) ? flat.view(at::kByte) : flat; }

// Split sizes in the elements bytesForGloo(t) has.
std::vector<int64_t> lengthsForGloo(std::vector<int64_t> lengths, const at::Tensor& t) {
  if (isHalfWidth(t)) {
    for (auto& n : lengths) n *= t.element_size();
  }
  return lengths;
}

std::vector<at::Tensor> bytesForGloo(const std::vector<at::Tensor>& flats) {
  std::vector<at::Tensor> result;
  for (const auto& f : flats) result.push_back(bytesForGloo(f));
  return result;
}

at::Tensor valuesForGloo(const at::Tensor& flat) { return isHalfWidth(flat) ? flat.to(at::kFloat) : flat; }

// Copies a reduction's float32 result back into a 16-bit tensor; a no-op otherwise.
void storeFromGloo(const at::Tensor& flat, const at::Tensor& values) {
  if (!values.is_same(flat)) flat.copy_(values);
}

// Within the host to its leader, across hosts between the leaders, back from each leader.
void allreduceHierarchical(const Layout& layout, const at::Tensor& tensor, const GlooReduction& how, Millis timeout) {
  HostBuffer buffer(tensor);
  std::vector<at::Tensor> flat{buffer.flat()};
  if (how.reduction.factor) flat[0].mul_(*how.reduction.factor);
  c10d::ReduceOptions to_leader;
  to_leader.reduceOp = c10d::ReduceOp(how.reduction.op);
  to_leader.rootRank = 0;
  to_leader.timeout = timeout;
  layout.groups.local->reduce(flat, to_leader)->wait();
  if (layout.groups.leaders) {
    c10d::AllreduceOptions across;
    across.reduceOp = c10d::ReduceOp(how.reduction.op);
    across.timeout = timeout;
    std::vector<at::Tensor> values{valuesForGloo(flat[0])};
    layout.groups.leaders->allreduce(values, across)->wait();
    finish(how, values[0], layout.size);
    storeFromGloo(flat[0], values[0]);
  }
  c10d::BroadcastOptions from_leader;
  from_leader.rootRank = 0;
  from_leader.timeout = timeout;
  layout.groups.local->broadcast(flat, from_leader)->wait();
  buffer.writeBack();
}

// Within the root's host, then between the leaders, then within the other hosts.
void broadcastHierarchical(const Layout& layout, const at::Tensor& tensor, int root, Millis timeout) {
  HostBuffer buffer(tensor);
  std::vector<at::Tensor> flat{buffer.flat()};
  const int root_host = layout.host_of_rank[root];
  c10d::BroadcastOptions opts;
  opts.timeout = timeout;
  if (layout.host() == root_host) {
    opts.rootRank = layout.localRank(root);
    layout.groups.local->broadcast(flat, opts)->wait();
  }
  if (layout.groups.leaders) {
    opts.rootRank = root_host;
    std::vector<at::Tensor> bytes{bytesForGloo(flat[0])};
    layout.groups.leaders->broadcast(bytes, opts)->wait();
  }
  if (layout.host() != root_host) {
    opts.rootRank = 0;
    layout.groups.local->broadcast(flat, opts)->wait();
  }
  buffer.writeBack();
}

c10d::AllgatherOptions allgatherOptions(Millis timeout) {
  c10d::AllgatherOptions opts;
  opts.timeout = timeout;
  return opts;
}

c10d::ReduceScatterOptions reduceScatterOptions(const GlooReduction& how, Millis timeout) {
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = c10d::ReduceOp(how.reduction.op);
  opts.timeout = timeout;
  return opts;
}

void allgatherOne(const Layout& layout, const at::Tensor& output, const at::Tensor& input, Millis timeout) {
  HostBuffer in(input);
  HostBuffer out(output);
  at::Tensor in_flat = bytesForGloo(in.flat());
  at::Tensor out_flat = bytesForGloo(out.flat());
  layout.groups.all->_allgather_base(out_flat, in_flat, allgatherOptions(timeout))->wait();
  out.writeBack();
}

void reduceScatterOne(const Layout& layout, const at::Tensor& output, const at::Tensor& input,
                      const GlooReduction& how, Millis timeout) {
  HostBuffer in(input);
  HostBuffer out(output);
  at::Tensor in_flat = valuesForGloo(contribution(in.flat(), how.reduction));
  at::Tensor out_flat = valuesForGloo(out.flat());
  layout.groups.all->_reduce_scatter_base(out_flat, in_flat, reduceScatterOptions(how, timeout))->wait();
  finish(how, out_flat, layout.size);
  storeFromGloo(out.flat(), out_flat);
  out.writeBack();
}


// What a rank states about a collective: op, dtype, root, reduction and the elements of `tensors`.
StepDescriptor signature(c10d::OpType op, const std::vector<at::Tensor>& tensors, int64_t root = -1,
                         int reduce = -1) {
  StepDescriptor d{static_cast<int32_t>(op), static_cast<int32_t>(dtypeOf(tensors)), static_cast<int32_t>(root),
                   reduce, 0, tensors.size() > 1 ? static_cast<int64_t>(tensors.size()) : 0};
  for (const auto& t : tensors) d.numel += t.numel();
  return d;
}

// all_to_all's pieces may differ in length between ranks: the ranks agree on the op and dtype.
StepDescriptor unsizedSignature(c10d::OpType op, at::ScalarType dtype) {
  return StepDescriptor{static_cast<int32_t>(op), static_cast<int32_t>(dtype), -1, -1, 0, 0};
}

// One rank's statement on the wire: its descriptor, then the reason of a refusal.
constexpr size_t kStatementBytes = 512;
static_assert(sizeof(StepDescriptor) < kStatementBytes);

// Every rank's statement through one all_gather over all ranks, then the check NeuronBackend runs.
void agree(const Layout& layout, const StepDescriptor& mine, const std::string& reason, Millis timeout) {
  at::Tensor statement = at::zeros({static_cast<int64_t>(kStatementBytes)}, at::kByte);
  std::memcpy(statement.data_ptr(), &mine, sizeof(StepDescriptor));
  const size_t reason_bytes = std::min(reason.size(), kStatementBytes - sizeof(StepDescriptor));
  std::memcpy(statement.data_ptr<uint8_t>() + sizeof(StepDescriptor), reason.data(), reason_bytes);
  std::vector<std::vector<at::Tensor>> all{std::vector<at::Tensor>(layout.size)};
  for (auto& t : all[0]) t = at::empty_like(statement);
  std::vector<at::Tensor> in{statement};
  layout.groups.all->allgather(all, in, allgatherOptions(timeout))->wait();
  std::vector<StepDescriptor> descriptors(layout.size);
  std::vector<std::string> reasons(layout.size);
  for (int r = 0; r < layout.size; ++r) {
    const uint8_t* bytes = all[0][r].data_ptr<uint8_t>();
    std::memcpy(&descriptors[r], bytes, sizeof(StepDescriptor));
    if (descriptors[r].count == kAbandoned) {
      const char* text = reinterpret_cast<const char*>(bytes + sizeof(StepDescriptor));
      reasons[r] = std::string(text, strnlen(text, kStatementBytes - sizeof(StepDescriptor)));
    }
  }
  const std::optional<std::string> error = disagreement(mine, descriptors, reasons);
  TORCH_CHECK(!error, *error);
}

}  // namespace

int MultiHostBackend::Layout::localRank(int global) const {
  int below = 0;
  for (int r = 0; r < global; ++r) below += host_of_rank[r] == host_of_rank[global];
  return below;
}

MultiHostBackend::MultiHostBackend(int rank, int size, std::vector<int> host_of_rank, Groups groups,
                                   std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  TORCH_CHECK(static_cast<int>(host_of_rank.size()) == size, "neuron process group: ", host_of_rank.size(),
              " host entries for ", size, " ranks");
  TORCH_CHECK(groups.local && groups.all, "neuron process group: a multi-host group needs its local and Gloo groups");
  auto layout = std::make_shared<Layout>(Layout{rank, size, std::move(host_of_rank), std::move(groups)});
  const bool leads = layout->localRank(rank) == 0;
  TORCH_CHECK(leads == static_cast<bool>(layout->groups.leaders), "neuron process group: rank ", rank,
              leads ? " leads its host but has no leaders' group" : " does not lead its host but has a leaders' group");
  layout_ = std::move(layout);
}

c10::intrusive_ptr<c10d::Backend::Options> MultiHostBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

template <typename Check>
void MultiHostBackend::validate(c10d::OpType op, Check check) {
  try {
    check();
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    StepDescriptor refused{static_cast<int32_t>(op), 0, -1, -1, static_cast<int64_t>(why.size()), kAbandoned};
    queue_.submit([layout = layout_, refused, why, timeout = timeout_] {
      try {
        agree(*layout, refused, why, timeout);
      } catch (...) {
        // The group is broken or the peers never came: their own calls report it.
      }
    });
    throw;
  }
}

template <typename Body>
c10::intrusive_ptr<c10d::Work> MultiHostBackend::run(const StepDescriptor& mine, std::chrono::milliseconds timeout,
                                                     std::vector<at::Tensor> outputs, Body body) {
  if (timeout == c10d::kUnsetTimeout) timeout = timeout_;
  return NeuronWork::enqueue(queue_, getRank(), static_cast<c10d::OpType>(mine.op), std::move(outputs),
                             [layout = layout_, mine, timeout, body = std::move(body)]() mutable -> int {
                               agree(*layout, mine, "", timeout);
                               if constexpr (std::is_void_v<std::invoke_result_t<Body&, const Layout&, Millis>>) {
                                 body(*layout, timeout);
                                 return -1;
                               } else {
                                 return body(*layout, timeout);
                               }
                             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  validate(c10d::OpType::BROADCAST, [&] { checkRoot(opts.rootRank, getSize(), "broadcast"); });
  return run(signature(c10d::OpType::BROADCAST, tensors, opts.rootRank), opts.timeout, tensors,
             [tensors, root = static_cast<int>(opts.rootRank)](const Layout& layout, Millis timeout) {
               for (const auto& t : tensors) broadcastHierarchical(layout, t, root, timeout);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::ALLREDUCE, [&] { how = checkedReduction(opts.reduceOp, dtypeOf(tensors)); });
  return run(signature(c10d::OpType::ALLREDUCE, tensors, -1, opts.reduceOp.op_), opts.timeout, tensors,
             [tensors, how](const Layout& layout, Millis timeout) {
    for (const auto& t : tensors) allreduceHierarchical(layout, t, how, timeout);
  });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::ALLREDUCE_COALESCED, [&] { how = checkedReduction(opts.reduceOp, dtypeOf(tensors)); });
  return run(signature(c10d::OpType::ALLREDUCE_COALESCED, tensors, -1, opts.reduceOp.op_), opts.timeout, tensors,
             [tensors, how](const Layout& layout, Millis timeout) {
               for (const auto& t : tensors) allreduceHierarchical(layout, t, how, timeout);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::ALLGATHER, [&] { checkAllgather(outputs, inputs, getSize()); });
  return run(signature(c10d::OpType::ALLGATHER, inputs), opts.timeout, outputs[0],
             [input = inputs[0], outputs = outputs[0]](const Layout& layout, Millis timeout) {
               HostBuffer in(input);
               std::vector<HostBuffer> outs(outputs.begin(), outputs.end());
               std::vector<std::vector<at::Tensor>> out_flats{bytesForGloo(flats(outs))};
               std::vector<at::Tensor> in_flats{bytesForGloo(in.flat())};
               layout.groups.all->allgather(out_flats, in_flats, allgatherOptions(timeout))->wait();
               writeBack(outs);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::_ALLGATHER_BASE,
           [&] { checkSameKind(output, input, input.numel() * getSize(), "all_gather_into_tensor output"); });
  return run(signature(c10d::OpType::_ALLGATHER_BASE, {input}), opts.timeout, {output},
             [input, output](const Layout& layout, Millis timeout) { allgatherOne(layout, output, input, timeout); });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::REDUCE_SCATTER, [&] {
    checkReduceScatter(outputs, inputs, getSize());
    how = checkedReduction(opts.reduceOp, outputs[0].scalar_type());
  });
  return run(signature(c10d::OpType::REDUCE_SCATTER, outputs, -1, opts.reduceOp.op_), opts.timeout, outputs,
             [inputs = inputs[0], output = outputs[0], how](const Layout& layout, Millis timeout) {
               std::vector<HostBuffer> ins(inputs.begin(), inputs.end());
               HostBuffer out(output);
               std::vector<at::Tensor> in_values;
               for (const auto& c : contributions(flats(ins), how.reduction)) in_values.push_back(valuesForGloo(c));
               std::vector<std::vector<at::Tensor>> in_flats{in_values};
               std::vector<at::Tensor> out_flats{valuesForGloo(out.flat())};
               layout.groups.all->reduce_scatter(out_flats, in_flats, reduceScatterOptions(how, timeout))->wait();
               finish(how, out_flats[0], layout.size);
               storeFromGloo(out.flat(), out_flats[0]);
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::_REDUCE_SCATTER_BASE, [&] {
    checkSameKind(input, output, output.numel() * getSize(), "reduce_scatter_tensor input");
    how = checkedReduction(opts.reduceOp, output.scalar_type());
  });
  return run(signature(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, -1, opts.reduceOp.op_), opts.timeout, {output},
             [input, output, how](const Layout& layout, Millis timeout) {
               reduceScatterOne(layout, output, input, how, timeout);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  validate(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
           [&] { checkCoalesced(outputs, inputs, getSize(), "all_gather_into_tensor_coalesced"); });
  return run(signature(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, inputs), opts.timeout, outputs,
             [inputs, outputs](const Layout& layout, Millis timeout) {
               for (size_t i = 0; i < inputs.size(); ++i) allgatherOne(layout, outputs[i], inputs[i], timeout);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, [&] {
    checkCoalesced(inputs, outputs, getSize(), "reduce_scatter_tensor_coalesced");
    how = checkedReduction(opts.reduceOp, dtypeOf(outputs));
  });
  return run(signature(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, outputs, -1, opts.reduceOp.op_), opts.timeout,
             outputs,
             [inputs, outputs, how](const Layout& layout, Millis timeout) {
               for (size_t i = 0; i < inputs.size(); ++i) reduceScatterOne(layout, outputs[i], inputs[i], how, timeout);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  GlooReduction how;
  validate(c10d::OpType::REDUCE, [&] {
    checkRoot(opts.rootRank, getSize(), "reduce");
    how = checkedReduction(opts.reduceOp, dtypeOf(tensors));
  });
  return run(signature(c10d::OpType::REDUCE, tensors, opts.rootRank, opts.reduceOp.op_), opts.timeout, tensors,
             [tensors, how, root = opts.rootRank](const Layout& layout, Millis timeout) {
               const bool is_root = layout.rank == root;
               for (const auto& t : tensors) {
                 HostBuffer buffer(t);
                 // Only the root's tensor changes, as with NCCL: Gloo may use the others' as scratch space.
                 at::Tensor mine = valuesForGloo(contribution(buffer.flat(), how.reduction));
                 if (!is_root && mine.is_same(buffer.flat())) mine = mine.clone();
                 std::vector<at::Tensor> flat{mine};
                 c10d::ReduceOptions gloo_opts;
                 gloo_opts.reduceOp = c10d::ReduceOp(how.reduction.op);
                 gloo_opts.rootRank = root;
                 gloo_opts.timeout = timeout;
                 layout.groups.all->reduce(flat, gloo_opts)->wait();
                 if (!is_root) continue;
                 finish(how, mine, layout.size);
                 if (!mine.is_same(buffer.flat())) buffer.flat().copy_(mine);
                 buffer.writeBack();
               }
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  std::vector<at::Tensor> outs;
  validate(c10d::OpType::GATHER, [&] {
    checkRoot(opts.rootRank, getSize(), "gather");
    outs = gatherOutputs(outputs, inputs, getRank() == opts.rootRank, getSize());
  });
  return run(signature(c10d::OpType::GATHER, inputs, opts.rootRank), opts.timeout, outs,
             [input = inputs[0], outs, root = opts.rootRank](const Layout& layout, Millis timeout) {
               HostBuffer in(input);
               std::vector<HostBuffer> buffers(outs.begin(), outs.end());
               std::vector<std::vector<at::Tensor>> out_flats;
               if (!buffers.empty()) out_flats.push_back(bytesForGloo(flats(buffers)));
               std::vector<at::Tensor> in_flats{bytesForGloo(in.flat())};
               c10d::GatherOptions gloo_opts;
               gloo_opts.rootRank = root;
               gloo_opts.timeout = timeout;
               layout.groups.all->gather(out_flats, in_flats, gloo_opts)->wait();
               writeBack(buffers);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::GatherOptions& opts) {
  const bool root = getRank() == opts.rootRank;
  validate(c10d::OpType::GATHER, [&] {
    checkRoot(opts.rootRank, getSize(), "gather_single");
    if (root) checkSameKind(output, input, input.numel() * getSize(), "gather_single output");
  });
  return run(signature(c10d::OpType::GATHER, {input}, opts.rootRank), opts.timeout, {output},
             [input, output, root, root_rank = opts.rootRank](const Layout& layout, Millis timeout) {
               HostBuffer in(input);
               std::optional<HostBuffer> out;
               std::vector<std::vector<at::Tensor>> out_flats;
               if (root) {
                 out.emplace(output);
                 out_flats.push_back(bytesForGloo(pieces(out->flat(), layout.size)));
               }
               std::vector<at::Tensor> in_flats{bytesForGloo(in.flat())};
               c10d::GatherOptions gloo_opts;
               gloo_opts.rootRank = root_rank;
               gloo_opts.timeout = timeout;
               layout.groups.all->gather(out_flats, in_flats, gloo_opts)->wait();
               if (out) out->writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  std::vector<at::Tensor> ins;
  validate(c10d::OpType::SCATTER, [&] {
    checkRoot(opts.rootRank, getSize(), "scatter");
    ins = scatterInputs(inputs, outputs, getRank() == opts.rootRank, getSize());
  });
  return run(signature(c10d::OpType::SCATTER, outputs, opts.rootRank), opts.timeout, outputs,
             [ins, output = outputs[0], root = opts.rootRank](const Layout& layout, Millis timeout) {
               std::vector<HostBuffer> buffers(ins.begin(), ins.end());
               HostBuffer out(output);
               std::vector<std::vector<at::Tensor>> in_flats;
               if (!buffers.empty()) in_flats.push_back(bytesForGloo(flats(buffers)));
               std::vector<at::Tensor> out_flats{bytesForGloo(out.flat())};
               c10d::ScatterOptions gloo_opts;
               gloo_opts.rootRank = root;
               gloo_opts.timeout = timeout;
               layout.groups.all->scatter(out_flats, in_flats, gloo_opts)->wait();
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  std::vector<int64_t> out_sizes, in_sizes;
  validate(c10d::OpType::ALLTOALL_BASE, [&] {
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "all_to_all_single: input is ", input.scalar_type(),
                " but output is ", output.scalar_type());
    // As flat element counts: the transports see 1-D buffers, whose rows are elements.
    out_sizes = splitSizes(output_split_sizes, output, getSize(), "output");
    in_sizes = splitSizes(input_split_sizes, input, getSize(), "input");
  });
  return run(unsizedSignature(c10d::OpType::ALLTOALL_BASE, input.scalar_type()), opts.timeout, {output},
             [input, output, in_sizes, out_sizes](const Layout& layout, Millis timeout) {
               HostBuffer in(input);
               HostBuffer out(output);
               at::Tensor in_flat = bytesForGloo(in.flat());
               at::Tensor out_flat = bytesForGloo(out.flat());
               std::vector<int64_t> out_lengths = lengthsForGloo(out_sizes, output);
               std::vector<int64_t> in_lengths = lengthsForGloo(in_sizes, input);
               c10d::AllToAllOptions gloo_opts;
               gloo_opts.timeout = timeout;
               layout.groups.all->alltoall_base(out_flat, in_flat, out_lengths, in_lengths, gloo_opts)->wait();
               out.writeBack();
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  validate(c10d::OpType::ALLTOALL, [&] { checkAlltoall(outputs, inputs, getSize()); });
  return run(unsizedSignature(c10d::OpType::ALLTOALL, dtypeOf(inputs)), opts.timeout, outputs,
             [inputs, outputs](const Layout& layout, Millis timeout) {
               // Gloo's list form needs equal pieces: send them as one buffer with split sizes.
               std::vector<HostBuffer> ins(inputs.begin(), inputs.end());
               std::vector<HostBuffer> outs(outputs.begin(), outputs.end());
               std::vector<at::Tensor> in_pieces = bytesForGloo(flats(ins));
               std::vector<at::Tensor> out_pieces = bytesForGloo(flats(outs));
               std::vector<int64_t> in_lengths;
               std::vector<int64_t> out_lengths;
               for (const auto& p : in_pieces) in_lengths.push_back(p.numel());
               for (const auto& p : out_pieces) out_lengths.push_back(p.numel());
               at::Tensor in_all = at::cat(in_pieces);
               const int64_t received_total = std::accumulate(out_lengths.begin(), out_lengths.end(), int64_t{0});
               at::Tensor out_all = at::empty({received_total}, in_all.options());
               c10d::AllToAllOptions gloo_opts;
               gloo_opts.timeout = timeout;
               // Gloo takes the split sizes over (moves them): hand it copies.
               std::vector<int64_t> out_counts = out_lengths;
               std::vector<int64_t> in_counts = in_lengths;
               layout.groups.all->alltoall_base(out_all, in_all, out_counts, in_counts, gloo_opts)->wait();
               auto received = splitPieces(out_all, out_lengths);
               for (size_t i = 0; i < out_pieces.size(); ++i) out_pieces[i].copy_(received[i]);
               writeBack(outs);
             });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::runPosted(c10d::OpType op, const at::Tensor& tensor,
                                                           PostFn post, std::function<int(c10d::Work&)> done) {
  auto work = c10::make_intrusive<NeuronWork>(getRank(), op, std::vector<at::Tensor>{tensor});
  auto buffer = std::make_shared<std::optional<HostBuffer>>();  // lives until the operation completes
  queue_.submit([layout = layout_, completions = completions_, work, tensor, buffer, post = std::move(post),
                 done = std::move(done)] {
    c10::intrusive_ptr<c10d::Work> posted;
    try {
      buffer->emplace(tensor);
      std::vector<at::Tensor> flat{bytesForGloo((*buffer)->flat())};
      posted = post(*layout, flat);
    } catch (...) {
      work->fail(std::current_exception());
      return;
    }
    completions->submit([work, posted, buffer, done] {
      try {
        posted->wait();
        (*buffer)->writeBack();
        work->complete(done(*posted));
      } catch (...) {
        work->fail(std::current_exception());
      }
    });
  });
  return work;
}

namespace {

const at::Tensor& onlyTensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, what, ": the neuron process group over several hosts takes one tensor, got ",
              tensors.size());
  return tensors[0];
}

int noSource(c10d::Work&) { return -1; }

}  // namespace

c10::intrusive_ptr<c10d::Work> MultiHostBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkPeer(dst, getRank(), getSize(), "send: destination");
  return runPosted(
      c10d::OpType::SEND, onlyTensor(tensors, "send"),
      [dst, tag](const Layout& layout, std::vector<at::Tensor>& flat) { return layout.groups.all->send(flat, dst, tag); },
      noSource);
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkPeer(src, getRank(), getSize(), "recv: source");
  return runPosted(
      c10d::OpType::RECV, onlyTensor(tensors, "recv"),
      [src, tag](const Layout& layout, std::vector<at::Tensor>& flat) { return layout.groups.all->recv(flat, src, tag); },
      noSource);
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return runPosted(
      c10d::OpType::RECVANYSOURCE, onlyTensor(tensors, "recv"),
      [tag](const Layout& layout, std::vector<at::Tensor>& flat) { return layout.groups.all->recvAnysource(flat, tag); },
      [](c10d::Work& posted) { return posted.sourceRank(); });
}

c10::intrusive_ptr<c10d::Work> MultiHostBackend::barrier(const c10d::BarrierOptions& opts) {
  return run(signature(c10d::OpType::BARRIER, {}), opts.timeout, {}, [](const Layout& layout, Millis timeout) {
    c10d::BarrierOptions gloo_opts;
    gloo_opts.timeout = timeout;
    layout.groups.all->barrier(gloo_opts)->wait();
  });
}

}  // namespace torch_neuronx::distributed
