// The shared-memory transport of one neuron process group on one host.
//
// Rank 0 creates a POSIX shared-memory segment; the other ranks open it by the
// name rank 0 publishes in the c10d store (see NeuronBackend). The segment holds
// one slot per rank: a header with two step counters and a descriptor of the
// collective in progress, then a data area.
//
// Every collective is a sequence of steps, numbered the same on every rank:
//   data = beginStep(what)     wait until every rank has read my previous data
//   ... write my part into data ...
//   publish(descriptor)        my slot now holds step N
//   waitForPeers()             every rank's slot holds step N
//   ... read the slots ...
//   endStep()                  I am done reading step N
// Every wait spins briefly, then yields, then sleeps, and gives up at the
// group's deadline with an error naming the collective and the missing rank,
// or earlier when the missing rank's process has exited. After such an error
// the group is out of step for good, so later calls fail at once.
//
// After the slots, the segment holds one point-to-point channel per ordered
// pair of ranks (see ShmChannel), which send/recv use without involving the
// other ranks.
//
// No torch here: this layer could sit in runtime/ under a hardware transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace torch_neuronx::distributed {

// What each rank says about its part of a collective; ranks compare them so a
// mismatch raises the same error everywhere instead of corrupting memory.
struct StepDescriptor {
  int32_t op = 0;        // which collective (c10d::OpType)
  int32_t dtype = 0;     // c10::ScalarType
  int32_t root = -1;     // broadcast root, or -1
  int32_t reduce = -1;   // c10d::ReduceOp, or -1
  int64_t numel = 0;     // elements this rank contributes
  int64_t count = 0;     // tensors (coalesced forms), or 0
  bool operator==(const StepDescriptor&) const = default;
};

// Raised when a peer does not arrive in time or has died; the group is unusable afterwards.
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShmTransport {
 public:
  // Rank 0: creates the segment `name` with `slot_bytes` of data per rank.
  static ShmTransport create(const std::string& name, int rank, int size, size_t slot_bytes);
  // Other ranks: opens the segment rank 0 created.
  static ShmTransport open(const std::string& name, int rank, int size, size_t slot_bytes);

  ShmTransport(ShmTransport&& other) noexcept;
  ShmTransport& operator=(ShmTransport&&) = delete;
  ~ShmTransport();

  // Rank 0: waits until every rank has opened the segment, then unlinks its
  // name, so a crash afterwards leaves nothing in /dev/shm.
  void awaitAttachedAndUnlink(std::chrono::milliseconds timeout);

  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slotBytes() const { return slot_bytes_; }
  const std::string& name() const { return name_; }

  uint8_t* beginStep(const char* what);
  void publish(const StepDescriptor& descriptor);
  void waitForPeers();
  void endStep();

  const uint8_t* data(int rank) const;
  const StepDescriptor& descriptor(int rank) const;

  // The memory of the channel from rank `src` to rank `dst` (channelBytes() long).
  uint8_t* channel(int src, int dst) const;
  size_t channelBytes() const { return slot_bytes_; }

  // Waits until `ready()` for one peer (point-to-point), with the same
  // timeout, dead-peer detection and failure as the collective steps. `peer`
  // -1 (any source) checks only the deadline. `ready` may do work, such as
  // draining incoming channels, each time it is asked.
  void waitFor(const char* what, int peer, const std::string& phase, const std::function<bool()>& ready);

 private:
  ShmTransport(std::string name, int rank, int size, size_t slot_bytes, void* base, size_t bytes, bool owner);
  struct SlotHeader;
  SlotHeader& header(int rank) const;
  uint8_t* slotData(int rank) const;
  void checkUsable() const;
  // Waits until `arrived(r)` for every rank r; `phase` names what is awaited.
  template <typename Arrived>
  void waitForAll(const std::string& phase, Arrived arrived);
  // One peer's wait; `start` is when the whole wait began (the deadline's origin).
  template <typename Arrived>
  void waitForRank(int r, const std::string& phase, std::chrono::steady_clock::time_point start, Arrived arrived);
  [[noreturn]] void fail(const std::string& message);

  std::string name_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  void* base_;
  size_t bytes_;
  bool owner_;        // rank 0 unlinks the name if it is still there
  bool unlinked_ = false;
  uint64_t step_ = 0;
  const char* what_ = "";  // the collective in progress, for error messages
  std::string broken_;     // why the group is unusable, or empty
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
};

}  // namespace torch_neuronx::distributed
