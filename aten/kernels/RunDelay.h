// How long the calling thread has waited for a CPU while runnable (Linux's
// per-thread schedstat "run delay"). Helper threads that share the cores with
// another busy process make the caller itself wait for a CPU, even in loops
// where no helper is late: this measures that cost directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace torch_neuronx {

class RunDelayClock {
 public:
  using Clock = std::chrono::steady_clock;

  RunDelayClock() = default;
  RunDelayClock(const RunDelayClock&) = delete;
  RunDelayClock& operator=(const RunDelayClock&) = delete;
  ~RunDelayClock();  // closes the thread's schedstat file (a thread_local one, when its thread ends)

  // Call after each loop run with helpers. Once `window` has passed since the
  // window began, returns the share of it this thread spent waiting for a CPU
  // and begins a new window; a gap longer than `window` since the previous
  // call (helpers were avoided meanwhile) begins a new window too.
  std::optional<double> afterLoop(Clock::time_point now, Clock::duration window);

 private:
  // Nanoseconds this thread has waited for a CPU, or nullopt where the kernel does not say.
  std::optional<uint64_t> read();

  int fd_ = -2;  // -2: not opened yet; -1: unavailable
  bool open_ = false;
  Clock::time_point window_start_{}, last_call_{};
  uint64_t delay_at_start_ = 0;
};

}  // namespace torch_neuronx
