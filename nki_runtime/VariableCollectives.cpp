#include "nki_runtime/VariableCollectives.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "nki_runtime/Instructions.h"

namespace nki {
namespace {

std::string kindName(CollectiveKind kind) { return kind == CollectiveKind::kAllToAllV ? "all_to_all_v" : "all_gather_v"; }

// The metadata tensor: uint32, row r of member j at r * members + j.
class Metadata {
 public:
  Metadata(const Bound& b, int64_t members)
      : b_(b), members_(members), bytes_(packView(b.inputs[1], b.input_types[1], b.in.inputs[1])) {}
  uint32_t at(int64_t row, int64_t member) const {
    uint32_t value = 0;
    std::memcpy(&value, bytes_.data() + (row * members_ + member) * sizeof value, sizeof value);
    return value;
  }
  void set(int64_t row, int64_t member, uint32_t value) {
    std::memcpy(bytes_.data() + (row * members_ + member) * sizeof value, &value, sizeof value);
  }
  void store() const { unpackView(bytes_.data(), b_.inputs[1], b_.input_types[1], b_.in.inputs[1]); }

 private:
  const Bound& b_;
  int64_t members_;
  std::vector<char> bytes_;
};

void append(std::vector<char>& to, const void* from, std::size_t bytes) {
  const auto* first = static_cast<const char*>(from);
  to.insert(to.end(), first, first + bytes);
}

}  // namespace

void variableCollective(const Bound& b) {
  const CollectiveKind kind = collectiveKind(b.in);
  const std::string name = "nki.collectives." + kindName(kind) + ": ";
  const auto flags = static_cast<int32_t>(b.in.coefficients.at(1));
  const auto members = static_cast<int64_t>(b.in.coefficients.at(3));
  Metadata metadata(b, members);
  const std::vector<char> src = packView(b.inputs[0], b.input_types[0], b.in.inputs[0]);
  const std::size_t size = byteSize(b.dst_type);
  const auto src_elements = static_cast<int64_t>(src.size() / size);
  // What this rank sends: a count per chunk, then the chunks.
  const int64_t chunks = kind == CollectiveKind::kAllToAllV ? members : 1;
  std::vector<char> sent;
  for (int64_t j = 0; j < chunks; ++j) {
    const uint32_t count = metadata.at(0, j);
    append(sent, &count, sizeof count);
  }
  for (int64_t j = 0; j < chunks; ++j) {
    const int64_t count = metadata.at(0, j), first = metadata.at(1, j);
    if (first + count > src_elements) {
      throw std::out_of_range(name + "the chunk of member " + std::to_string(j) + " (metadata column " +
                              std::to_string(j) + "), elements " + std::to_string(first) + " to " +
                              std::to_string(first + count) + ", is past src's " + std::to_string(src_elements));
    }
    append(sent, src.data() + first * size, count * size);
  }
  const std::vector<char> received = (*b.communicator)(b.in.coefficients, b.in.op0, b.dst_type, sent);
  // What comes back: a count per member, then the members' chunks, in group order.
  std::vector<char> dst = packView(b.dst, b.dst_type, b.in.dst);
  const auto dst_elements = static_cast<int64_t>(dst.size() / size), slot = dst_elements / members;
  std::size_t at = members * sizeof(uint32_t);
  if (received.size() < at) throw std::runtime_error(name + "the communicator returned too few bytes");
  for (int64_t s = 0; s < members; ++s) {
    uint32_t count = 0;
    std::memcpy(&count, received.data() + s * sizeof count, sizeof count);
    const bool displaced = (flags & kHasRecvDisplacements) != 0;
    const int64_t first = displaced ? metadata.at(3, s) : s * slot;
    if (first + count > dst_elements || (!displaced && count > slot)) {
      throw std::out_of_range(name + "member " + std::to_string(s) + " sends " + std::to_string(count) +
                              " elements to elements " + std::to_string(first) + " to " +
                              std::to_string(first + count) + " of dst, past " +
                              (displaced ? "dst's " + std::to_string(dst_elements)
                                         : "its slot of " + std::to_string(slot) + " (dst elements / members)"));
    }
    if (at + count * size > received.size()) throw std::runtime_error(name + "the communicator returned too few bytes");
    std::memcpy(dst.data() + first * size, received.data() + at, count * size);
    at += count * size;
    if ((flags & kRecvCountsKnown) == 0) metadata.set(2, s, count);
  }
  unpackView(dst.data(), b.dst, b.dst_type, b.in.dst);
  if ((flags & kRecvCountsKnown) == 0) metadata.store();
}

}  // namespace nki
