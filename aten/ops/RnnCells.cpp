// The fused LSTM and GRU cells that ATen's recurrent layers call on every
// accelerator (RNN.cpp sends CUDA, XPU and PrivateUse1 inputs to
// _thnn_fused_lstm_cell / _thnn_fused_gru_cell; the CPU device takes another
// path and has no kernel for them). Here each cell is the CPU path's own
// arithmetic, in the same order, on neuron tensors; registered for the autograd
// key too, so that autograd differentiates those ops and the fused backward
// kernels (and their workspace layout) are never needed.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace torch_neuronx {
namespace {

// A gate projection with its bias, as the CPU path's at::linear gives it.
at::Tensor withBias(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

// Returns (hy, cy, workspace); the workspace (the activated gates [i, f, g, o]) is what the fused backward
// would read, and nothing reads it here: autograd differentiates the ops above.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                        const at::Tensor& cx,
                                                        const std::optional<at::Tensor>& input_bias,
                                                        const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) % 4 == 0,
              "_thnn_fused_lstm_cell: input_gates and hidden_gates must both be [batch, 4 * hidden], got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  const at::Tensor gates = withBias(hidden_gates, hidden_bias) + withBias(input_gates, input_bias);
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor in_gate = chunks[0].sigmoid(), forget_gate = chunks[1].sigmoid();
  const at::Tensor cell_gate = chunks[2].tanh(), out_gate = chunks[3].sigmoid();
  at::Tensor cy = forget_gate * cx + in_gate * cell_gate;
  at::Tensor hy = out_gate * cy.tanh();
  at::Tensor workspace = at::cat({in_gate, forget_gate, cell_gate, out_gate}, 1);
  return {std::move(hy), std::move(cy), std::move(workspace)};
}

// Returns (hy, workspace); the workspace ([r, z, n, the hidden n-part, hx]) is, as for the LSTM, unread.
std::tuple<at::Tensor, at::Tensor> gruCell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                           const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                           const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) % 3 == 0,
              "_thnn_fused_gru_cell: input_gates and hidden_gates must both be [batch, 3 * hidden], got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  const auto in_parts = withBias(input_gates, input_bias).chunk(3, 1);
  const auto hidden_parts = withBias(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor reset_gate = (hidden_parts[0] + in_parts[0]).sigmoid();
  const at::Tensor update_gate = (hidden_parts[1] + in_parts[1]).sigmoid();
  const at::Tensor new_gate = (in_parts[2] + hidden_parts[2] * reset_gate).tanh();
  at::Tensor hy = (hx - new_gate) * update_gate + new_gate;
  at::Tensor workspace = at::cat({reset_gate, update_gate, new_gate, hidden_parts[2], hx}, 1);
  return {std::move(hy), std::move(workspace)};
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstmCell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gruCell));
}

// Under torch.inference_mode the autograd key is skipped: the same arithmetic.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstmCell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gruCell));
}

}  // namespace
}  // namespace torch_neuronx
