// The autocast policy for torch.autocast("neuron"). torch registers no
// AutocastPrivateUse1 fallthrough, so ops without a policy must be let
// through explicitly, and every policy list CUDA uses is registered: a partial
// policy breaks real models (SDPA sees mixed dtypes).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace at::autocast {
namespace {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

#define NEURON_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
}

#undef NEURON_LOWER_PRECISION
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE

}  // namespace
}  // namespace at::autocast
