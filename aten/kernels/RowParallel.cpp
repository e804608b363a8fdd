#include "aten/kernels/RowParallel.h"

#include "aten/kernels/RunDelay.h"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace torch_neuronx {
namespace {

// How long a helper spins for the next loop before it sleeps. Decode issues
// its products well within this; a busy machine loses at most this much CPU
// per loop. TORCH_NEURONX_SPIN_US overrides it (0: helpers always sleep).
std::chrono::microseconds spinTime() {
  const char* env = std::getenv("TORCH_NEURONX_SPIN_US");
  return std::chrono::microseconds(env ? std::max(0L, std::atol(env)) : 200L);
}

using Clock = std::chrono::steady_clock;

// Decides from the loops themselves whether helper threads help, by two signs
// that another process holds the cores. A loop in which the caller, out of
// work, waited longer for helpers' claimed chunks than it had worked itself
// ran slower than without helpers. And while helpers run, a caller that itself
// waits for a CPU for more than a share of the time (its run delay) is losing
// that time to them: three runnable threads on two cores cost the caller a
// third of its time even in loops no helper delays (decode with one busy
// process beside it: 1.2-1.3x the time of one thread). Either sign makes the
// caller run loops alone for a while, then try helpers again, backing off
// while they keep losing; a window of helper loops without run delay shortens
// the back-off again.
class ContentionMonitor {
 public:
  void noteLoop(Clock::duration worked, Clock::duration waited, Clock::time_point now) {
    const bool lost = waited > worked;
    score_ = score_ * 3 / 4 + (lost ? 64 : 0);  // a moving share of lost loops, in 1/256
    if (score_ >= 128) goAlone(now);
  }
  // The caller's run delay over a window of loops with helpers, as a share of the window.
  void noteRunDelay(double share, Clock::time_point now) {
    if (share > kOversubscribed) return goAlone(now);
    backoff_ = std::max(backoff_ / 2, kShortestBackoff);
  }
  bool avoidHelpers(Clock::time_point now) const { return now < alone_until_; }

 private:
  void goAlone(Clock::time_point now) {
    alone_until_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, kLongestBackoff);
    score_ = 0;
  }

  static constexpr Clock::duration kShortestBackoff = std::chrono::milliseconds(20);
  static constexpr Clock::duration kLongestBackoff = std::chrono::seconds(1);
  // Alone, two threads of ours each have a core and wait for one ~1% of the time; with a third runnable
  // thread on two cores, a third.
  static constexpr double kOversubscribed = 0.15;
  int score_ = 0;
  Clock::duration backoff_ = kShortestBackoff;
  Clock::time_point alone_until_{};
};

int threadsFromEnvironment() {
  for (const char* name : {"TORCH_NEURONX_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value && *value) {
      char* end = nullptr;
      const long threads = std::strtol(value, &end, 10);
      // OMP_NUM_THREADS may be a list ("4,2"): its first entry counts.
      if (end != value && threads > 0) return static_cast<int>(std::min(threads, 64L));
    }
  }
  cpu_set_t usable;
  if (sched_getaffinity(0, sizeof(usable), &usable) == 0) return std::max(1, CPU_COUNT(&usable));
  return std::max(1u, std::thread::hardware_concurrency());
}

class HelperPool {
 public:
  static HelperPool& instance() {
    static HelperPool* pool = new HelperPool();  // never destroyed: helpers may outlive static destruction
    return *pool;
  }

  int helpers() const { return static_cast<int>(threads_.size()); }
  std::mutex busy;  // one loop at a time

  // The caller holds busy. Publishes the loop, works on it, waits for claimed chunks.
  void run(int64_t rows, int64_t chunks, const std::function<void(int64_t, int64_t)>& body) {
    const auto started = Clock::now();
    caller_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
    rows_.store(rows, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    body_.store(&body, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const uint64_t generation = (state_.load(std::memory_order_relaxed) >> 32) + 1;
    // seq_cst with the helpers' sleeping_ count: one of the two sees the other.
    state_.store(generation << 32);  // chunk 0 of a new generation
    if (sleeping_.load() > 0) state_.notify_all();
    while (work(generation)) {
    }
    const auto caller_done = Clock::now();
    waitForClaimedChunks(static_cast<int>(chunks));
    const auto now = Clock::now();
    contention_.noteLoop(caller_done - started, now - caller_done, caller_done);
    thread_local RunDelayClock run_delay;  // the caller's own: /proc/thread-self is per thread
    if (auto share = run_delay.afterLoop(now, kRunDelayWindow)) contention_.noteRunDelay(*share, now);
  }

  // Whether helpers have recently been slower than running the loop alone.
  bool helpersHurt() { return contention_.avoidHelpers(Clock::now()); }

 private:
  HelperPool() {
    CPU_ZERO(&usable_);
    sched_getaffinity(0, sizeof(usable_), &usable_);
    const int count = std::clamp(deviceThreads() - 1, 0, 7);
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { helperLoop(); });
    for (auto& t : threads_) t.detach();
  }

  // Claims and runs one chunk of `generation`; false once none is left (or a newer loop began).
  bool work(uint64_t generation) {
    uint64_t state = state_.load(std::memory_order_acquire);
    for (;;) {
      if ((state >> 32) != generation) return false;
      const int64_t chunk = static_cast<int64_t>(state & 0xffffffffu);
      // These belong to `generation` while a chunk of it is unclaimed; values
      // read after a newer loop began are dropped when the exchange fails.
      const int64_t rows = rows_.load(std::memory_order_relaxed);
      const int64_t chunks = chunks_.load(std::memory_order_relaxed);
      const auto* body = body_.load(std::memory_order_relaxed);
      if (chunk >= chunks) return false;
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) {
        (*body)(rows * chunk / chunks, rows * (chunk + 1) / chunks);
        done_.fetch_add(1);
        if (waiting_.load()) done_.notify_all();
        return true;
      }
    }
  }

  void helperLoop() {
    const auto spin = spinTime();
    uint64_t seen = state_.load(std::memory_order_acquire) >> 32;
    for (;;) {
      uint64_t state = state_.load(std::memory_order_acquire);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; (state >> 32) == seen; ++i) {
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > spin) {
          sleeping_.fetch_add(1);
          state_.wait(state);
          sleeping_.fetch_sub(1);
        } else {
          _mm_pause();
        }
        state = state_.load(std::memory_order_acquire);
      }
      seen = state >> 32;
      leaveCallersCpu();
      while (work(seen)) {
      }
    }
  }

  // The scheduler often wakes a helper on the caller's CPU (the waker's), where
  // it would take turns with the caller while another CPU idles, sometimes for
  // many milliseconds. A helper that finds itself there moves to the others.
  void leaveCallersCpu() {
    const int caller = caller_cpu_.load(std::memory_order_relaxed);
    if (caller < 0 || caller != sched_getcpu() || !CPU_ISSET(caller, &usable_) || CPU_COUNT(&usable_) < 2) return;
    cpu_set_t others = usable_;
    CPU_CLR(caller, &others);
    sched_setaffinity(0, sizeof(others), &others);  // moves this thread at once
  }

  // A helper that claimed a chunk may have been descheduled by another
  // process: spin for a moment, then sleep, so that this core is free for it.
  void waitForClaimedChunks(int chunks) {
    for (int i = 0; i < kSpinsBeforeSleep; ++i) {
      if (done_.load(std::memory_order_acquire) >= chunks) return;
      _mm_pause();
    }
    waiting_.store(true);  // seq_cst with the helpers' done_ increment: one of the two sees the other
    for (int done = done_.load(); done < chunks; done = done_.load()) done_.wait(done);
    waiting_.store(false, std::memory_order_relaxed);
  }

  static constexpr int kSpinsBeforeSleep = 4096;  // a few microseconds
  // Short against a decode step (tens of ms), long against the loops in it (tens of us).
  static constexpr Clock::duration kRunDelayWindow = std::chrono::milliseconds(5);
  std::vector<std::thread> threads_;
  ContentionMonitor contention_;
  std::atomic<bool> waiting_{false};
  // High 32 bits: the loop's generation; low 32: the next unclaimed chunk.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> done_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<int> caller_cpu_{-1};  // where the latest loop's caller ran
  cpu_set_t usable_;                 // the CPUs this process may use, when the pool began
  std::atomic<int64_t> rows_{0};
  std::atomic<int64_t> chunks_{0};
  std::atomic<const std::function<void(int64_t, int64_t)>*> body_{nullptr};
};

}  // namespace

int deviceThreads() {
  static const int threads = threadsFromEnvironment();
  return threads;
}

void parallelRows(int64_t rows, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body) {
  if (rows <= 0) return;
  const int64_t max_chunks = rows / std::max<int64_t>(min_chunk, 1);
  if (max_chunks < 2 || deviceThreads() < 2 || at::in_parallel_region()) return body(0, rows);
  HelperPool& pool = HelperPool::instance();
  std::unique_lock<std::mutex> lock(pool.busy, std::try_to_lock);
  if (!lock.owns_lock() || pool.helpers() == 0 || pool.helpersHurt()) return body(0, rows);
  // A few chunks per thread, so a late helper leaves little for the caller to wait on.
  const int64_t chunks = std::min<int64_t>(max_chunks, 4 * (pool.helpers() + 1));
  pool.run(rows, chunks, body);
}

}  // namespace torch_neuronx
