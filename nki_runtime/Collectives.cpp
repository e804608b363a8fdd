#include "nki_runtime/Collectives.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "nki_runtime/Alu.h"
#include "nki_runtime/Instructions.h"
#include "nki_runtime/RowLoops.h"
#include "nki_runtime/VariableCollectives.h"

namespace nki {
namespace {

// Part `part` of `parts` equal parts of a view along `axis`.
Access partAlong(const Access& view, int32_t axis, int64_t part, int64_t parts) {
  Access piece = view;
  piece.sizes[axis] = view.sizes[axis] / parts;
  piece.offset += part * piece.sizes[axis] * view.strides[axis];
  return piece;
}

void fail(const std::string& why) { throw std::runtime_error("nki.collectives: " + why); }

}  // namespace

std::vector<char> packView(const char* base, Dtype type, const Access& view) {
  const std::size_t size = byteSize(type);
  std::vector<char> bytes(view.elements() * size);
  char* to = bytes.data();
  forEachRow(view, {&view}, [&](const std::array<int64_t, kMaxAxes>& o) {
    for (int64_t j = 0; j < inner(view); ++j, to += size) {
      std::memcpy(to, base + (o[0] + j * innerStride(view)) * size, size);
    }
  });
  return bytes;
}

void unpackView(const char* bytes, char* base, Dtype type, const Access& view) {
  const std::size_t size = byteSize(type);
  forEachRow(view, {&view}, [&](const std::array<int64_t, kMaxAxes>& o) {
    for (int64_t j = 0; j < inner(view); ++j, bytes += size) {
      std::memcpy(base + (o[0] + j * innerStride(view)) * size, bytes, size);
    }
  });
}

CollectiveKind collectiveKind(const Instruction& in) {
  return static_cast<CollectiveKind>(static_cast<int32_t>(in.coefficients.at(0)));
}

void collective(const Bound& b) {
  if (!b.communicator) fail("this run has no communicator for the kernel's collectives");
  const CollectiveKind kind = collectiveKind(b.in);
  if (kind == CollectiveKind::kAllToAllV || kind == CollectiveKind::kAllGatherV) return variableCollective(b);
  const bool reads_src = kind != CollectiveKind::kRankId && kind != CollectiveKind::kRingRankId &&
                         kind != CollectiveKind::kGroupIndex;
  std::vector<char> sent = reads_src ? packView(b.inputs[0], b.input_types[0], b.in.inputs[0]) : std::vector<char>();
  if (kind == CollectiveKind::kRingPermuteReduce) {  // the two sources combined before they travel, in fp32
    const std::vector<char> other = packView(b.inputs[1], b.input_types[1], b.in.inputs[1]);
    const std::size_t size = byteSize(b.input_types[0]);
    for (std::size_t at = 0; at < sent.size(); at += size) {
      const float value = apply(b.in.op0, toFloat(sent.data() + at, b.input_types[0]),
                                toFloat(other.data() + at, b.input_types[1]));
      fromFloat(value, sent.data() + at, b.input_types[0]);
    }
  }
  const std::vector<char> received = (*b.communicator)(b.in.coefficients, b.in.op0, b.dst_type, sent);
  if (received.empty() && kind == CollectiveKind::kPermute) return;  // no pair targets this rank
  const Access& dst = b.in.dst;
  const std::size_t expected = dst.elements() * byteSize(b.dst_type);
  if (received.size() != expected) {
    fail("the communicator returned " + std::to_string(received.size()) + " bytes for a dst of " +
         std::to_string(expected));
  }
  if (kind != CollectiveKind::kAllGather) return unpackView(received.data(), b.dst, b.dst_type, dst);
  // Each member's src goes to its own part of dst along the collective dim.
  const auto axis = static_cast<int32_t>(b.in.coefficients.at(1));
  const int64_t members = static_cast<int64_t>(b.in.coefficients.at(3));
  const std::size_t chunk = expected / members;
  for (int64_t r = 0; r < members; ++r) {
    unpackView(received.data() + r * chunk, b.dst, b.dst_type, partAlong(dst, axis, r, members));
  }
}

}  // namespace nki
