// What the neuron backends share about a collective's arguments: checks that
// raise on the calling thread, the flat pieces the transports move, and how a
// c10d ReduceOp maps onto plain reductions.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <vector>

#include "distributed/HostBuffer.h"

namespace torch_neuronx::distributed {

// Argument checks for a group of `size` ranks; they raise on the calling thread.
void checkSameKind(const at::Tensor& t, const at::Tensor& reference, int64_t numel, const char* what);
void checkRoot(int64_t root, int size, const char* what);
// A reduction (PREMUL_SUM already turned into SUM by reductionOf) the groups can run on `dtype`.
void checkReducible(at::ScalarType dtype, c10d::ReduceOp::RedOpType op);
// A send's destination or a recv's source: another rank of the group.
void checkPeer(int peer, int rank, int size, const char* what);
void checkAllgather(const std::vector<std::vector<at::Tensor>>& outputs, const std::vector<at::Tensor>& inputs,
                    int size);
void checkReduceScatter(const std::vector<at::Tensor>& outputs, const std::vector<std::vector<at::Tensor>>& inputs,
                        int size);
// The coalesced single-tensor forms: each `whole` holds size x its `part`.
void checkCoalesced(const std::vector<at::Tensor>& whole, const std::vector<at::Tensor>& part, int size,
                    const char* what);
void checkAlltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, int size);
// gather's outputs on the root (checked), nothing elsewhere.
std::vector<at::Tensor> gatherOutputs(const std::vector<std::vector<at::Tensor>>& outputs,
                                      const std::vector<at::Tensor>& inputs, bool root, int size);
// scatter's inputs on the root (checked), nothing elsewhere.
std::vector<at::Tensor> scatterInputs(const std::vector<std::vector<at::Tensor>>& inputs,
                                      const std::vector<at::Tensor>& outputs, bool root, int size);

std::vector<at::Tensor> flats(const std::vector<HostBuffer>& buffers);
void writeBack(const std::vector<HostBuffer>& buffers);

// Pieces of a flat buffer with the given lengths (all_to_all_single's split sizes).
std::vector<at::Tensor> splitPieces(const at::Tensor& flat, const std::vector<int64_t>& lengths);
// all_to_all_single's split sizes (rows of dim 0) as flat element counts, or
// equal pieces when none are given; raises when they do not fit the tensor.
std::vector<int64_t> splitSizes(const std::vector<int64_t>& sizes, const at::Tensor& t, int size, const char* what);
// Rank-sized pieces of a flat buffer (the single-tensor collectives).
std::vector<at::Tensor> pieces(const at::Tensor& flat, int size);

// A ReduceOp as a plain reduction: PREMUL_SUM (NCCL's and FSDP2's pre-scaled
// sum) is a SUM over inputs multiplied by its factor first.
struct Reduction {
  c10d::ReduceOp::RedOpType op;
  std::optional<double> factor;
};
// Raises for PREMUL_SUM on non-floating tensors or without a factor.
Reduction reductionOf(const c10d::ReduceOp& reduce_op, at::ScalarType dtype);
// The contribution of `flat` to a reduction: itself, or a scaled copy for PREMUL_SUM.
at::Tensor contribution(const at::Tensor& flat, const Reduction& reduction);
std::vector<at::Tensor> contributions(const std::vector<at::Tensor>& flats, const Reduction& reduction);
// AVG's last step: divide a sum by the group size; integers truncate, as NCCL does.
void average(const at::Tensor& sum, int size);

at::ScalarType dtypeOf(const std::vector<at::Tensor>& tensors);

}  // namespace torch_neuronx::distributed
