// Streams and events of the emulated NeuronCores.
//
// Every kernel the plugin launches is submitted to a stream. The emulator
// executes work inline, at submission, so a stream is always drained once
// submit() returns; the ordering API (events, waits) is still real, so an
// asynchronous runtime can replace this one without touching its callers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace nrt {

using StreamId = int64_t;  // 0 is each core's default stream

class Streams {
 public:
  static Streams& instance();

  StreamId defaultStream() const { return 0; }
  // Streams come from a per-core pool, as on CUDA; priority < 0 is high.
  StreamId newStream(int device, int priority);
  int priorityOf(StreamId stream) const;
  // Blocks until all work submitted to the stream has finished.
  void synchronize(int device, StreamId stream);
  bool query(int device, StreamId stream) const;
  void synchronizeDevice(int device);
  // Work counters: how many kernels and copies each core ran (torch_neuronx.kernels_run()).
  void noteSubmitted(int device);
  uint64_t submitted(int device) const;

 private:
  static constexpr int kPoolSize = 32;
  std::atomic<uint32_t> next_low_{0};
  std::atomic<uint32_t> next_high_{0};
  std::vector<std::atomic<uint64_t>> work_ = std::vector<std::atomic<uint64_t>>(64);
};

// An event marks a point in a stream's work. Timestamps come from a monotonic
// clock taken when the marked work completed.
class Event {
 public:
  explicit Event(bool enable_timing) : enable_timing_(enable_timing) {}
  void record(int device, StreamId stream);
  bool recorded() const { return recorded_; }
  bool query() const { return true; }  // inline execution: recorded work is done
  void synchronize() const {}
  // Milliseconds from this event to `end`; both must be recorded with timing.
  double elapsedMs(const Event& end) const;
  int device() const { return device_; }
  bool timing() const { return enable_timing_; }

 private:
  bool enable_timing_;
  bool recorded_ = false;
  int device_ = -1;
  std::chrono::steady_clock::time_point when_{};
};

}  // namespace nrt
