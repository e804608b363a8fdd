#include "aten/kernels/RunDelay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace torch_neuronx {

RunDelayClock::~RunDelayClock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<uint64_t> RunDelayClock::read() {
  if (fd_ == -2) fd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);  // this thread's, once
  if (fd_ < 0) return std::nullopt;
  char text[96];
  const ssize_t n = ::pread(fd_, text, sizeof(text) - 1, 0);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  // "<time on a CPU> <time waiting for one> <timeslices>", in nanoseconds.
  char* end = nullptr;
  std::strtoull(text, &end, 10);  // skipped: the time on a CPU
  const char* second = end;
  const uint64_t waited = std::strtoull(second, &end, 10);
  if (end == second) return std::nullopt;
  return waited;
}

std::optional<double> RunDelayClock::afterLoop(Clock::time_point now, Clock::duration window) {
  const bool gap = open_ && now - last_call_ > window;
  last_call_ = now;
  if (!open_ || gap) {
    const auto delay = read();
    open_ = delay.has_value();
    window_start_ = now;
    delay_at_start_ = delay.value_or(0);
    return std::nullopt;
  }
  if (now - window_start_ < window) return std::nullopt;
  const auto delay = read();
  if (!delay) {
    open_ = false;
    return std::nullopt;
  }
  const double wall = std::chrono::duration<double, std::nano>(now - window_start_).count();
  const double share = static_cast<double>(*delay - delay_at_start_) / wall;
  window_start_ = now;
  delay_at_start_ = *delay;
  return share;
}

}  // namespace torch_neuronx
