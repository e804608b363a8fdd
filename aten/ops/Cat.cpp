// cat of contiguous tensors of one dtype, as block copies. Decoding appends
// each step's keys and values to its cache with torch.cat along the sequence
// axis (transformers' DynamicCache), 24 calls a token for a 12-layer model;
// ATen's CPU kernel copies those at a few GB/s (84-91 us for a 300 KB bf16
// cache of 8 sequences), while the result is a handful of contiguous runs per
// outer index. Other concatenations keep the CPU kernel.
#include <ATen/ops/cat_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "aten/core/KernelMemory.h"
#include "aten/kernels/RowParallel.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

constexpr int64_t kMinParallelBytes = int64_t{64} << 10;  // less is quicker to copy than to hand out

// Whether `parts` (CPU aliases of one rank) concatenate along `dim` as contiguous blocks: one dtype,
// equal sizes but along `dim`, contiguous, and something to copy.
bool blockwise(const std::vector<at::Tensor>& parts, int64_t dim) {
  const at::Tensor& first = parts[0];
  int64_t numel = 0;
  for (const at::Tensor& t : parts) {
    if (t.scalar_type() != first.scalar_type() || !t.is_contiguous()) return false;
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d != dim && t.size(d) != first.size(d)) return false;
    }
    numel += t.numel();
  }
  return numel > 0;
}

at::Tensor catBlocks(const std::vector<at::Tensor>& parts, int64_t dim) {
  const at::Tensor& first = parts[0];
  std::vector<int64_t> sizes = first.sizes().vec();
  sizes[dim] = 0;
  for (const at::Tensor& t : parts) sizes[dim] += t.size(dim);
  at::Tensor out = at::empty(sizes, first.options());
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  const int64_t element = first.element_size();
  const int64_t out_row = out.numel() / outer * element;  // bytes of out per outer index (outer >= 1: blockwise)
  std::vector<int64_t> rows;  // bytes of each part per outer index
  for (const at::Tensor& t : parts) rows.push_back(t.numel() / outer * element);
  auto* dst = static_cast<char*>(out.data_ptr());
  // Outer indices split between the device's threads: a decode step's caches are cold (the weights
  // streamed through since), and one core alone reads memory at half the rate of two.
  const int64_t min_outer = std::max<int64_t>(1, kMinParallelBytes / std::max<int64_t>(out_row, 1));
  parallelRows(outer, min_outer, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      char* out_at = dst + o * out_row;
      for (std::size_t p = 0; p < parts.size(); ++p) {
        if (rows[p] == 0) continue;
        std::memcpy(out_at, static_cast<const char*>(parts[p].const_data_ptr()) + o * rows[p], rows[p]);
        out_at += rows[p];
      }
    }
  });
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  const c10::DeviceIndex device = deviceOfList("aten::cat", tensors);
  KernelMemoryScope memory(device);
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : tensors) parts.push_back(cpuReadAlias(t));
  // Parts of one rank only: the CPU kernel keeps its rules for the rest (it skips legacy empty 1-D parts).
  bool one_rank = !parts.empty() && parts[0].dim() > 0;
  for (const at::Tensor& t : parts) one_rank = one_rank && t.dim() == parts[0].dim();
  if (one_rank && dim >= -parts[0].dim() && dim < parts[0].dim()) {
    const int64_t wrapped = c10::maybe_wrap_dim(dim, parts[0].dim());
    if (blockwise(parts, wrapped)) return fromCpuResult(catBlocks(parts, wrapped), device);
  }
  return fromCpuResult(at::cpu::cat(parts, dim), device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("cat", TORCH_FN(cat)); }

}  // namespace torch_neuronx
