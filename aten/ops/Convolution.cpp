// Convolutions. torch routes convolutions on devices it does not know to the
// "overrideable" pair; they run ATen's CPU convolution (oneDNN where it
// applies) on zero-copy aliases of device memory.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "aten/core/KernelMemory.h"
#include "aten/ops/CpuAlias.h"

namespace torch_neuronx {
namespace {

std::optional<at::Tensor> aliasOf(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(cpuReadAlias(*t)) : std::nullopt;
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  TORCH_CHECK(weight.device() == input.device() && (!bias.has_value() || !bias->defined() ||
                                                    bias->device() == input.device()),
              "Expected all tensors to be on the same device (convolution input on ", input.device(), ", weight on ",
              weight.device(), ")");
  KernelMemoryScope scope(input.device().index());
  at::Tensor out = at::convolution(cpuReadAlias(input), cpuReadAlias(weight), aliasOf(bias), stride, padding, dilation,
                                   transposed, output_padding, groups);
  return fromCpuResult(out, input.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  const auto device = input.device().index();
  KernelMemoryScope scope(device);
  const int64_t bias_size = transposed ? weight.size(1) * groups : weight.size(0);
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      cpuReadAlias(grad_output), cpuReadAlias(input), cpuReadAlias(weight), at::IntArrayRef{bias_size}, stride, padding,
      dilation, transposed, output_padding, groups, output_mask);
  return {fromCpuResult(grad_input, device), fromCpuResult(grad_weight, device), fromCpuResult(grad_bias, device)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackward));
}

}  // namespace torch_neuronx
