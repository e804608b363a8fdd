#include "aten/kernels/DecodeAttention.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {
namespace {

// Beyond a few query rows (prefill, training) the blocked CPU kernel wins.
constexpr int64_t kMaxQueryRows = 8;

// One [batch, heads, rows, width] operand: base pointer and element strides.
template <typename T>
struct Strided4d {
  const T* data;
  int64_t s0, s1, s2, s3;

  explicit Strided4d(const at::Tensor& t)
      : data(t.const_data_ptr<T>()), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  const T* at(int64_t b, int64_t h, int64_t i) const { return data + b * s0 + h * s1 + i * s2; }
};

template <typename T, typename Mask>
struct DecodeProblem {
  Strided4d<T> query, key, value;
  std::optional<Strided4d<Mask>> mask;  // expanded to [batch, heads, queries, keys]
  T* out;
  int64_t out_s0, out_s1, out_s2;
  float* logsumexp;
  int64_t lse_s0, lse_s1, lse_s2;
  int64_t heads, queries, keys, width, group;  // group: query heads per key/value head
  float scale;
  bool causal;

  // Softmax of one query row's scores over the keys, then its weighted sum of values.
  void attendRow(int64_t row, float* scores, float* query_row, float* acc) const {
    const int64_t b = row / (heads * queries), h = (row / queries) % heads, i = row % queries;
    const int64_t kv_head = h / group;
    const int64_t visible = causal ? std::min(keys, i + 1) : keys;  // top-left causal alignment
    const T* q = query.at(b, h, i);
    for (int64_t e = 0; e < width; ++e) query_row[e] = static_cast<float>(q[e]);

    float max_score = -std::numeric_limits<float>::infinity();
    const Mask* mask_row = mask ? mask->at(b, h, i) : nullptr;
    for (int64_t j = 0; j < visible; ++j) {
      float s = dotWidened(key.at(b, kv_head, j), query_row, width) * scale;
      if (mask_row) s += static_cast<float>(mask_row[j * mask->s3]);
      scores[j] = s;
      max_score = std::max(max_score, s);
    }
    T* o = out + b * out_s0 + h * out_s1 + i * out_s2;
    float& lse = logsumexp[b * lse_s0 + h * lse_s1 + i * lse_s2];
    if (max_score == -std::numeric_limits<float>::infinity()) {  // every key masked: zeros and 0, as the CPU kernel
      std::fill(o, o + width, T(0));
      lse = 0.f;
      return;
    }
    float sum = 0.f;
    for (int64_t j = 0; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
    std::fill(acc, acc + width, 0.f);
    for (int64_t j = 0; j < visible; ++j) {
      if (scores[j] != 0.f) axpyWidened(scores[j], value.at(b, kv_head, j), acc, width);
    }
    const float inverse = 1.f / sum;
    for (int64_t e = 0; e < width; ++e) o[e] = static_cast<T>(acc[e] * inverse);
    lse = max_score + std::log(sum);
  }

  void run(int64_t rows) const {
    // Chunks of at least 64 KiB of keys and values: smaller ones cost more to hand out than they take.
    const int64_t row_bytes = 2 * keys * width * static_cast<int64_t>(sizeof(T));
    const int64_t min_rows = std::max<int64_t>(1, (int64_t{64} << 10) / std::max<int64_t>(row_bytes, 1));
    parallelRows(rows, min_rows, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(keys + 2 * width);
      for (int64_t r = begin; r < end; ++r) attendRow(r, scratch.data(), scratch.data() + keys, scratch.data() + keys + width);
    });
  }
};

template <typename T, typename Mask>
void attend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, bool is_causal,
            const std::optional<at::Tensor>& mask, float scale, at::Tensor& out, at::Tensor& logsumexp) {
  const int64_t batch = query.size(0), heads = query.size(1), queries = query.size(2);
  DecodeProblem<T, Mask> problem{Strided4d<T>(query), Strided4d<T>(key), Strided4d<T>(value),
                                 std::nullopt, out.data_ptr<T>(), out.stride(0), out.stride(1), out.stride(2),
                                 logsumexp.data_ptr<float>(), logsumexp.stride(0), logsumexp.stride(1),
                                 logsumexp.stride(2), heads, queries, key.size(2), query.size(3),
                                 heads / key.size(1), scale, is_causal};
  if (mask) problem.mask.emplace(*mask);
  problem.run(batch * heads * queries);
}

}  // namespace

bool isDecodeAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double dropout_p,
                       const std::optional<at::Tensor>& attn_mask) {
  if (dropout_p != 0.0 || query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return false;
  const auto dtype = query.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kBFloat16) || key.scalar_type() != dtype || value.scalar_type() != dtype)
    return false;
  const int64_t batch = query.size(0), heads = query.size(1), queries = query.size(2), width = query.size(3);
  const int64_t keys = key.size(2), kv_heads = key.size(1);
  if (queries < 1 || queries > kMaxQueryRows || keys < 1 || width < 1 || kv_heads < 1 || heads % kv_heads != 0)
    return false;
  if (key.size(0) != batch || value.size(0) != batch || value.size(1) != kv_heads || value.size(2) != keys ||
      key.size(3) != width || value.size(3) != width)
    return false;
  for (const at::Tensor* t : {&query, &key, &value}) {
    if (t->stride(3) != 1) return false;
  }
  if (!attn_mask) return true;
  const at::Tensor& mask = *attn_mask;
  return (mask.scalar_type() == dtype || mask.scalar_type() == at::kFloat) && mask.dim() >= 2 && mask.dim() <= 4 &&
         at::is_expandable_to(mask.sizes(), {batch, heads, queries, keys});
}

std::tuple<at::Tensor, at::Tensor> decodeAttention(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, bool is_causal,
                                                   const std::optional<at::Tensor>& attn_mask,
                                                   std::optional<double> scale) {
  const int64_t batch = query.size(0), heads = query.size(1), queries = query.size(2), width = query.size(3);
  // The CPU kernel's layouts: output [batch, queries, heads, width] and
  // logsumexp [batch, queries, heads], both seen with heads before queries.
  at::Tensor out = at::empty({batch, queries, heads, width}, query.options()).transpose(1, 2);
  at::Tensor logsumexp = at::empty({batch, queries, heads}, query.options().dtype(at::kFloat)).transpose(1, 2);
  const float softmax_scale = scale ? static_cast<float>(*scale) : 1.f / std::sqrt(static_cast<float>(width));
  std::optional<at::Tensor> mask;
  if (attn_mask) mask = attn_mask->expand({batch, heads, queries, key.size(2)});
  const bool float_mask = mask && mask->scalar_type() == at::kFloat;
  if (query.scalar_type() == at::kFloat) {
    attend<float, float>(query, key, value, is_causal, mask, softmax_scale, out, logsumexp);
  } else if (float_mask) {
    attend<c10::BFloat16, float>(query, key, value, is_causal, mask, softmax_scale, out, logsumexp);
  } else {
    attend<c10::BFloat16, c10::BFloat16>(query, key, value, is_causal, mask, softmax_scale, out, logsumexp);
  }
  return {out, logsumexp};
}

}  // namespace torch_neuronx
