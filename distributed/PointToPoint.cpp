#include "distributed/PointToPoint.h"

#include <ATen/ATen.h>

#include <cstring>

namespace torch_neuronx::distributed {

PointToPoint::PointToPoint(ShmTransport& transport) : transport_(transport), assembling_(transport.size(), nullptr) {
  const int me = transport.rank();
  for (int r = 0; r < transport.size(); ++r) {
    outgoing_.emplace_back(transport.channel(me, r), transport.channelBytes());
    incoming_.emplace_back(transport.channel(r, me), transport.channelBytes());
  }
}

void PointToPoint::send(const at::Tensor& flat, int dst, int tag) {
  ShmChannel& channel = outgoing_[dst];
  const auto* data = static_cast<const uint8_t*>(flat.data_ptr());
  const uint64_t total = flat.nbytes();
  const std::string phase = "receive earlier messages (the channel to it is full)";
  uint64_t offset = 0;
  do {  // at least one frame, so empty tensors arrive too
    FrameHeader frame;
    frame.bytes = std::min<uint64_t>(channel.maxPayload(), total - offset);
    frame.offset = offset;
    frame.numel = flat.numel();
    frame.tag = tag;
    frame.dtype = static_cast<int32_t>(flat.scalar_type());
    transport_.waitFor("send", dst, phase, [&] {
      if (channel.tryWrite(frame, data + offset)) return true;
      drain(nullptr);  // the destination may itself be blocked sending to us
      return false;
    });
    offset += frame.bytes;
  } while (offset < total);
}

int PointToPoint::recv(const at::Tensor& flat, int src, int tag) {
  Wanted wanted{src, tag, flat};
  auto found = pending_.end();
  transport_.waitFor("recv", src, "send a message with tag " + std::to_string(tag), [&] {
    drain(&wanted);
    found = find(src, tag);
    if (found == pending_.end()) return false;
    checkFits(*found, flat);  // raise at once rather than after a large message arrived
    return found->complete();
  });
  if (found->data.data_ptr() != flat.data_ptr()) flat.copy_(found->data);
  const int from = found->src;
  pending_.erase(found);
  return from;
}

void PointToPoint::checkFits(const Message& message, const at::Tensor& out) {
  TORCH_CHECK(message.dtype == out.scalar_type() && message.numel == out.numel(), "recv: rank ", message.src,
              " sent ", message.numel, " ", message.dtype, " elements with tag ", message.tag, ", but the recv tensor has ",
              out.numel(), " ", out.scalar_type(), " elements");
}

std::list<PointToPoint::Message>::iterator PointToPoint::find(int src, int tag) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if ((src < 0 || it->src == src) && it->tag == tag) return it;
  }
  return pending_.end();
}

void PointToPoint::drain(Wanted* wanted) {
  for (int src = 0; src < transport_.size(); ++src) {
    if (src == transport_.rank()) continue;
    const uint8_t* payload = nullptr;
    while (const FrameHeader* frame = incoming_[src].peek(&payload)) {
      accept(src, *frame, payload, wanted);
      incoming_[src].pop();
    }
  }
}

void PointToPoint::accept(int src, const FrameHeader& frame, const uint8_t* payload, Wanted* wanted) {
  Message* message = assembling_[src];
  if (!message) {  // the first frame of a message
    const auto dtype = static_cast<at::ScalarType>(frame.dtype);
    const bool matches = wanted && !wanted->claimed && (wanted->src < 0 || wanted->src == src) &&
                         wanted->tag == frame.tag && wanted->out.scalar_type() == dtype &&
                         wanted->out.numel() == frame.numel && find(wanted->src, wanted->tag) == pending_.end();
    at::Tensor data = matches ? wanted->out : at::empty({frame.numel}, at::TensorOptions().dtype(dtype));
    if (matches) wanted->claimed = true;
    pending_.push_back(Message{src, frame.tag, dtype, frame.numel, data});
    message = &pending_.back();
  }
  if (frame.bytes) std::memcpy(static_cast<uint8_t*>(message->data.data_ptr()) + frame.offset, payload, frame.bytes);
  message->received += frame.bytes;
  assembling_[src] = message->complete() ? nullptr : message;
}

}  // namespace torch_neuronx::distributed
