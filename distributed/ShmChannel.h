// A one-way channel between two ranks in shared memory: a ring of frames that
// the sending rank appends and the receiving rank consumes, in order.
//
// The ring lets a sender post several messages (or the first part of a large
// one) and return before the receiver arrives, which is what makes the usual
// exchange patterns (both ranks send, then both receive; batch_isend_irecv
// run op by op) work with synchronous send/recv. A message larger than a
// frame is sent as consecutive frames; frames of one message are never
// interleaved with another's, as one sender writes one channel at a time.
//
// Only the sender advances `head` and only the receiver advances `tail`, so
// the ring needs no lock. No torch here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace torch_neuronx::distributed {

// What each frame says about the message it carries part of.
struct FrameHeader {
  uint64_t bytes = 0;    // payload bytes in this frame
  uint64_t offset = 0;   // where the payload goes in the message, in bytes
  int64_t numel = 0;     // elements of the whole message
  int32_t tag = 0;
  int32_t dtype = 0;     // c10::ScalarType
  uint32_t wrap = 0;     // 1: no frame here, the ring continues at its start
};

class ShmChannel {
 public:
  // `memory` is `bytes` long and zero-filled when the segment is created.
  ShmChannel(uint8_t* memory, size_t bytes);

  // The largest payload one frame carries; larger messages take several frames.
  size_t maxPayload() const { return capacity_ / 2 - kFrameHeaderBytes; }

  // Sender: appends a frame if the ring has room for it; false when full.
  bool tryWrite(const FrameHeader& header, const void* payload);

  // Receiver: the oldest unread frame and its payload, or nullptr when empty.
  const FrameHeader* peek(const uint8_t** payload);
  // Receiver: done with the frame peek() returned.
  void pop();

  static constexpr size_t kFrameHeaderBytes = 64;

 private:
  struct Counters {
    alignas(64) std::atomic<uint64_t> head;  // bytes ever written (sender)
    alignas(64) std::atomic<uint64_t> tail;  // bytes ever consumed (receiver)
  };
  static size_t frameBytes(size_t payload) { return kFrameHeaderBytes + (payload + 63) / 64 * 64; }
  FrameHeader* at(uint64_t position) const;

  Counters* counters_;
  uint8_t* ring_;
  size_t capacity_;  // a multiple of 64
};

}  // namespace torch_neuronx::distributed
