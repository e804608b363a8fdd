// send and recv between two ranks of a group, over the per-pair ShmChannels,
// without involving the other ranks.
//
// Messages from one rank to another travel in order, and each carries its
// tag. A recv takes the oldest message from its source (or from any source)
// with its tag: messages with other tags that arrive first are kept in
// process memory until a recv asks for them, as MPI and Gloo allow. A message
// the recv is waiting for goes straight into the recv's tensor.
//
// While waiting (for room to send, or for a message), a rank drains every
// incoming channel into process memory, so two ranks that send each other
// large messages before receiving them do not deadlock.
#pragma once

#include <ATen/core/Tensor.h>

#include <list>
#include <vector>

#include "distributed/ShmChannel.h"
#include "distributed/ShmTransport.h"

namespace torch_neuronx::distributed {

class PointToPoint {
 public:
  explicit PointToPoint(ShmTransport& transport);

  // Returns once the message is in the channel (or partly, for messages larger
  // than the channel, once the receiver has taken the rest).
  void send(const at::Tensor& flat, int dst, int tag);
  // Fills `flat` with the oldest matching message; src -1 takes one from any
  // rank. Returns the rank it came from.
  int recv(const at::Tensor& flat, int src, int tag);

 private:
  struct Message {
    int src;
    int tag;
    at::ScalarType dtype;
    int64_t numel;
    at::Tensor data;        // the recv's tensor (direct) or a buffer of numel elements
    uint64_t received = 0;  // bytes so far
    bool complete() const { return received == static_cast<uint64_t>(data.nbytes()); }
  };
  // The recv in progress, to which a newly arriving matching message goes directly.
  struct Wanted {
    int src;  // or -1
    int tag;
    const at::Tensor& out;
    bool claimed = false;  // a message already goes to `out`
  };

  void drain(Wanted* wanted);
  void accept(int src, const FrameHeader& frame, const uint8_t* payload, Wanted* wanted);
  std::list<Message>::iterator find(int src, int tag);
  static void checkFits(const Message& message, const at::Tensor& out);

  ShmTransport& transport_;
  std::vector<ShmChannel> outgoing_;     // per destination rank
  std::vector<ShmChannel> incoming_;     // per source rank
  std::vector<Message*> assembling_;     // per source rank: the message whose frames are arriving
  std::list<Message> pending_;           // arrived or arriving, not yet received, oldest first
};

}  // namespace torch_neuronx::distributed
