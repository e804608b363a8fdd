// Attention for a few query tokens against a key/value cache: the shape of
// every decoding step. ATen's CPU flash-attention kernel blocks and packs for
// long sequences and opens an OpenMP region per call, which costs more than
// the arithmetic when one query row meets a cache of a few hundred keys. This
// kernel streams each head's keys and values once, as a NeuronCore's decode
// attention does, with fp32 softmax and accumulation.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace torch_neuronx {

// True when the arguments of _scaled_dot_product_flash_attention_for_cpu are a
// decode step this kernel computes: at most a few query rows, no dropout,
// fp32 or bf16, 4-d query/key/value with contiguous head vectors, key and
// value heads dividing the query heads, a mask (if any) of the query's dtype
// or fp32 that broadcasts to [batch, heads, queries, keys].
bool isDecodeAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double dropout_p,
                       const std::optional<at::Tensor>& attn_mask);

// The op's (output, logsumexp) for CPU tensors that pass isDecodeAttention,
// laid out as the CPU kernel lays them out. is_causal aligns the causal mask
// to the top left, as scaled_dot_product_attention does.
std::tuple<at::Tensor, at::Tensor> decodeAttention(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, bool is_causal,
                                                   const std::optional<at::Tensor>& attn_mask,
                                                   std::optional<double> scale);

}  // namespace torch_neuronx
