// Matrix products in the shapes of decoding: one row (batch 1) or a few rows
// (a batch of up to kFewRows, or kAmxRows in bf16 on AMX) times a weight. A
// general GEMM packs the whole weight before using it once; the device's
// kernels (aten/kernels/) stream it, as a bandwidth-bound NeuronCore kernel
// would, 2-3x faster here.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_neuronx {

// left [M, K] @ right [K, N] (+ bias [N]) on the device's own kernel, for CPU
// tensors (aliases of device memory): right is either the transpose of a
// contiguous weight W [N, K] (as F.linear passes it) with M <= kFewRows (bf16
// with AMX and K a multiple of 32: M <= kAmxRows), or a contiguous matrix
// [K, N] (x @ W) with M <= kFewRows in fp32, M == 1 in bf16; fp32 or bf16
// throughout; bias undefined or contiguous [N]. nullopt when the shapes are
// not these: the caller runs the CPU GEMM. The result is fresh and contiguous.
std::optional<at::Tensor> decodeProduct(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias);

// The same product written into `out` (the out= variants Inductor's generated
// code calls); false, with `out` untouched, when the shapes are not these or
// `out` is not a contiguous [M, N] of the inputs' dtype. The kernels read the
// inputs while they write: `out` must not share memory with them (the callers
// in HotKernels.cpp take such calls elsewhere first, sharesMemory()).
bool decodeProductInto(const at::Tensor& left, const at::Tensor& right, const at::Tensor& bias, at::Tensor& out);

}  // namespace torch_neuronx
