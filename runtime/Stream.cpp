#include "Stream.h"

#include <stdexcept>

namespace nrt {

Streams& Streams::instance() {
  static Streams streams;
  return streams;
}

StreamId Streams::newStream(int /*device*/, int priority) {
  // Ids 1..kPoolSize are low priority, kPoolSize+1..2*kPoolSize high priority.
  if (priority < 0) return kPoolSize + 1 + (next_high_++ % kPoolSize);
  return 1 + (next_low_++ % kPoolSize);
}

int Streams::priorityOf(StreamId stream) const { return stream > kPoolSize ? -1 : 0; }

void Streams::synchronize(int /*device*/, StreamId /*stream*/) {}

bool Streams::query(int /*device*/, StreamId /*stream*/) const { return true; }

void Streams::synchronizeDevice(int /*device*/) {}

void Streams::noteSubmitted(int device) {
  if (device >= 0 && device < static_cast<int>(work_.size())) work_[device].fetch_add(1, std::memory_order_relaxed);
}

uint64_t Streams::submitted(int device) const {
  return (device >= 0 && device < static_cast<int>(work_.size())) ? work_[device].load() : 0;
}

void Event::record(int device, StreamId /*stream*/) {
  // Inline execution: the stream's work up to here is done, so only the core matters.
  device_ = device;
  recorded_ = true;
  when_ = std::chrono::steady_clock::now();
}

double Event::elapsedMs(const Event& end) const {
  if (!enable_timing_ || !end.enable_timing_) {
    throw std::logic_error("elapsed_time needs both events created with enable_timing=True");
  }
  if (!recorded_ || !end.recorded_) {
    throw std::logic_error("elapsed_time needs both events to be recorded first");
  }
  if (device_ != end.device_) {
    throw std::logic_error("elapsed_time needs both events on the same NeuronCore");
  }
  return std::chrono::duration<double, std::milli>(end.when_ - when_).count();
}

}  // namespace nrt
