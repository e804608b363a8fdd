#include "nki_runtime/Program.h"

#include <algorithm>

namespace nki {

int64_t Access::elements() const {
  int64_t count = 1;
  for (int a = 0; a < rank; ++a) count *= sizes[a];
  return count;
}

int64_t Access::lowest() const {
  int64_t low = offset;
  for (int a = 0; a < rank; ++a) low += std::min<int64_t>(0, (sizes[a] - 1) * strides[a]);
  return low;
}

int64_t Access::highest() const {
  int64_t high = offset;
  for (int a = 0; a < rank; ++a) high += std::max<int64_t>(0, (sizes[a] - 1) * strides[a]);
  return high + 1;
}

int64_t TensorInfo::elements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

int64_t TensorInfo::partitionElements() const {
  if (shape.empty() || shape[0] == 0) return 0;
  return elements() / shape[0];
}

}  // namespace nki
