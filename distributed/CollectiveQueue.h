// A process group's communication stream: collectives run on one worker
// thread, one at a time, in the order the caller issued them (the order every
// rank issues them, which the shared-memory steps rely on). The caller goes on
// with its own work meanwhile and waits on the collective's NeuronWork.
//
// The worker and the tasks it runs share the queue's state, not the queue: a
// group destroyed while a collective is still in flight (a peer that never
// comes) detaches the worker instead of blocking the caller on it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_neuronx::distributed {

class CollectiveQueue {
 public:
  CollectiveQueue();
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Runs `task` after every task submitted before it. Tasks report their own
  // errors (through their work); one that throws is dropped.
  void submit(std::function<void()> task);

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> tasks;
    bool busy = false;
    bool stopping = false;
  };
  static void work(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread worker_;
};

}  // namespace torch_neuronx::distributed
