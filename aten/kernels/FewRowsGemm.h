// Matrix products with a few rows on the left and a weight on the right: the
// shape of batched decoding (x[M, K] times W^T, M a batch of up to 8). A
// general GEMM packs the weight into blocks before using it, which at a few
// rows costs more than the product; this kernel streams each weight row once
// and multiplies it with every left row while it is in the core's registers,
// as a bandwidth-bound NeuronCore kernel would. fp32 accumulation.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_neuronx {

// True when out = left[M, K] @ right[K, N] can run here: right is the
// transpose of a contiguous weight W [N, K] (as F.linear passes it), left has
// contiguous rows, M <= 8, the dtype is fp32 or bf16, and the CPU has AVX-512.
bool isFewRowsTimesWeight(const at::Tensor& left, const at::Tensor& right);

// out[M, N] (contiguous) = left @ right, for tensors that pass isFewRowsTimesWeight.
void fewRowsTimesWeightInto(at::Tensor& out, const at::Tensor& left, const at::Tensor& right);

}  // namespace torch_neuronx
