#include "nki_runtime/PartitionSummaries.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "nki_runtime/Dtype.h"
#include "nki_runtime/RowLoops.h"

namespace nki {
namespace {

// Every element partition p of input k holds, in the row-major order of its free axes, in fp32.
void gatherPartition(const Bound& b, int k, int64_t p, std::vector<float>& out) {
  const Access part = partitionOf(b.in.inputs[k], p);
  const std::size_t size = byteSize(b.input_types[k]);
  const int64_t n = inner(part);
  out.clear();
  forEachRow(part, {&part}, [&](const std::array<int64_t, 8>& o) {
    const std::size_t at = out.size();
    out.resize(at + n);
    loadRow(b.inputs[k] + o[0] * size, innerStride(part) * size, n, b.input_types[k], out.data() + at);
  });
}

// Writes `values` over partition p of dst, in the row-major order of its free axes.
void scatterPartition(const Bound& b, int64_t p, const float* values) {
  const Access part = partitionOf(b.in.dst, p);
  const std::size_t size = byteSize(b.dst_type);
  const int64_t n = inner(part);
  int64_t done = 0;
  forEachRow(part, {&part}, [&](const std::array<int64_t, 8>& o) {
    storeRow(values + done, n, b.dst + o[0] * size, innerStride(part) * size, b.dst_type);
    done += n;
  });
}

// Where each of vals[0..8) occurs in data (-1: nowhere). nc_find_index8 takes first occurrences, a value
// repeated among vals its next occurrence. nc_match_replace8 takes vals from the last to the first, each
// matching the first occurrence that no earlier match replaced by `imm`, and replaces it.
std::array<int64_t, 8> matchEight(std::vector<float>& data, const std::vector<float>& vals, bool replacing,
                                  float imm) {
  std::array<int64_t, 8> found;
  found.fill(-1);
  for (int step = 0; step < 8; ++step) {
    const int j = replacing ? 7 - step : step;
    int earlier = 0;
    for (int e = 0; e < j && !replacing; ++e) earlier += vals[e] == vals[j];
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (data[i] == vals[j] && earlier-- == 0) {
        found[j] = static_cast<int64_t>(i);
        if (replacing) data[i] = imm;
        break;
      }
    }
  }
  return found;
}

// (count, mean, variance * count) of x[first], x[first + 2], ...; an empty group is (0, 0, 0).
void groupStatistics(const std::vector<float>& x, std::size_t first, float* out) {
  double count = 0, sum = 0;
  for (std::size_t i = first; i < x.size(); i += 2) count += 1, sum += x[i];
  const double mean = count > 0 ? sum / count : 0.0;
  double squares = 0;
  for (std::size_t i = first; i < x.size(); i += 2) squares += (x[i] - mean) * (x[i] - mean);
  out[0] = static_cast<float>(count);
  out[1] = static_cast<float>(mean);
  out[2] = static_cast<float>(squares);
}

// The bytes of partition p of input k, element after element in the row-major order of its free axes:
// moved as they are, whatever the dtype.
void partitionBytes(const Bound& b, int k, int64_t p, std::vector<char>& out) {
  const Access part = partitionOf(b.in.inputs[k], p);
  char* base = b.inputs[k];
  const Dtype type = b.input_types[k];
  const std::size_t size = byteSize(type);
  out.clear();
  forEachRow(part, {&part}, [&](const std::array<int64_t, 8>& o) {
    for (int64_t i = 0; i < inner(part); ++i) {
      const char* element = b.at(base, type, o[0] + i * innerStride(part));
      out.insert(out.end(), element, element + size);
    }
  });
}

void writePartitionBytes(const Bound& b, int64_t p, const char* bytes) {
  const Access part = partitionOf(b.in.dst, p);
  const std::size_t size = byteSize(b.dst_type);
  forEachRow(part, {&part}, [&](const std::array<int64_t, 8>& o) {
    for (int64_t i = 0; i < inner(part); ++i, bytes += size) {
      std::memcpy(b.at(b.dst, b.dst_type, o[0] + i * innerStride(part)), bytes, size);
    }
  });
}

}  // namespace

void max8(const Bound& b) {
  std::vector<float> data;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, data);
    // NaN compares as the largest value, so that it shows rather than vanishes.
    const auto larger = [](float x, float y) { return std::isnan(x) ? !std::isnan(y) : x > y; };
    std::partial_sort(data.begin(), data.begin() + 8, data.end(), larger);
    scatterPartition(b, p, data.data());
  }
}

// A value not found gets all ones, as the hardware writes. reverse0: the indices nc_match_replace8 writes.
void findIndex8(const Bound& b) {
  std::vector<float> data, vals;
  const bool wide = b.dst_type == Dtype::kUInt32;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, data);
    gatherPartition(b, 1, p, vals);
    const auto where = matchEight(data, vals, b.in.reverse0, b.in.operand0.value);
    uint32_t found[8];
    const uint32_t none = wide ? 0xffffffffu : 0xffffu;
    for (int j = 0; j < 8; ++j) found[j] = where[j] >= 0 ? static_cast<uint32_t>(where[j]) : none;
    // Written as integers: all ones has no exact fp32 value.
    const Access part = partitionOf(b.in.dst, p);
    int j = 0;
    forEachRow(part, {&part}, [&](const std::array<int64_t, 8>& o) {
      for (int64_t i = 0; i < inner(part); ++i, ++j) {
        const int64_t element = o[0] + i * innerStride(part);
        if (wide) {
          std::memcpy(b.at(b.dst, b.dst_type, element), &found[j], 4);
        } else {
          const auto narrow = static_cast<uint16_t>(found[j]);
          std::memcpy(b.at(b.dst, b.dst_type, element), &narrow, 2);
        }
      }
    });
  }
}

void matchReplace8(const Bound& b) {
  std::vector<float> data, vals;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, data);
    gatherPartition(b, 1, p, vals);
    matchEight(data, vals, /*replacing=*/true, b.in.operand0.value);
    scatterPartition(b, p, data.data());
  }
}

void bnStats(const Bound& b) {
  std::vector<float> data;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, data);
    float stats[6];
    groupStatistics(data, 0, stats);
    groupStatistics(data, 1, stats + 3);
    scatterPartition(b, p, stats);
  }
}

// Chan's combination of the groups: mean of all, and the population variance.
void bnAggr(const Bound& b) {
  std::vector<float> triples;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, triples);
    double count = 0, sum = 0;
    for (std::size_t t = 0; t + 2 < triples.size(); t += 3) count += triples[t], sum += triples[t] * double(triples[t + 1]);
    const double mean = sum / count;
    double squares = 0;
    for (std::size_t t = 0; t + 2 < triples.size(); t += 3) {
      const double offset = triples[t + 1] - mean;
      squares += triples[t + 2] + triples[t] * offset * offset;
    }
    const float result[2] = {static_cast<float>(mean), static_cast<float>(squares / count)};
    scatterPartition(b, p, result);
  }
}


// Every source partition is read before any is written: dst may be src.
void streamShuffle(const Bound& b) {
  const int64_t rows = b.in.dst.sizes[0];
  std::vector<std::vector<char>> moved(rows);
  for (int64_t p = 0; p < rows; ++p) {
    const float from = b.in.coefficients[p % 32];
    if (from != 255.f) partitionBytes(b, 0, p / 32 * 32 + static_cast<int64_t>(from), moved[p]);
  }
  for (int64_t p = 0; p < rows; ++p) {
    if (!moved[p].empty()) writePartitionBytes(b, p, moved[p].data());
  }
}

// Each of the eight GpSimd cores reads and writes the first of its 16 partitions only; the other
// partitions of dst keep what they held.
void nonzeroWithCount(const Bound& b) {
  const auto offset = static_cast<int32_t>(b.in.coefficients[0]);
  const auto padding = static_cast<int32_t>(b.in.coefficients[1]);
  std::vector<float> data;
  std::vector<int32_t> found;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; p += 16) {
    gatherPartition(b, 0, p, data);  // int32 nonzeros stay nonzero in fp32
    found.assign(data.size() + 1, padding);
    int32_t count = 0;
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (data[i] != 0.f) found[count++] = static_cast<int32_t>(i) + offset;
    }
    found.back() = count;
    writePartitionBytes(b, p, reinterpret_cast<const char*>(found.data()));
  }
}

void sequenceBounds(const Bound& b) {
  std::vector<float> ids, bounds;
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    gatherPartition(b, 0, p, ids);
    const auto n = static_cast<int64_t>(ids.size());
    bounds.assign(2 * n, 0.f);
    float* starts = bounds.data();
    float* ends = bounds.data() + n;
    for (int64_t i = 0; i < n; ++i) {  // a segment starts where its id differs from the one before
      if (ids[i] == 0.f) starts[i] = static_cast<float>(n);
      else starts[i] = i > 0 && ids[i] == ids[i - 1] ? starts[i - 1] : static_cast<float>(i);
    }
    for (int64_t i = n - 1; i >= 0; --i) {  // and ends where the one after differs
      if (ids[i] == 0.f) ends[i] = -1.f;
      else ends[i] = i + 1 < n && ids[i] == ids[i + 1] ? ends[i + 1] : static_cast<float>(i + 1);
    }
    scatterPartition(b, p, bounds.data());
  }
}

void gatherInPartitions(const Bound& b) {
  std::vector<char> data, indices, gathered;
  const std::size_t size = byteSize(b.dst_type);
  for (int64_t p = 0; p < b.in.dst.sizes[0]; ++p) {
    partitionBytes(b, 0, p, data);
    partitionBytes(b, 1, p, indices);
    const std::size_t count = indices.size() / 4, available = data.size() / size;
    gathered.resize(count * size);
    for (std::size_t j = 0; j < count; ++j) {
      uint32_t index;
      std::memcpy(&index, indices.data() + 4 * j, 4);
      if (index >= available) {
        throw std::out_of_range("nc_n_gather: index " + std::to_string(index) + " (partition " + std::to_string(p) +
                                ", position " + std::to_string(j) + ") is past the " + std::to_string(available) +
                                " elements of its partition's data");
      }
      std::memcpy(gathered.data() + j * size, data.data() + index * size, size);
    }
    writePartitionBytes(b, p, gathered.data());
  }
}

void localGather(const Bound& b) {
  const auto per_index = static_cast<int64_t>(b.in.coefficients[0]);
  const auto valid = static_cast<int64_t>(b.in.coefficients[1]);
  const std::size_t size = byteSize(b.dst_type);
  std::vector<std::vector<char>> index_rows(16);
  std::vector<uint16_t> indices(valid);
  std::vector<char> data, gathered(valid * per_index * size);
  for (int64_t first = 0; first < b.in.dst.sizes[0]; first += 16) {
    for (int64_t q = 0; q < 16; ++q) partitionBytes(b, 1, first + q, index_rows[q]);
    for (int64_t j = 0; j < valid; ++j) std::memcpy(&indices[j], index_rows[j % 16].data() + 2 * (j / 16), 2);
    for (int64_t p = first; p < first + 16; ++p) {
      partitionBytes(b, 0, p, data);
      const auto available = static_cast<int64_t>(data.size() / size);
      for (int64_t j = 0; j < valid; ++j) {
        const int64_t start = int64_t{indices[j]} * per_index;
        if (start + per_index > available) {
          throw std::out_of_range("local_gather: index " + std::to_string(indices[j]) + " (index " +
                                  std::to_string(j) + " of the core of partitions " + std::to_string(first) + "-" +
                                  std::to_string(first + 15) + ") reads elements " + std::to_string(start) + "-" +
                                  std::to_string(start + per_index - 1) + ", past the " + std::to_string(available) +
                                  " of partition " + std::to_string(p) + "'s data");
        }
        std::memcpy(gathered.data() + j * per_index * size, data.data() + start * size, per_index * size);
      }
      writePartitionBytes(b, p, gathered.data());
    }
  }
}

}  // namespace nki
