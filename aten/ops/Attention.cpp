// scaled_dot_product_attention picks its kernel through a per-device choice
// function; for devices without one it uses the unfused math version. neuron
// asks the CPU device's choice, so attention runs the same fused CPU kernel
// (flash attention for CPU) on device memory and rounds exactly as on CPU.
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>

namespace torch_neuronx {
namespace {

// The CPU choice reads only shapes, strides and dtypes, never data, so it
// also serves fake tensors while torch.compile traces.
int64_t chooseAttentionKernel(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace
}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::chooseAttentionKernel)
}  // namespace at::native
