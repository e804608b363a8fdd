// Sparse layouts and PyTorch's quantized tensors on neuron. A NeuronCore computes on dense tiles
// (its sparsity and low-precision support is dense fp8/int8 data with explicit scales), and the
// device does not emulate what the hardware lacks. Tensors of these kinds can still come into being
// on neuron through composite constructors that never dispatch to the device (a CSR tensor's
// `.to("neuron")` moves its three dense parts), so every operator that reaches one of these keys
// raises an error that names the kind and the way out, rather than ATen's "could not run".
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

void refuseSparse(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().operator_name(),
                              ": neuron supports strided (dense) tensors only; sparse layouts (COO, CSR, CSC, BSR, "
                              "BSC) are not supported. Keep sparse tensors on the CPU, or call .to_dense() before "
                              "moving them to neuron.");
}

void refuseQuantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().operator_name(),
                              ": neuron does not support PyTorch's quantized tensors (quint8, qint8, qint32, "
                              "quint4x2, ...). Use int8 or float8 tensors with explicit scales, or keep quantized "
                              "tensors on the CPU.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseSparse>()); }

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseSparse>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseQuantized>());
}

}  // namespace torch_neuronx
