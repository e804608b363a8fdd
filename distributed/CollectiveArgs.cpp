#include "distributed/CollectiveArgs.h"

#include <ATen/ATen.h>

#include "distributed/Agreement.h"

namespace torch_neuronx::distributed {

void checkSameKind(const at::Tensor& t, const at::Tensor& reference, int64_t numel, const char* what) {
  TORCH_CHECK(t.scalar_type() == reference.scalar_type(), what, ": expected dtype ", reference.scalar_type(),
              ", got ", t.scalar_type());
  TORCH_CHECK(t.numel() == numel, what, ": expected ", numel, " elements, got ", t.numel());
}

void checkReducible(at::ScalarType dtype, c10d::ReduceOp::RedOpType op) {
  using RedOp = c10d::ReduceOp::RedOpType;
  const bool bitwise = op == RedOp::BAND || op == RedOp::BOR || op == RedOp::BXOR;
  TORCH_CHECK(op != RedOp::PREMUL_SUM && op <= RedOp::BXOR, "the neuron process group does not support ReduceOp ",
              reduceOpName(op));
  TORCH_CHECK(!bitwise || at::isIntegralType(dtype, /*includeBool=*/true), "ReduceOp ", reduceOpName(op),
              " needs an integer or bool tensor, got ", dtype);
  TORCH_CHECK(!(op == RedOp::AVG && dtype == at::kBool), "ReduceOp AVG is not defined for bool tensors");
  TORCH_CHECK(!at::isComplexType(dtype) || op == RedOp::SUM || op == RedOp::AVG || op == RedOp::PRODUCT,
              "ReduceOp ", reduceOpName(op), " is not defined for complex tensors");
}

void checkRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, what, ": invalid root rank ", root, " in a group of ", size);
}

void checkPeer(int peer, int rank, int size, const char* what) {
  TORCH_CHECK(peer >= 0 && peer < size && peer != rank, what, " rank ", peer, " is not another rank of a group of ",
              size);
}

void checkAllgather(const std::vector<std::vector<at::Tensor>>& outputs, const std::vector<at::Tensor>& inputs,
                    int size) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "all_gather: the neuron process group takes one tensor");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size, "all_gather: expected ", size, " output tensors, got ",
              outputs[0].size());
  for (const auto& out : outputs[0]) checkSameKind(out, inputs[0], inputs[0].numel(), "all_gather output");
}

void checkReduceScatter(const std::vector<at::Tensor>& outputs, const std::vector<std::vector<at::Tensor>>& inputs,
                        int size) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "reduce_scatter: the neuron process group takes one tensor");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size, "reduce_scatter: expected ", size, " input tensors, got ",
              inputs[0].size());
  for (const auto& in : inputs[0]) checkSameKind(in, outputs[0], outputs[0].numel(), "reduce_scatter input");
}

void checkCoalesced(const std::vector<at::Tensor>& whole, const std::vector<at::Tensor>& part, int size,
                    const char* what) {
  TORCH_CHECK(whole.size() == part.size(), what, ": ", whole.size(), " and ", part.size(),
              " tensors do not pair up");
  for (size_t i = 0; i < whole.size(); ++i) checkSameKind(whole[i], part[i], part[i].numel() * size, what);
}

void checkAlltoall(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, int size) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size && static_cast<int>(outputs.size()) == size,
              "all_to_all: expected ", size, " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  for (const auto& t : inputs) checkSameKind(t, outputs[0], t.numel(), "all_to_all input");
  for (const auto& t : outputs) checkSameKind(t, outputs[0], t.numel(), "all_to_all output");
}

std::vector<at::Tensor> gatherOutputs(const std::vector<std::vector<at::Tensor>>& outputs,
                                      const std::vector<at::Tensor>& inputs, bool root, int size) {
  TORCH_CHECK(inputs.size() == 1, "gather: the neuron process group takes one tensor");
  std::vector<at::Tensor> outs = root && !outputs.empty() ? outputs[0] : std::vector<at::Tensor>{};
  TORCH_CHECK(!root || static_cast<int>(outs.size()) == size, "gather: expected ", size,
              " output tensors on the root, got ", outs.size());
  for (const auto& out : outs) checkSameKind(out, inputs[0], inputs[0].numel(), "gather output");
  return outs;
}

std::vector<at::Tensor> scatterInputs(const std::vector<std::vector<at::Tensor>>& inputs,
                                      const std::vector<at::Tensor>& outputs, bool root, int size) {
  TORCH_CHECK(outputs.size() == 1, "scatter: the neuron process group takes one tensor");
  std::vector<at::Tensor> ins = root && !inputs.empty() ? inputs[0] : std::vector<at::Tensor>{};
  TORCH_CHECK(!root || static_cast<int>(ins.size()) == size, "scatter: expected ", size,
              " input tensors on the root, got ", ins.size());
  for (const auto& in : ins) checkSameKind(in, outputs[0], outputs[0].numel(), "scatter input");
  return ins;
}

std::vector<at::Tensor> flats(const std::vector<HostBuffer>& buffers) {
  std::vector<at::Tensor> result;
  for (const auto& b : buffers) result.push_back(b.flat());
  return result;
}

void writeBack(const std::vector<HostBuffer>& buffers) {
  for (const auto& b : buffers) b.writeBack();
}

std::vector<at::Tensor> splitPieces(const at::Tensor& flat, const std::vector<int64_t>& lengths) {
  std::vector<at::Tensor> result;
  int64_t offset = 0;
  for (int64_t n : lengths) {
    result.push_back(flat.narrow(0, offset, n));
    offset += n;
  }
  return result;
}

std::vector<int64_t> splitSizes(const std::vector<int64_t>& sizes, const at::Tensor& t, int size, const char* what) {
  if (sizes.empty()) {
    TORCH_CHECK(t.numel() % size == 0, "all_to_all_single: the ", what, " tensor's ", t.numel(),
                " elements do not split evenly between ", size, " ranks; pass split sizes");
    return std::vector<int64_t>(size, t.numel() / size);
  }
  TORCH_CHECK(static_cast<int>(sizes.size()) == size, "all_to_all_single: expected ", size, " ", what,
              " split sizes, got ", sizes.size());
  // Split sizes count rows of the first dimension; pieces are flat elements.
  const int64_t row = t.dim() > 0 && t.size(0) > 0 ? t.numel() / t.size(0) : 1;
  int64_t rows = 0;
  std::vector<int64_t> elements;
  for (int64_t n : sizes) {
    TORCH_CHECK(n >= 0, "all_to_all_single: negative split size ", n);
    rows += n;
    elements.push_back(n * row);
  }
  TORCH_CHECK(rows == (t.dim() > 0 ? t.size(0) : 1), "all_to_all_single: ", what, " split sizes add up to ", rows,
              ", but the tensor has ", t.dim() > 0 ? t.size(0) : 1, " rows");
  return elements;
}

std::vector<at::Tensor> pieces(const at::Tensor& flat, int size) {
  const int64_t n = flat.numel() / size;
  std::vector<at::Tensor> result;
  for (int r = 0; r < size; ++r) result.push_back(flat.narrow(0, r * n, n));
  return result;
}

Reduction reductionOf(const c10d::ReduceOp& reduce_op, at::ScalarType dtype) {
  if (reduce_op.op_ != c10d::ReduceOp::PREMUL_SUM) return {reduce_op.op_, std::nullopt};
  TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype),
              "ReduceOp PREMUL_SUM needs floating-point tensors, got ", dtype);
  const auto* supplement = dynamic_cast<const c10d::PreMulSumSupplement*>(reduce_op.supplement_.get());
  TORCH_CHECK(supplement, "ReduceOp PREMUL_SUM carries no factor");
  const double factor =
      supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>() : supplement->double_factor;
  return {c10d::ReduceOp::SUM, factor};
}

at::Tensor contribution(const at::Tensor& flat, const Reduction& reduction) {
  return reduction.factor ? flat.mul(*reduction.factor) : flat;
}

std::vector<at::Tensor> contributions(const std::vector<at::Tensor>& flats, const Reduction& reduction) {
  std::vector<at::Tensor> result;
  for (const auto& f : flats) result.push_back(contribution(f, reduction));
  return result;
}

void average(const at::Tensor& sum, int size) {
  if (at::isIntegralType(sum.scalar_type(), /*includeBool=*/false)) {
    sum.div_(size, "trunc");
  } else {
    sum.div_(size);
  }
}

at::ScalarType dtypeOf(const std::vector<at::Tensor>& tensors) {
  return tensors.empty() ? at::kFloat : tensors[0].scalar_type();
}

}  // namespace torch_neuronx::distributed
