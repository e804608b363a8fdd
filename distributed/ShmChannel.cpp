#include "distributed/ShmChannel.h"

#include <cstring>
#include <new>
#include <stdexcept>

namespace torch_neuronx::distributed {

static_assert(sizeof(FrameHeader) <= ShmChannel::kFrameHeaderBytes, "a frame header fits its cache line");

ShmChannel::ShmChannel(uint8_t* memory, size_t bytes)
    : counters_(reinterpret_cast<Counters*>(memory)), ring_(memory + sizeof(Counters)),
      capacity_((bytes - sizeof(Counters)) / 64 * 64) {
  if (capacity_ < 4 * kFrameHeaderBytes) throw std::invalid_argument("neuron process group: channel too small");
}

FrameHeader* ShmChannel::at(uint64_t position) const {
  return reinterpret_cast<FrameHeader*>(ring_ + position % capacity_);
}

bool ShmChannel::tryWrite(const FrameHeader& header, const void* payload) {
  const uint64_t head = counters_->head.load(std::memory_order_relaxed);
  const uint64_t tail = counters_->tail.load(std::memory_order_acquire);
  const size_t need = frameBytes(header.bytes);
  // A frame never wraps: when it does not fit before the end of the ring, a
  // wrap marker fills the rest and the frame starts at the beginning.
  const size_t to_end = capacity_ - head % capacity_;
  const size_t skip = to_end < need ? to_end : 0;
  if (capacity_ - (head - tail) < skip + need) return false;
  if (skip) {
    FrameHeader marker;
    marker.wrap = 1;
    *at(head) = marker;
  }
  FrameHeader* frame = at(head + skip);
  *frame = header;
  if (header.bytes) std::memcpy(reinterpret_cast<uint8_t*>(frame) + kFrameHeaderBytes, payload, header.bytes);
  counters_->head.store(head + skip + need, std::memory_order_release);
  return true;
}

const FrameHeader* ShmChannel::peek(const uint8_t** payload) {
  uint64_t tail = counters_->tail.load(std::memory_order_relaxed);
  const uint64_t head = counters_->head.load(std::memory_order_acquire);
  if (tail == head) return nullptr;
  if (at(tail)->wrap) {  // skip the marker; the sender already wrote the frame after it
    tail += capacity_ - tail % capacity_;
    counters_->tail.store(tail, std::memory_order_release);
  }
  FrameHeader* frame = at(tail);
  *payload = reinterpret_cast<const uint8_t*>(frame) + kFrameHeaderBytes;
  return frame;
}

void ShmChannel::pop() {
  const uint64_t tail = counters_->tail.load(std::memory_order_relaxed);
  counters_->tail.store(tail + frameBytes(at(tail)->bytes), std::memory_order_release);
}

}  // namespace torch_neuronx::distributed
