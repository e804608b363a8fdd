// Matrix products with a single row on the left: the shape of every matmul
// in batch-1 decoding (x[1, K] times a weight). A general GEMM packs the
// whole weight before using it once; a matrix-vector product streams it, as
// a bandwidth-bound NeuronCore kernel would, about 3x faster here.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_neuronx {

// True when `left` [1, K] times `right` [K, N] can run as a matrix-vector
// product: `right` is the transpose of a contiguous weight (as F.linear
// passes it) and the dtype has a fast gemv.
bool isRowTimesWeight(const at::Tensor& left, const at::Tensor& right);

// out[1, N] = left[1, K] @ right[K, N], for CPU tensors that pass isRowTimesWeight.
void rowTimesWeightInto(at::Tensor& out, const at::Tensor& left, const at::Tensor& right);

// True when `left` [1, K] times `right` [K, N] multiplies a row by a
// contiguous matrix (x @ W with W stored [K, N]) of fp32 or bf16.
bool isRowTimesMatrix(const at::Tensor& left, const at::Tensor& right);

// out[1, N] (contiguous) = left @ right for tensors that pass isRowTimesMatrix:
// the matrix's rows streamed once, scaled and summed in fp32.
void rowTimesMatrixInto(at::Tensor& out, const at::Tensor& left, const at::Tensor& right);

}  // namespace torch_neuronx
