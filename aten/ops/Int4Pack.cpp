// Int4 weight-only products (torch.ops.aten._convert_weight_to_int4pack and
// _weight_int4pack_mm): the pair that quantisation libraries and PyTorch's
// tests call on every device but the CPU, which has its own `_for_cpu` pair
// with other shapes. A packed weight is opaque: only the product reads it. On
// neuron it holds the CPU kernels' packing, in the shape torch's meta
// functions give the accelerator pair (int32 [N / 8, K / (tiles * 16), 32,
// tiles / 2], N * K / 2 bytes either way), so that traced graphs see the
// shapes they expect and the CPU kernels do the arithmetic.
#include <ATen/ops/_convert_weight_to_int4pack_for_cpu.h>
#include <ATen/ops/_weight_int4pack_mm_for_cpu.h>
#include <ATen/ops/stack.h>
#include <torch/library.h>

#include "aten/core/KernelMemory.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

// weight: uint8 [N, K / 2], two 4-bit values per byte, the even k in the high half (the accelerator pair's
// input); the CPU packer takes int32 [N, K].
at::Tensor convertWeightToInt4pack(const at::Tensor& weight, int64_t inner_k_tiles) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kByte,
              "_convert_weight_to_int4pack: expected a uint8 [N, K / 2] weight, got ", weight.scalar_type(), " ",
              weight.sizes());
  TORCH_CHECK(inner_k_tiles == 2 || inner_k_tiles == 4 || inner_k_tiles == 8,
              "_convert_weight_to_int4pack: inner_k_tiles must be 2, 4 or 8, got ", inner_k_tiles);
  const int64_t n = weight.size(0), k = weight.size(1) * 2;
  TORCH_CHECK(n % 8 == 0 && k % (inner_k_tiles * 16) == 0, "_convert_weight_to_int4pack: N (", n,
              ") must be a multiple of 8 and K (", k, ") of inner_k_tiles * 16 (", inner_k_tiles * 16, ")");
  const auto device = deviceOf("aten::_convert_weight_to_int4pack", weight);
  KernelMemoryScope memory(device);
  const at::Tensor bytes = cpuReadAlias(weight).to(at::kInt);
  const at::Tensor values = at::stack({bytes.bitwise_right_shift(4), bytes.bitwise_and(15)}, 2).reshape({n, k});
  const at::Tensor packed = at::_convert_weight_to_int4pack_for_cpu(values, inner_k_tiles).contiguous();
  return fromCpuResult(packed.view(at::kInt).view({n / 8, k / (inner_k_tiles * 16), 32, inner_k_tiles / 2}),
                       device);
}

at::Tensor weightInt4packMm(const at::Tensor& input, const at::Tensor& packed, int64_t group_size,
                            const at::Tensor& scales_and_zeros) {
  TORCH_CHECK(packed.dim() == 4 && packed.scalar_type() == at::kInt && packed.size(2) == 32 && packed.is_contiguous(),
              "_weight_int4pack_mm: expected a weight from _convert_weight_to_int4pack (int32 [N / 8, K / (tiles * 16), "
              "32, tiles / 2]), got ", packed.scalar_type(), " ", packed.sizes());
  const int64_t n = packed.size(0) * 8, k = packed.size(1) * packed.size(3) * 2 * 16;
  const auto device = deviceOf("aten::_weight_int4pack_mm", input, packed, scales_and_zeros);
  KernelMemoryScope memory(device);
  const at::Tensor bytes = cpuReadAlias(packed).view(at::kByte).view({n, k / 2});
  return fromCpuResult(
      at::_weight_int4pack_mm_for_cpu(cpuReadAlias(input), bytes, group_size, cpuReadAlias(scales_and_zeros)), device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_convert_weight_to_int4pack", TORCH_FN(convertWeightToInt4pack));
  m.impl("_weight_int4pack_mm", TORCH_FN(weightInt4packMm));
}

}  // namespace torch_neuronx
