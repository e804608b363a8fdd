// scaled_dot_product_attention picks its kernel through a per-device choice
// function; for devices without one it uses the unfused math version. neuron
// asks the CPU device's choice, so attention runs the fused CPU kernel (flash
// attention for CPU) on device memory and rounds exactly as on CPU; decode
// steps (a few query rows) run the device's own kernel (DecodeAttention.h).
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <torch/library.h>

#include "aten/core/KernelMemory.h"
#include "aten/kernels/DecodeAttention.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

// The CPU choice reads only shapes, strides and dtypes, never data, so it
// also serves fake tensors while torch.compile traces.
int64_t chooseAttentionKernel(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

std::tuple<at::Tensor, at::Tensor> flashAttention(const at::Tensor& query, const at::Tensor& key,
                                                  const at::Tensor& value, double dropout_p, bool is_causal,
                                                  const std::optional<at::Tensor>& attn_mask,
                                                  std::optional<double> scale) {
  const auto device = deviceOf("aten::_scaled_dot_product_flash_attention_for_cpu", query, key, value, attn_mask);
  KernelMemoryScope memory(device);
  const at::Tensor q = cpuReadAlias(query), k = cpuReadAlias(key), v = cpuReadAlias(value);
  std::optional<at::Tensor> mask;
  if (attn_mask) mask = cpuReadAlias(*attn_mask);
  auto [out, logsumexp] = isDecodeAttention(q, k, v, dropout_p, mask)
                              ? decodeAttention(q, k, v, is_causal, mask, scale)
                              : at::cpu::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal,
                                                                                     mask, scale);
  return {fromCpuResult(out, device), fromCpuResult(logsumexp, device)};
}

}  // namespace
}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::chooseAttentionKernel)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(torch_neuronx::flashAttention));
}
