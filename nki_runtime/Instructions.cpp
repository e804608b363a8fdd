#include "nki_runtime/Instructions.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "nki_runtime/Alu.h"
#include "nki_runtime/IntegerAlu.h"
#include "nki_runtime/AmxMatmul.h"
#include "nki_runtime/Bf16Matmul.h"
#include "nki_runtime/Fp32Matmul.h"
#include "nki_runtime/IndirectDma.h"
#include "nki_runtime/Microscaling.h"
#include "nki_runtime/Parallel.h"
#include "nki_runtime/PartitionSummaries.h"
#include "nki_runtime/Random.h"
#include "nki_runtime/RowLoops.h"
#include "nki_runtime/TensorIndirection.h"
#include "runtime/SimdLevel.h"

namespace nki {

// Scratch rows of fp32, reused across instructions of a thread.
float* scratch(int slot, int64_t count) {
  thread_local std::vector<float> rows[4];
  if (static_cast<int64_t>(rows[slot].size()) < count) rows[slot].resize(count);
  return rows[slot].data();
}

namespace {


// Instructions of fewer bytes run on one thread: handing out the rest costs more than it saves.
constexpr int64_t kMinParallelBytes = int64_t{64} << 10;

float identityOf(AluOp op) {
  switch (op) {
    case AluOp::kAdd:
    case AluOp::kSubtract:
    case AluOp::kLogicalOr:
    case AluOp::kLogicalXor:
      return 0.f;
    case AluOp::kMultiply:
    case AluOp::kLogicalAnd:
      return 1.f;
    case AluOp::kMaximum:
      return -std::numeric_limits<float>::infinity();
    case AluOp::kMinimum:
      return std::numeric_limits<float>::infinity();
    case AluOp::kAbsMax:
      return 0.f;
    case AluOp::kAbsMin:
      return std::numeric_limits<float>::infinity();
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

// forEachRow over the instruction's rows, spread over the host's threads when they are independent and many
// bytes: a row is a partition's (or an axis') elements, each written by one row of the loop.
template <typename Row>
void forRows(const Bound& b, const Access& shape, const std::vector<const Access*>& views, Row row) {
  if (b.row_end >= 0) return forEachRow(shape, views, row, b.row_begin, b.row_end);
  const int64_t rows = rowCount(shape);
  if (!b.rows_independent) return forEachRow(shape, views, row, 0, rows);
  int64_t row_bytes = inner(shape) * static_cast<int64_t>(byteSize(b.dst_type));
  for (std::size_t k = 0; k < b.inputs.size(); ++k) {
    row_bytes += inner(b.in.inputs[k]) * static_cast<int64_t>(byteSize(b.input_types[k]));
  }
  const int64_t min_rows = std::max<int64_t>(1, kMinParallelBytes / std::max<int64_t>(row_bytes, 1));
  parallelFor(rows, min_rows, [&](int64_t begin, int64_t end) { forEachRow(shape, views, row, begin, end); });
}

// dst and src do not overlap. The non-temporal stores are ordered before the row counts as done.
__attribute__((target("avx2"))) void copyBypassingCaches(char* dst, const char* src, int64_t bytes) {
  for (; bytes > 0 && (reinterpret_cast<uintptr_t>(dst) & 31) != 0; --bytes) *dst++ = *src++;
  for (; bytes >= 32; bytes -= 32, dst += 32, src += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
  }
  std::memcpy(dst, src, bytes);
  _mm_sfence();
}

// A DMA with dst_rmw_op=add: dst = dst + src, summed in fp32 and rounded to dst's dtype.
void addInto(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    float* sum = scratch(0, n);
    float* row = scratch(1, n);
    loadRow(b.at(b.dst, b.dst_type, o[0]), innerStride(b.in.dst) * byteSize(b.dst_type), n, b.dst_type, sum);
    b.loadInput(0, o[1], row);
    for (int64_t j = 0; j < n; ++j) sum[j] += row[j];
    b.storeDst(sum, o[0]);
  });
}

// Elements moved as bits, one at a time along strided rows (a copy within one dtype).
void copyBits(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.dst_type);
  const int64_t to_step = innerStride(b.in.dst) * static_cast<int64_t>(size);
  const int64_t from_step = innerStride(b.in.inputs[0]) * static_cast<int64_t>(size);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    char* to = b.at(b.dst, b.dst_type, o[0]);
    const char* from = b.at(b.inputs[0], b.input_types[0], o[1]);
    for (int64_t j = 0; j < n; ++j) std::memmove(to + j * to_step, from + j * from_step, size);
  });
}

void copy(const Bound& b) {
  if (b.in.accumulate && b.in.opcode == Opcode::kDmaCopy) return addInto(b);
  const int64_t n = inner(b.in.dst);
  const Access& src = b.in.inputs[0];
  const bool same = b.dst_type == b.input_types[0];
  const bool raw = same && innerStride(b.in.dst) == 1 && innerStride(src) == 1;
  // Element by element as bits: packed values, and 32- and 64-bit integers that fp32 would round.
  if (!raw && (isPacked(b.dst_type) || (same && !isFloat(b.dst_type) && byteSize(b.dst_type) >= 4))) {
    return copyBits(b);
  }
  const bool bypass = raw && b.streaming_stores && nrt::simdLevel() >= nrt::SimdLevel::kAvx2;
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    if (raw) {
      const std::size_t size = byteSize(b.dst_type);
      char* to = b.at(b.dst, b.dst_type, o[0]);
      const char* from = b.at(b.inputs[0], b.input_types[0], o[1]);
      if (bypass) return copyBypassingCaches(to, from, n * static_cast<int64_t>(size));
      std::memmove(to, from, n * size);
      return;
    }
    float* row = scratch(0, n);
    b.loadInput(0, o[1], row);
    b.storeDst(row, o[0]);
  });
}

// dma_compute: dst = the sum of up to 16 inputs in fp32, rounded once. A row loop follows at most 8 views,
// so the inputs are summed 7 at a time into fp32 rows of the whole dst, stored when all are read (dst may be
// one of the inputs).
void dmaCompute(const Bound& b) {
  const Access& dst = b.in.dst;
  const int64_t n = inner(dst), rows = rowCount(dst);
  float* sums = scratch(3, rows * n);
  std::fill(sums, sums + rows * n, 0.f);
  float* row = scratch(0, n);
  constexpr std::size_t kPerPass = 7;
  for (std::size_t first = 0; first < b.inputs.size(); first += kPerPass) {
    const std::size_t last = std::min(b.inputs.size(), first + kPerPass);
    std::vector<const Access*> views{&dst};
    for (std::size_t k = first; k < last; ++k) views.push_back(&b.in.inputs[k]);
    int64_t r = 0;
    forEachRow(dst, views, [&](const std::array<int64_t, 8>& o) {
      float* sum = sums + r++ * n;
      for (std::size_t k = first; k < last; ++k) {
        b.loadInput(static_cast<int>(k), o[1 + k - first], row);
        for (int64_t j = 0; j < n; ++j) sum[j] += row[j];
      }
    });
  }
  int64_t r = 0;
  forEachRow(dst, {&dst}, [&](const std::array<int64_t, 8>& o) { b.storeDst(sums + r++ * n, o[0]); });
}

// Element-wise instructions read dense fp32 rows in place and write dense fp32 rows directly
// (each output element depends only on the inputs at its index, so dst may alias them).
void tensorTensor(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    bool direct;
    float* out = b.dstRow(o[0], direct);
    applyRow(b.in.op0, b.row(0, o[1], 0), b.row(1, o[2], 1), out, n);
    b.finish(out, direct, o[0]);
  });
}

// Whether `x op operand` is x for every x: nisa.activation's scale 1 and bias 0, left out as it always was.
bool identityImmediate(AluOp op, const Operand& operand, bool reversed) {
  if (operand.input >= 0) return false;
  if (op == AluOp::kMultiply) return operand.value == 1.f;
  return operand.value == 0.f && (op == AluOp::kAdd || (op == AluOp::kSubtract && !reversed));
}

// (data op0 operand0) op1 operand1 of one row into `out` (operands immediate or per partition, each on
// the other side when reversed); returns the row holding the result: `out`, or data's when both bypass.
const float* scalarStages(const Bound& b, const std::array<int64_t, 8>& o, const float* data, float* out,
                          int64_t n) {
  const float* current = data;
  const std::pair<AluOp, std::pair<const Operand*, bool>> steps[] = {
      {b.in.op0, {&b.in.operand0, b.in.reverse0}}, {b.in.op1, {&b.in.operand1, b.in.reverse1}}};
  for (const auto& [op, operand] : steps) {
    if (op == AluOp::kBypass || identityImmediate(op, *operand.first, operand.second)) continue;
    float value;
    if (b.scalarOperand(*operand.first, o, value)) {
      applyRowScalar(op, current, value, out, n, operand.second);
    } else if (operand.second) {
      applyRow(op, b.operand(*operand.first, o, 1), current, out, n);
    } else {
      applyRow(op, current, b.operand(*operand.first, o, 1), out, n);
    }
    current = out;
  }
  return current;
}

void tensorScalar(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    bool direct;
    float* out = b.dstRow(o[0], direct);
    const float* current = scalarStages(b, o, b.row(0, o[1], 0), out, n);
    if (current != out) std::copy(current, current + n, out);
    b.finish(out, direct, o[0]);
  });
}

// x, or slope * x below 0; the slope an immediate or per partition.
void preluRow(const Bound& b, const std::array<int64_t, 8>& o, const float* x, float* out, int64_t n) {
  float slope;
  if (b.scalarOperand(b.in.operand2, o, slope)) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] < 0.f ? slope * x[i] : x[i];
    return;
  }
  const float* slopes = b.operand(b.in.operand2, o, 2);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] < 0.f ? slopes[i] * x[i] : x[i];
}

void activation(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    bool direct;
    float* out = b.dstRow(o[0], direct);
    const float* x = scalarStages(b, o, b.row(0, o[1], 0), out, n);
    if (b.in.function == Function::kPrelu) {
      preluRow(b, o, x, out, n);
    } else {
      applyRow(b.in.function, x, out, n);
    }
    b.finish(out, direct, o[0]);
  });
}

void memset(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    float* row = scratch(0, n);
    std::fill(row, row + n, b.in.operand0.value);
    b.storeDst(row, o[0]);
  });
}

void iota(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forEachAffineRow<double>(b.in.dst, b.views(), b.in.coefficients,
                           [&](const std::array<int64_t, 8>& o, double start, double step) {
    float* row = scratch(0, n);
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(start + i * step);
    b.storeDst(row, o[0]);
  });
}

// The affine value of each element's index, as iota computes it, compared with 0 by op0: where true the
// element of on_true, else the immediate (a causal mask: key index > query index -> a large negative).
void affineSelect(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forEachAffineRow<double>(b.in.dst, b.views(), b.in.coefficients,
                           [&](const std::array<int64_t, 8>& o, double start, double step) {
    float* row = scratch(0, n);
    b.loadInput(0, o[1], row);
    for (int64_t i = 0; i < n; ++i) {
      const float affine = static_cast<float>(start + i * step);
      if (apply(b.in.op0, affine, 0.f) == 0.f) row[i] = b.in.operand0.value;
    }
    b.storeDst(row, o[0]);
  });
}

// The free index counts from `start` along each partition's row; both per-partition bounds must hold.
void rangeSelect(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  const float start = b.in.coefficients[0], fill = b.in.coefficients[1];
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    float* row = scratch(0, n);
    b.loadInput(0, o[1], row);
    float low = 0.f, high = 0.f;
    b.scalarOperand(b.in.operand0, o, low);
    b.scalarOperand(b.in.operand1, o, high);
    for (int64_t j = 0; j < n; ++j) {
      const float index = start + static_cast<float>(j);
      if (apply(b.in.op0, index, low) == 0.f || apply(b.in.op1, index, high) == 0.f) row[j] = fill;
    }
    b.storeDst(row, o[0]);
  });
}

void scan(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    float *x = scratch(0, n), *y = scratch(1, n);
    b.loadInput(0, o[1], x);
    b.loadInput(1, o[2], y);
    // The start: an immediate, or this partition's element of a [partitions, 1] tile.
    float acc = b.in.operand0.input >= 0 ? b.operand(b.in.operand0, o, 2)[0] : b.in.operand0.value;
    for (int64_t i = 0; i < n; ++i) {
      acc = apply(b.in.op1, apply(b.in.op0, acc, x[i]), y[i]);
      x[i] = acc;
    }
    b.storeDst(x, o[0]);
  });
}

// Inputs (predicate, on_true, on_false); or (predicate, on_false) with on_true the immediate operand0
// (tensor_copy_predicated of a number, on_false being dst). reverse0 picks on_true where the predicate is 0.
void select(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  const bool immediate = b.in.inputs.size() == 2;
  const float value = b.in.operand0.value;
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    float *p = scratch(0, n), *x = scratch(1, n), *y = scratch(2, n);
    b.loadInput(0, o[1], p);
    if (immediate) {
      std::fill(x, x + n, value);
      b.loadInput(1, o[2], y);
    } else {
      b.loadInput(1, o[2], x);
      b.loadInput(2, o[3], y);
    }
    for (int64_t i = 0; i < n; ++i) p[i] = (p[i] != 0.f) != b.in.reverse0 ? x[i] : y[i];
    b.storeDst(p, o[0]);
  });
}

void reduce(const Bound& b) {
  const Access& data = b.in.inputs[0];
  const Access& dst = b.in.dst;
  const int kept = dst.rank;
  const Access block = trailingAxes(data, kept);
  const int64_t n = inner(block);
  const std::size_t size = byteSize(b.input_types[0]);
  const int64_t dst_n = inner(dst);
  const std::vector<const Access*> views{&dst, &data};
  // A dst of one axis is a single row of partitions: a partition stream's share of it is a range of
  // that row's elements.
  const bool share = dst.rank == 1 && b.row_end >= 0;
  const int64_t j_begin = share ? b.row_begin : 0, j_end = share ? b.row_end : dst_n;
  const bool has_identity = !std::isnan(identityOf(b.in.op0));
  const auto reduceDstRow = [&](const std::array<int64_t, 8>& o) {
    float* out = scratch(1, dst_n);
    for (int64_t j = j_begin; j < j_end; ++j) {
      Access here = block;
      here.offset = o[1] + j * data.strides[kept - 1];
      float acc = identityOf(b.in.op0);
      bool first = true;
      const bool dense = b.input_types[0] == Dtype::kFloat32 && innerStride(block) == 1;
      forEachRow(here, {&here}, [&](const std::array<int64_t, 8>& r) {
        const char* at = b.inputs[0] + r[0] * size;
        const float* row = reinterpret_cast<const float*>(at);  // a dense fp32 row is read in place
        if (!dense) {
          float* widened = scratch(0, n);
          loadRow(at, innerStride(block) * size, n, b.input_types[0], widened);
          row = widened;
        }
        if (has_identity) {
          acc = reduceRow(b.in.op0, row, n, acc);
          return;
        }
        for (int64_t i = 0; i < n; ++i) {
          acc = first ? row[i] : apply(b.in.op0, acc, row[i]);
          first = false;
        }
      });
      out[j] = b.in.negate ? -acc : acc;
    }
    const std::size_t dst_size = byteSize(b.dst_type);
    storeRow(out + j_begin, j_end - j_begin, b.at(b.dst, b.dst_type, o[0] + j_begin * innerStride(dst)),
             innerStride(dst) * dst_size, b.dst_type);
  };
  if (share) return forEachRow(dst, views, reduceDstRow, 0, 1);
  forRows(b, dst, views, reduceDstRow);
}

void scalarTensorTensor(const Bound& b) {
  const int64_t n = inner(b.in.dst);
  forRows(b, b.in.dst, b.views(), [&](const std::array<int64_t, 8>& o) {
    bool direct;
    float* out = b.dstRow(o[0], direct);
    const float* data = b.row(0, o[1], 0);
    float value;
    if (b.scalarOperand(b.in.operand0, o, value)) {
      applyRowScalarThenRow(b.in.op0, data, value, b.in.reverse0, b.in.op1, b.row(1, o[2], 2), b.in.reverse1, out, n);
      b.finish(out, direct, o[0]);
      return;
    }
    if (b.in.reverse0) {
      applyRow(b.in.op0, b.operand(b.in.operand0, o, 1), data, out, n);
    } else {
      applyRow(b.in.op0, data, b.operand(b.in.operand0, o, 1), out, n);
    }
    const float* other = b.row(1, o[2], 2);
    if (b.in.reverse1) {
      applyRow(b.in.op1, other, out, out, n);
    } else {
      applyRow(b.in.op1, out, other, out, n);
    }
    b.finish(out, direct, o[0]);
  });
}

// dst[0, f...] = op0 over the partitions of data, one after another (GpSimd reduces across lanes).
void partitionReduce(const Bound& b) {
  const Access& data = b.in.inputs[0];
  Access first = data;  // partition 0's free rows; partition p's lie p * data.strides[0] further
  first.sizes[0] = 1;
  const int64_t n = inner(b.in.dst);
  const std::size_t size = byteSize(b.input_types[0]);
  forEachRow(b.in.dst, {&b.in.dst, &first}, [&](const std::array<int64_t, 8>& o) {
    float* acc = scratch(1, n);
    float* row = scratch(0, n);
    for (int64_t p = 0; p < data.sizes[0]; ++p) {
      loadRow(b.inputs[0] + (o[1] + p * data.strides[0]) * size, innerStride(data) * size, n, b.input_types[0],
              p == 0 ? acc : row);
      if (p > 0) applyRow(b.in.op0, acc, row, acc, n);
    }
    b.storeDst(acc, o[0]);
  });
}


// A matmul of fewer multiply-adds runs on one thread. Split, each core reads operands the other core's
// caches hold (the DMAs before it just wrote them), which on the tile unit costs more than the halved
// arithmetic saves: AWS's tiled matmul tutorial took 10.4 ms with its [128, 128] x [128, 512] products
// split between two cores, 9.2 ms without. Products on the vector units (fp32, bf16 without AMX) take
// about ten times longer per multiply-add, and split from 4M.
constexpr int64_t kMinParallelMacs = int64_t{4} << 20;
constexpr int64_t kMinParallelTileMacs = int64_t{32} << 20;
constexpr int64_t kRowBand = 32;  // result rows: a multiple of both bf16 kernels' row blocks

void matmul(const Bound& b) {
  const Access &stationary = b.in.inputs[0], &moving = b.in.inputs[1];
  const int64_t K = stationary.sizes[0], M = stationary.sizes[1], N = moving.sizes[1];
  const Access& dst = b.in.dst;
  const bool paired = b.input_types[0] == Dtype::kBFloat16 && b.input_types[1] == Dtype::kBFloat16 &&
                      hasBf16Pairs();
  // An fp32 PSUM tile with unit column stride is accumulated in place, as the Tensor engine does.
  const bool in_place = paired && b.dst_type == Dtype::kFloat32 && dst.strides[1] == 1;
  float* out = in_place ? reinterpret_cast<float*>(b.dst) + dst.offset : scratch(2, M * N);
  const int64_t out_rows = in_place ? dst.strides[0] : N;
  if (!b.in.accumulate) {
    for (int64_t i = 0; i < M; ++i) std::fill(out + i * out_rows, out + i * out_rows + N, 0.f);
  } else if (!in_place) {
    widen(b.dst, b.dst_type, dst, out);
  }
  if (paired) {
    const auto* s = reinterpret_cast<const uint16_t*>(b.inputs[0]) + stationary.offset;
    const auto* m = reinterpret_cast<const uint16_t*>(b.inputs[1]) + moving.offset;
    const auto multiply = hasAmxTiles() ? multiplyBf16Amx : multiplyBf16;
    // Bands of result rows on the host's threads, each packing its part of the stationary tile and all
    // of the moving one. Bands of columns shared every row of the result between two cores, whose
    // tile loads and stores of neighbouring lines then took turns (one instruction: 16 -> 23 us).
    const int64_t bands = (M + kRowBand - 1) / kRowBand;
    const int64_t min_macs = hasAmxTiles() ? kMinParallelTileMacs : kMinParallelMacs;
    const int64_t min_bands = std::max<int64_t>(1, min_macs / std::max<int64_t>(K * N * kRowBand, 1));
    parallelFor(bands, min_bands, [&](int64_t first, int64_t last) {
      const int64_t i0 = first * kRowBand, i1 = std::min(M, last * kRowBand);
      multiply(s + i0 * stationary.strides[1], stationary.strides[0], stationary.strides[1], m, moving.strides[0],
               moving.strides[1], out + i0 * out_rows, out_rows, K, i1 - i0, N);
    });
  } else {
    float* s = scratch(0, K * M);
    float* m = scratch(1, K * N);
    widen(b.inputs[0], b.input_types[0], stationary, s);
    widen(b.inputs[1], b.input_types[1], moving, m);
    multiplyInto(s, m, out, K, M, N);
  }
  if (in_place) return;
  const std::size_t size = byteSize(b.dst_type);
  for (int64_t i = 0; i < M; ++i) {
    storeRow(out + i * N, N, b.dst + (dst.offset + i * dst.strides[0]) * size, dst.strides[1] * size, b.dst_type);
  }
}

void transpose(const Bound& b) {
  Instruction swapped = b.in;
  Access& src = swapped.inputs[0];
  std::swap(src.sizes[0], src.sizes[1]);
  std::swap(src.strides[0], src.strides[1]);
  Bound as_copy{swapped, b.dst, b.dst_type, b.inputs, b.input_types, b.rows_independent, b.row_begin, b.row_end};
  copy(as_copy);
}

bool sameView(const Access& a, const Access& b) {
  return a.tensor == b.tensor && a.offset == b.offset && a.rank == b.rank && a.sizes == b.sizes &&
         a.strides == b.strides;
}

}  // namespace

void copyView(const Bound& b) { copy(b); }

void widen(const char* base, Dtype type, const Access& access, float* out) {
  const std::size_t size = byteSize(type);
  for (int64_t r = 0; r < access.sizes[0]; ++r) {
    loadRow(base + (access.offset + r * access.strides[0]) * size, access.strides[1] * size, access.sizes[1], type,
            out + r * access.sizes[1]);
  }
}

// nl.device_print: the view's elements, in row-major order, as the tensor holds them.
void devicePrint(const Bound& b) {
  if (!b.printer) return;
  const Access& view = b.in.dst;
  const std::size_t size = byteSize(b.dst_type);
  std::vector<char> bytes;
  bytes.reserve(view.elements() * size);
  forEachRow(view, {&view}, [&](const std::array<int64_t, 8>& o) {
    for (int64_t j = 0; j < inner(view); ++j) {
      const char* element = b.at(b.dst, b.dst_type, o[0] + j * innerStride(view));
      bytes.insert(bytes.end(), element, element + size);
    }
  });
  (*b.printer)(static_cast<int32_t>(b.in.coefficients.at(0)),
               std::vector<int64_t>(view.sizes.begin(), view.sizes.begin() + view.rank), bytes);
}

char* Bound::at(char* base, Dtype type, int64_t element) const { return base + element * byteSize(type); }

void Bound::loadInput(int k, int64_t offset, float* out) const {
  const Access& access = in.inputs[k];
  loadRow(at(inputs[k], input_types[k], offset), innerStride(access) * byteSize(input_types[k]), inner(access),
          input_types[k], out);
}

void Bound::storeDst(const float* values, int64_t offset) const {
  storeRow(values, inner(in.dst), at(dst, dst_type, offset), innerStride(in.dst) * byteSize(dst_type), dst_type);
}

void Bound::loadDst(int64_t offset, float* out) const {
  loadRow(at(dst, dst_type, offset), innerStride(in.dst) * byteSize(dst_type), inner(in.dst), dst_type, out);
}

const float* Bound::row(int k, int64_t offset, int slot) const {
  if (input_types[k] == Dtype::kFloat32 && innerStride(in.inputs[k]) == 1) {
    return reinterpret_cast<const float*>(inputs[k]) + offset;
  }
  float* widened = scratch(slot, inner(in.inputs[k]));
  loadInput(k, offset, widened);
  return widened;
}

float* Bound::dstRow(int64_t offset, bool& direct) const {
  direct = dst_type == Dtype::kFloat32 && innerStride(in.dst) == 1;
  return direct ? reinterpret_cast<float*>(dst) + offset : scratch(3, inner(in.dst));
}

void Bound::finish(float* values, bool direct, int64_t offset) const {
  if (!direct) storeDst(values, offset);
}

const float* Bound::operand(const Operand& operand, const std::array<int64_t, 8>& offsets, int slot) const {
  if (operand.input >= 0) return row(operand.input, offsets[1 + operand.input], slot);
  float* repeated = scratch(slot, inner(in.dst));
  std::fill(repeated, repeated + inner(in.dst), operand.value);
  return repeated;
}

bool Bound::scalarOperand(const Operand& operand, const std::array<int64_t, 8>& offsets, float& value) const {
  if (operand.input < 0) {
    value = operand.value;
    return true;
  }
  if (innerStride(in.inputs[operand.input]) != 0) return false;
  value = toFloat(at(inputs[operand.input], input_types[operand.input], offsets[1 + operand.input]),
                  input_types[operand.input]);
  return true;
}

std::vector<const Access*> Bound::views() const {
  std::vector<const Access*> all{&in.dst};
  for (const Access& input : in.inputs) all.push_back(&input);
  return all;
}

void execute(const Bound& b) {
  switch (b.in.opcode) {
    case Opcode::kDmaCopy:
      if (b.in.indirect) return gather(b);
      copy(b);
      break;
    case Opcode::kTensorCopy:
      copy(b);
      break;
    case Opcode::kMatmul:
      matmul(b);
      break;
    case Opcode::kTranspose:
      transpose(b);
      break;
    case Opcode::kTensorTensor:
      if (isBitvec(b.in.op0)) return bitvecTensorTensor(b);
      takesNativeIntegers(b) ? integerTensorTensor(b) : tensorTensor(b);
      break;
    case Opcode::kTensorScalar:
      isBitvec(b.in.op0) || isBitvec(b.in.op1) ? bitvecTensorScalar(b) : tensorScalar(b);
      break;
    case Opcode::kActivation:
      activation(b);
      break;
    case Opcode::kTensorReduce:
      isBitvec(b.in.op0) ? bitvecReduce(b) : reduce(b);
      break;
    case Opcode::kMemset:
      b.in.operand0.integral && !isFloat(b.dst_type) ? integerMemset(b) : memset(b);
      break;
    case Opcode::kIota:
      b.in.integers.empty() ? iota(b) : integerIota(b);
      break;
    case Opcode::kTensorTensorScan:
      scan(b);
      break;
    case Opcode::kSelect:
      select(b);
      break;
    case Opcode::kScalarTensorTensor:
      scalarTensorTensor(b);
      break;
    case Opcode::kPartitionReduce:
      partitionReduce(b);
      break;
    case Opcode::kAffineSelect:
      affineSelect(b);
      break;
    case Opcode::kMax8:
      max8(b);
      break;
    case Opcode::kFindIndex8:
      findIndex8(b);
      break;
    case Opcode::kMatchReplace8:
      matchReplace8(b);
      break;
    case Opcode::kRangeSelect:
      rangeSelect(b);
      break;
    case Opcode::kStreamShuffle:
      streamShuffle(b);
      break;
    case Opcode::kNonzeroWithCount:
      nonzeroWithCount(b);
      break;
    case Opcode::kSequenceBounds:
      sequenceBounds(b);
      break;
    case Opcode::kLocalGather:
      localGather(b);
      break;
    case Opcode::kQuantizeMxScales:
      quantizeMxScales(b);
      break;
    case Opcode::kQuantizeMx:
      quantizeMx(b);
      break;
    case Opcode::kMatmulMx:
      matmulMx(b);
      break;
    case Opcode::kDmaCompute:
      dmaCompute(b);
      break;
    case Opcode::kLoopBegin:  // the sequencer's (ControlFlow.h), not work on the engines' memory
    case Opcode::kLoopEnd:
    case Opcode::kScalarAlu:
    case Opcode::kBranch:
      break;
    case Opcode::kGather:
      gatherInPartitions(b);
      break;
    case Opcode::kBnStats:
      bnStats(b);
      break;
    case Opcode::kBnAggr:
      bnAggr(b);
      break;
    case Opcode::kRandomBits:
      randomBits(b);
      break;
    case Opcode::kRandomUniform:
      randomUniform(b);
      break;
    case Opcode::kDropout:
      dropout(b);
      break;
    case Opcode::kRandomSetState:
      setRandomState(b);
      break;
    case Opcode::kRandomGetState:
      getRandomState(b);
      break;
    case Opcode::kRandomSeed:
      seedRandom(b);
      break;
    case Opcode::kDevicePrint:
      devicePrint(b);
      break;
    case Opcode::kCollective:
      collective(b);
      break;
    case Opcode::kColumnGather:
      gatherColumns(b);
      break;
    case Opcode::kColumnScatter:
      scatterColumns(b);
      break;
  }
}

int64_t rowsOf(const Instruction& in) {
  return in.opcode == Opcode::kTensorReduce && in.dst.rank == 1 ? in.dst.sizes[0] : rowCount(in.dst);
}

bool rowsIndependent(const Program& program, const Instruction& in) {
  if (in.indirect) return false;  // its rows are known only as it runs
  switch (in.opcode) {
    case Opcode::kPartitionReduce:  // reads every partition for one
    case Opcode::kIota:  // numbers its rows as it walks them
    case Opcode::kAffineSelect:
    case Opcode::kMatmul:
    case Opcode::kMax8:
    case Opcode::kFindIndex8:
    case Opcode::kMatchReplace8:
    case Opcode::kStreamShuffle:  // moves data between partitions
    case Opcode::kNonzeroWithCount:  // each GpSimd core handles its first partition only
    case Opcode::kSequenceBounds:    // a segment's bounds lie anywhere along its partition
    case Opcode::kLocalGather:       // a core's 16 index partitions serve all of its partitions
    case Opcode::kQuantizeMxScales:  // a group spans 8 partitions
    case Opcode::kQuantizeMx:
    case Opcode::kMatmulMx:
    case Opcode::kDmaCompute:  // sums all rows before it writes one
    case Opcode::kLoopBegin:
    case Opcode::kLoopEnd:
    case Opcode::kScalarAlu:
    case Opcode::kBranch:
    case Opcode::kGather:  // reads anywhere in its partition
    case Opcode::kBnStats:
    case Opcode::kBnAggr:
    case Opcode::kRandomBits:  // each lane's generators step in element order
    case Opcode::kRandomUniform:
    case Opcode::kDropout:
    case Opcode::kRandomSetState:
    case Opcode::kRandomGetState:
    case Opcode::kRandomSeed:
    case Opcode::kDevicePrint:  // prints in program order
    case Opcode::kCollective:   // one exchange with the other ranks
    case Opcode::kColumnGather:  // a group's partitions share index rows
    case Opcode::kColumnScatter:
      return false;
    default:
      break;
  }
  const bool elementwise = in.opcode != Opcode::kTranspose && in.opcode != Opcode::kTensorReduce;
  const bool dst_in_hbm = program.tensors[in.dst.tensor].argument >= 0;
  for (const Access& input : in.inputs) {
    const bool same_memory = ownerOf(program, input.tensor) == ownerOf(program, in.dst.tensor);
    if (same_memory && input.tensor != in.dst.tensor) return false;  // one memory seen as two dtypes
    if (input.tensor != in.dst.tensor) {
      if (dst_in_hbm && program.tensors[input.tensor].argument >= 0) return false;
      continue;
    }
    const bool disjoint = input.highest() <= in.dst.lowest() || in.dst.highest() <= input.lowest();
    if (!disjoint && !(elementwise && sameView(input, in.dst))) return false;
  }
  return true;
}



}  // namespace nki
