#include "distributed/ShmTransport.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>

namespace torch_neuronx::distributed {
namespace {

constexpr uint64_t kMagic = 0x6e6575726f6e7631ULL;  // "neuronv1"
constexpr size_t kSegmentHeaderBytes = 4096;
// Spinning is cheapest when a peer arrives within microseconds (the common
// case); after that, yielding and then sleeping leaves the cores to the peers,
// which matters when ranks share few cores.
constexpr uint32_t kSpins = 2000;
constexpr uint32_t kYields = 200;

struct SegmentHeader {
  uint64_t magic;
  int32_t size;
  uint64_t slot_bytes;
  std::atomic<int32_t> attached;
};

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool processAlive(int32_t pid) {
  if (pid <= 0) return true;  // not attached yet: only the deadline can tell
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::string systemError(const std::string& what, const std::string& name) {
  return "neuron process group: " + what + " of shared-memory segment " + name + " failed: " + std::strerror(errno);
}

}  // namespace

// One cache line per counter: the owner writes `ready`, everyone polls it.
struct ShmTransport::SlotHeader {
  alignas(64) std::atomic<uint64_t> ready;     // the last step whose data this slot holds
  alignas(64) std::atomic<uint64_t> consumed;  // the last step this rank finished reading
  alignas(64) int32_t pid;
  StepDescriptor descriptor;
};

namespace {
constexpr size_t kSlotHeaderBytes = 192;
// Each slot's data starts and ends on a cache line.
size_t slotStride(size_t slot_bytes) { return (kSlotHeaderBytes + slot_bytes + 63) / 64 * 64; }
size_t slotsBytes(int size, size_t slot_bytes) { return kSegmentHeaderBytes + size * slotStride(slot_bytes); }
// One channel per ordered pair (the diagonal is unused, which keeps indexing
// simple); tmpfs only backs pages that are written, so unused ones cost nothing.
size_t segmentBytes(int size, size_t slot_bytes) {
  return slotsBytes(size, slot_bytes) + static_cast<size_t>(size) * size * slot_bytes;
}
}  // namespace

ShmTransport::ShmTransport(std::string name, int rank, int size, size_t slot_bytes, void* base, size_t bytes,
                           bool owner)
    : name_(std::move(name)), rank_(rank), size_(size), slot_bytes_(slot_bytes), base_(base), bytes_(bytes),
      owner_(owner) {
  static_assert(sizeof(SlotHeader) == kSlotHeaderBytes, "slotStride assumes the slot header size");
  header(rank_).pid = static_cast<int32_t>(::getpid());
}

ShmTransport ShmTransport::create(const std::string& name, int rank, int size, size_t slot_bytes) {
  const size_t bytes = segmentBytes(size, slot_bytes);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw TransportError(systemError("creation", name));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::string error = systemError("sizing", name);
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw TransportError(error + " (is /dev/shm large enough? TORCH_NEURONX_DIST_SLOT_MB sets the slot size)");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    std::string error = systemError("mapping", name);
    ::shm_unlink(name.c_str());
    throw TransportError(error);
  }
  // ftruncate zero-fills, so every counter starts at step 0.
  new (base) SegmentHeader{kMagic, size, slot_bytes, {1}};
  return ShmTransport(name, rank, size, slot_bytes, base, bytes, /*owner=*/true);
}

ShmTransport ShmTransport::open(const std::string& name, int rank, int size, size_t slot_bytes) {
  const size_t bytes = segmentBytes(size, slot_bytes);
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw TransportError(systemError("opening", name));
  struct stat info{};
  if (::fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != bytes) {
    ::close(fd);
    throw TransportError("neuron process group: shared-memory segment " + name + " has an unexpected size");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw TransportError(systemError("mapping", name));
  auto* segment = static_cast<SegmentHeader*>(base);
  if (segment->magic != kMagic || segment->size != size || segment->slot_bytes != slot_bytes) {
    ::munmap(base, bytes);
    throw TransportError("neuron process group: shared-memory segment " + name + " belongs to another group");
  }
  ShmTransport transport(name, rank, size, slot_bytes, base, bytes, /*owner=*/false);
  segment->attached.fetch_add(1, std::memory_order_acq_rel);
  return transport;
}

ShmTransport::ShmTransport(ShmTransport&& other) noexcept
    : name_(std::move(other.name_)), rank_(other.rank_), size_(other.size_), slot_bytes_(other.slot_bytes_),
      base_(other.base_), bytes_(other.bytes_), owner_(other.owner_), unlinked_(other.unlinked_),
      step_(other.step_), what_(other.what_), broken_(std::move(other.broken_)), timeout_(other.timeout_) {
  other.base_ = nullptr;
  other.owner_ = false;
}

ShmTransport::~ShmTransport() {
  if (base_) ::munmap(base_, bytes_);
  if (owner_ && !unlinked_) ::shm_unlink(name_.c_str());
}

void ShmTransport::awaitAttachedAndUnlink(std::chrono::milliseconds timeout) {
  auto* segment = static_cast<SegmentHeader*>(base_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (segment->attached.load(std::memory_order_acquire) < size_) {
    if (std::chrono::steady_clock::now() > deadline) {
      fail("neuron process group: only " + std::to_string(segment->attached.load()) + " of " +
           std::to_string(size_) + " ranks opened the shared-memory segment within " +
           std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::shm_unlink(name_.c_str());
  unlinked_ = true;
}

ShmTransport::SlotHeader& ShmTransport::header(int rank) const {
  return *reinterpret_cast<SlotHeader*>(static_cast<uint8_t*>(base_) + kSegmentHeaderBytes +
                                        rank * slotStride(slot_bytes_));
}

uint8_t* ShmTransport::slotData(int rank) const {
  return reinterpret_cast<uint8_t*>(&header(rank)) + sizeof(SlotHeader);
}

const uint8_t* ShmTransport::data(int rank) const { return slotData(rank); }

const StepDescriptor& ShmTransport::descriptor(int rank) const { return header(rank).descriptor; }

uint8_t* ShmTransport::channel(int src, int dst) const {
  return static_cast<uint8_t*>(base_) + slotsBytes(size_, slot_bytes_) + (static_cast<size_t>(src) * size_ + dst) *
                                                                             slot_bytes_;
}

void ShmTransport::checkUsable() const {
  if (!broken_.empty()) {
    throw TransportError("neuron process group is unusable after an earlier failure: " + broken_);
  }
}

void ShmTransport::fail(const std::string& message) {
  broken_ = message;
  throw TransportError(message);
}

uint8_t* ShmTransport::beginStep(const char* what) {
  checkUsable();
  what_ = what;
  ++step_;
  const uint64_t previous = step_ - 1;
  waitForAll("finish reading step " + std::to_string(previous), [&](int r) {
    return header(r).consumed.load(std::memory_order_acquire) >= previous;
  });
  return slotData(rank_);
}

void ShmTransport::publish(const StepDescriptor& descriptor) {
  header(rank_).descriptor = descriptor;
  header(rank_).ready.store(step_, std::memory_order_release);
}

void ShmTransport::waitForPeers() {
  waitForAll("join step " + std::to_string(step_), [&](int r) {
    return header(r).ready.load(std::memory_order_acquire) >= step_;
  });
}

void ShmTransport::endStep() { header(rank_).consumed.store(step_, std::memory_order_release); }

template <typename Arrived>
void ShmTransport::waitForAll(const std::string& phase, Arrived arrived) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < size_; ++r) waitForRank(r, phase, start, [&] { return arrived(r); });
}

void ShmTransport::waitFor(const char* what, int peer, const std::string& phase, const std::function<bool()>& ready) {
  checkUsable();
  what_ = what;
  waitForRank(peer, phase, std::chrono::steady_clock::now(), ready);
}

template <typename Arrived>
void ShmTransport::waitForRank(int r, const std::string& phase, std::chrono::steady_clock::time_point start,
                               Arrived arrived) {
  auto pause = std::chrono::microseconds(10);
  const std::string who = r >= 0 ? "rank " + std::to_string(r) : std::string("any rank");
  for (uint32_t spins = 0; !arrived(); ++spins) {
    if (spins < kSpins) {
      cpuRelax();
      continue;
    }
    if (spins < kSpins + kYields) {
      ::sched_yield();
      continue;
    }
    if (std::chrono::steady_clock::now() - start > timeout_) {
      fail("neuron process group: " + std::string(what_) + " timed out after " + std::to_string(timeout_.count()) +
           " ms: rank " + std::to_string(rank_) + " waited for " + who + " to " + phase + " (is " + who +
           " calling the same collectives in the same order?)");
    }
    if (r >= 0 && !processAlive(header(r).pid)) {
      fail("neuron process group: " + std::string(what_) + " failed: rank " + std::to_string(r) + " (pid " +
           std::to_string(header(r).pid) + ") exited while rank " + std::to_string(rank_) + " waited for it to " +
           phase);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace torch_neuronx::distributed
