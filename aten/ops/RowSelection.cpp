// The two selections a generation loop makes over each sequence's vocabulary
// row every step: torch.where(mask, -inf, scores) (transformers' min-length
// processors; the mask broadcast along the batch) and argmax(scores, -1)
// (greedy search). ATen's CPU kernels run them element by element through a
// three-input iterator and a scalar reduction: about 135 us each over 8 rows
// of 32,000 fp32 logits.
// Here both are row loops (aten/kernels/RowSelect.h), rows split between the
// device's threads. Other forms keep the CPU kernels.
#include <ATen/ops/argmax_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/where_cpu_dispatch.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "aten/core/KernelMemory.h"
#include "aten/kernels/RowParallel.h"
#include "aten/kernels/RowSelect.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

constexpr int64_t kMinRowElements = 1024;           // shorter rows gain nothing over the CPU kernel
constexpr int64_t kMinParallelElements = 1 << 16;  // less is quicker done than handed to a second thread

// ---- where(condition, scalar, tensor) and where(condition, tensor, scalar) ----

template <typename Bits>
void selectRows(const bool* mask, int64_t row, const Bits* values, Bits fill, bool fill_where_true, Bits* out,
                int64_t rows) {
  parallelRows(rows, std::max<int64_t>(1, kMinParallelElements / row), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) selectRow(mask, values + r * row, fill, fill_where_true, out + r * row, row);
  });
}

// The form this file handles: a bool condition whose shape is the values' trailing dims (leading 1s
// aside), contiguous, rows long enough; a 0-dim fill; values contiguous, of the result's dtype, and
// of the result's shape (nothing broadcasts them).
bool rowWhere(const at::Tensor& condition, const at::Tensor& fill, const at::Tensor& values) {
  if (condition.scalar_type() != at::kBool || fill.dim() != 0 || !condition.is_contiguous() ||
      !values.is_contiguous() || condition.dim() > values.dim() || condition.numel() < kMinRowElements) {
    return false;
  }
  if (at::result_type(fill, values) != values.scalar_type()) return false;
  const int64_t skip = values.dim() - condition.dim();
  for (int64_t d = 0; d < condition.dim(); ++d) {
    if (condition.size(d) != values.size(skip + d)) return false;
  }
  const std::size_t size = values.element_size();
  return size == 1 || size == 2 || size == 4 || size == 8;
}

template <typename Bits>
Bits fillBits(const at::Tensor& fill, c10::ScalarType dtype) {
  // The fill in the result's dtype, as the CPU kernel converts it; where only moves bits.
  const at::Tensor converted = fill.to(at::kCPU, dtype);
  Bits bits;
  std::memcpy(&bits, converted.const_data_ptr(), sizeof(Bits));
  return bits;
}

template <typename Bits>
void selectAs(const at::Tensor& condition, const at::Tensor& fill, const at::Tensor& values, bool fill_where_true,
              at::Tensor& out) {
  const int64_t row = condition.numel();
  selectRows<Bits>(condition.const_data_ptr<bool>(), row, static_cast<const Bits*>(values.const_data_ptr()),
                   fillBits<Bits>(fill, values.scalar_type()), fill_where_true, static_cast<Bits*>(out.data_ptr()),
                   values.numel() / row);
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto device = deviceOf("aten::where.self", condition, self, other);
  KernelMemoryScope memory(device);
  const at::Tensor cond = cpuReadAlias(condition), a = cpuReadAlias(self), b = cpuReadAlias(other);
  const bool fill_where_true = rowWhere(cond, a, b);
  if (!fill_where_true && !rowWhere(cond, b, a)) return fromCpuResult(at::cpu::where(cond, a, b), device);
  const at::Tensor& fill = fill_where_true ? a : b;
  const at::Tensor& values = fill_where_true ? b : a;
  at::Tensor out = at::empty(values.sizes(), values.options());
  switch (values.element_size()) {
    case 1: selectAs<uint8_t>(cond, fill, values, fill_where_true, out); break;
    case 2: selectAs<uint16_t>(cond, fill, values, fill_where_true, out); break;
    case 4: selectAs<uint32_t>(cond, fill, values, fill_where_true, out); break;
    default: selectAs<uint64_t>(cond, fill, values, fill_where_true, out); break;
  }
  return fromCpuResult(out, device);
}

// ---- argmax along contiguous rows ----

template <typename T>
void argmaxRows(const at::Tensor& values, int64_t row, at::Tensor& out) {
  const T* data = values.const_data_ptr<T>();
  int64_t* indices = out.data_ptr<int64_t>();
  const int64_t rows = values.numel() / row;
  parallelRows(rows, std::max<int64_t>(1, kMinParallelElements / row), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) indices[r] = argmaxRow(data + r * row, row);
  });
}

at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const auto device = deviceOf("aten::argmax", self);
  KernelMemoryScope memory(device);
  const at::Tensor values = cpuReadAlias(self);
  const c10::ScalarType dtype = values.scalar_type();
  const bool floating = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
  const bool last = dim.has_value() && values.dim() > 0 && c10::maybe_wrap_dim(*dim, values.dim()) == values.dim() - 1;
  const int64_t row = last ? values.size(-1) : values.numel();
  if (!floating || !values.is_contiguous() || row < kMinRowElements || (dim.has_value() && !last)) {
    return fromCpuResult(at::cpu::argmax(values, dim, keepdim), device);
  }
  std::vector<int64_t> sizes;
  if (last) {
    sizes = values.sizes().vec();
    if (keepdim) sizes.back() = 1; else sizes.pop_back();
  } else if (keepdim) {
    sizes.assign(values.dim(), 1);  // argmax over everything with keepdim keeps every dim as 1
  }
  at::Tensor out = at::empty(sizes, values.options().dtype(at::kLong));
  if (dtype == at::kFloat) argmaxRows<float>(values, row, out);
  else if (dtype == at::kBFloat16) argmaxRows<c10::BFloat16>(values, row, out);
  else argmaxRows<c10::Half>(values, row, out);
  return fromCpuResult(out, device);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("where.self", TORCH_FN(where));
  m.impl("argmax", TORCH_FN(argmax));
}

}  // namespace torch_neuronx
