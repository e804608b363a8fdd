#include "aten/kernels/Bf16Gemv.h"

#include <algorithm>

#include "aten/kernels/RowParallel.h"
#include "aten/kernels/WidenedSimd.h"

namespace torch_neuronx {

void bf16Gemv(const c10::BFloat16* weight, const c10::BFloat16* x, const c10::BFloat16* bias, c10::BFloat16* y,
              int64_t rows, int64_t cols) {
  // Chunks of at least 64 KiB of weight: smaller ones cost more to hand out than they take.
  const int64_t min_rows = std::max<int64_t>(16, (int64_t{64} << 10) / (2 * std::max<int64_t>(cols, 1)));
  parallelRows(rows, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float sum = dotWidened(weight + n * cols, x, cols) + (bias ? static_cast<float>(bias[n]) : 0.f);
      y[n] = c10::BFloat16(sum);
    }
  });
}

}  // namespace torch_neuronx
