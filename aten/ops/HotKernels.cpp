// Unboxed kernels for the ops that dominate eager models (binary arithmetic,
// matmuls). They do what the boxed fallback does, without boxing the
// arguments and, for functional ops, without computing the output's shape
// twice: eager per-op overhead stays close to the CPU device's.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "aten/core/KernelMemory.h"
#include "aten/ops/CpuAlias.h"
#include "aten/ops/DecodeMatmul.h"
#include "aten/ops/DeviceOfCall.h"

namespace torch_neuronx {
namespace {

#define NEURON_BINARY_OP(name, schema)                                                                  \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {           \
    const auto device = deviceOf(schema, self, other);                                                  \
    KernelMemoryScope scope(device);                                                                    \
    return fromCpuResult(at::cpu::name(cpuReadAlias(self), cpuReadAlias(other), alpha), device);                \
  }                                                                                                     \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {             \
    KernelMemoryScope scope(deviceOf(schema "_", self, other));                                         \
    checkWritten(schema "_", self);                                                                     \
    at::Tensor alias = cpuAlias(self);                                                                  \
    at::cpu::name##_(alias, aliasSharing(other, self, alias), alpha);                                   \
    return self;                                                                                        \
  }                                                                                                     \
  at::Tensor& name##Out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,       \
                        at::Tensor& out) {                                                              \
    KernelMemoryScope scope(deviceOf(schema ".out", self, other, out));                                 \
    checkWritten(schema ".out", out);                                                                   \
    at::Tensor alias = cpuAlias(out);                                                                   \
    at::cpu::name##_out(alias, aliasSharing(self, out, alias), aliasSharing(other, out, alias), alpha); \
    syncFromAlias(alias, out);                                                                          \
    return out;                                                                                         \
  }

#define NEURON_PLAIN_BINARY_OP(name, schema)                                                            \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other) {                                    \
    const auto device = deviceOf(schema, self, other);                                                  \
    KernelMemoryScope scope(device);                                                                    \
    return fromCpuResult(at::cpu::name(cpuReadAlias(self), cpuReadAlias(other)), device);                       \
  }                                                                                                     \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& other) {                                      \
    KernelMemoryScope scope(deviceOf(schema "_", self, other));                                         \
    checkWritten(schema "_", self);                                                                     \
    at::Tensor alias = cpuAlias(self);                                                                  \
    at::cpu::name##_(alias, aliasSharing(other, self, alias));                                          \
    return self;                                                                                        \
  }                                                                                                     \
  at::Tensor& name##Out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {             \
    KernelMemoryScope scope(deviceOf(schema ".out", self, other, out));                                 \
    checkWritten(schema ".out", out);                                                                   \
    at::Tensor alias = cpuAlias(out);                                                                   \
    at::cpu::name##_out(alias, aliasSharing(self, out, alias), aliasSharing(other, out, alias));        \
    syncFromAlias(alias, out);                                                                          \
    return out;                                                                                         \
  }

NEURON_BINARY_OP(add, "aten::add")
NEURON_BINARY_OP(sub, "aten::sub")
NEURON_PLAIN_BINARY_OP(mul, "aten::mul")
NEURON_PLAIN_BINARY_OP(div, "aten::div")

// A matmul's out= over memory it reads (torch.mm(x, w.t(), out=w[:4])) would be
// overwritten while the GEMM's threads still read it, and the answer would hang
// on their timing: the product is made from the inputs as they are, then stored.
at::Tensor& storeProduct(const at::Tensor& product, at::Tensor& alias, at::Tensor& out) {
  TORCH_CHECK(alias.scalar_type() == product.scalar_type(), "Expected out tensor to have dtype ",
              product.scalar_type(), ", but got ", alias.scalar_type(), " instead");
  at::native::resize_output(alias, product.sizes());
  alias.copy_(product);
  syncFromAlias(alias, out);
  return out;
}

#define NEURON_MATMUL_OP(name, schema)                                                                  \
  at::Tensor name(const at::Tensor& self, const at::Tensor& mat2) {                                     \
    const auto device = deviceOf(schema, self, mat2);                                                   \
    KernelMemoryScope scope(device);                                                                    \
    return fromCpuResult(at::cpu::name(cpuReadAlias(self), cpuReadAlias(mat2)), device);                        \
  }                                                                                                     \
  at::Tensor& name##Out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {             \
    KernelMemoryScope scope(deviceOf(schema ".out", self, mat2, out));                                  \
    checkWritten(schema ".out", out);                                                                   \
    at::Tensor alias = cpuAlias(out), left = cpuReadAlias(self), right = cpuReadAlias(mat2);            \
    if (sharesMemory(alias, {left, right})) return storeProduct(at::cpu::name(left, right), alias, out); \
    at::cpu::name##_out(alias, left, right);                                                            \
    syncFromAlias(alias, out);                                                                          \
    return out;                                                                                         \
  }

NEURON_MATMUL_OP(bmm, "aten::bmm")

// Decoding multiplies one row (batch 1) or a few (a batch) by each weight: DecodeMatmul.h.
at::Tensor hostMm(const at::Tensor& left, const at::Tensor& right) {
  if (auto out = decodeProduct(left, right, at::Tensor())) return *out;
  return at::cpu::mm(left, right);
}

// F.linear with a bias (and GPT-2's Conv1D) in decoding's shapes: the bias joins the sum before rounding.
at::Tensor hostAddmm(const at::Tensor& bias, const at::Tensor& left, const at::Tensor& right, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  if (beta.equal(1) && alpha.equal(1)) {
    if (auto out = decodeProduct(left, right, bias)) return *out;
  }
  return at::cpu::addmm(bias, left, right, beta, alpha);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  const auto device = deviceOf("aten::mm", self, mat2);
  KernelMemoryScope scope(device);
  return fromCpuResult(hostMm(cpuReadAlias(self), cpuReadAlias(mat2)), device);
}

at::Tensor& mmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  KernelMemoryScope scope(deviceOf("aten::mm.out", self, mat2, out));
  checkWritten("aten::mm.out", out);
  at::Tensor alias = cpuAlias(out), left = cpuReadAlias(self), right = cpuReadAlias(mat2);
  if (sharesMemory(alias, {left, right})) return storeProduct(hostMm(left, right), alias, out);
  if (decodeProductInto(left, right, at::Tensor(), alias)) return out;
  at::cpu::mm_out(alias, left, right);
  syncFromAlias(alias, out);
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  const auto device = deviceOf("aten::addmm", self, mat1, mat2);
  KernelMemoryScope scope(device);
  return fromCpuResult(hostAddmm(cpuReadAlias(self), cpuReadAlias(mat1), cpuReadAlias(mat2), beta, alpha), device);
}

at::Tensor& addmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  KernelMemoryScope scope(deviceOf("aten::addmm.out", self, mat1, mat2, out));
  checkWritten("aten::addmm.out", out);
  // The CPU kernel copies the bias into `out` first, and that copy refuses a partial overlap.
  if (!beta.equal(0) && self.sizes() == out.sizes()) at::assert_no_partial_overlap(out, self);
  at::Tensor alias = cpuAlias(out), bias = cpuReadAlias(self), left = cpuReadAlias(mat1),
             right = cpuReadAlias(mat2);
  if (sharesMemory(alias, {bias, left, right})) {
    return storeProduct(hostAddmm(bias, left, right, beta, alpha), alias, out);
  }
  if (beta.equal(1) && alpha.equal(1) && decodeProductInto(left, right, bias, alias)) return out;
  at::cpu::addmm_out(alias, bias, left, right, beta, alpha);
  syncFromAlias(alias, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("add.out", TORCH_FN(addOut));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("sub_.Tensor", TORCH_FN(sub_));
  m.impl("sub.out", TORCH_FN(subOut));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul_.Tensor", TORCH_FN(mul_));
  m.impl("mul.out", TORCH_FN(mulOut));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("div_.Tensor", TORCH_FN(div_));
  m.impl("div.out", TORCH_FN(divOut));
  m.impl("mm", TORCH_FN(mm));
  m.impl("mm.out", TORCH_FN(mmOut));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("bmm.out", TORCH_FN(bmmOut));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("addmm.out", TORCH_FN(addmmOut));
}

}  // namespace torch_neuronx
