#include "distributed/NeuronWork.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "distributed/ShmTransport.h"

namespace torch_neuronx::distributed {
namespace {

// A future over device tensors must name their devices (it records events on
// them); CPU outputs need none.
std::vector<c10::Device> devicesOf(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const auto& t : tensors) {
    if (t.defined() && !t.device().is_cpu() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

NeuronWork::NeuronWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op), outputs_(std::move(outputs)) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     devicesOf(outputs_));
}

c10::intrusive_ptr<NeuronWork> NeuronWork::enqueue(CollectiveQueue& queue, int rank, c10d::OpType op,
                                                   std::vector<at::Tensor> outputs, std::function<int()> body) {
  auto work = c10::make_intrusive<NeuronWork>(rank, op, std::move(outputs));
  queue.submit([work, body = std::move(body)] {
    try {
      work->complete(body());
    } catch (const TransportError& e) {
      try {
        C10_THROW_ERROR(DistBackendError, e.what());
      } catch (...) {
        work->fail(std::current_exception());
      }
    } catch (...) {
      work->fail(std::current_exception());
    }
  });
  return work;
}

void NeuronWork::complete(int source_rank) {
  source_rank_ = source_rank;
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void NeuronWork::fail(std::exception_ptr error) {
  finish(error);
  future_->setError(error);
}

int NeuronWork::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_ && !exception_, "sourceRank() is only available once the recv has completed (wait() first)");
  TORCH_CHECK(source_rank_ >= 0, "sourceRank() is only available for a recv from any source");
  return source_rank_;
}

}  // namespace torch_neuronx::distributed
