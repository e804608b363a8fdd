#include "distributed/CollectiveQueue.h"

namespace torch_neuronx::distributed {

CollectiveQueue::CollectiveQueue() : state_(std::make_shared<State>()) {
  worker_ = std::thread(&CollectiveQueue::work, state_);
}

CollectiveQueue::~CollectiveQueue() {
  bool idle;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    idle = !state_->busy && state_->tasks.empty();
  }
  state_->wake.notify_one();
  // A busy worker may be waiting for a peer until the group's timeout, or for
  // the GIL held by whoever destroys the group (a Python future callback).
  if (idle) {
    worker_.join();
  } else {
    worker_.detach();
  }
}

void CollectiveQueue::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->tasks.push_back(std::move(task));
  }
  state_->wake.notify_one();
}

void CollectiveQueue::work(const std::shared_ptr<State>& state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->stopping || !state->tasks.empty(); });
    if (state->tasks.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(state->tasks.front());
    state->tasks.pop_front();
    state->busy = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      // A task reports through its work; nothing here can reach the caller.
    }
    task = nullptr;  // release the task's tensors before going idle
    lock.lock();
    state->busy = false;
  }
}

}  // namespace torch_neuronx::distributed
