"""torch.neuron streams and events, on torch's generic Stream/Event.

The emulated runtime executes each kernel when it is submitted, so waits
never block; ordering, queries and timing behave as on an asynchronous device.
"""
from __future__ import annotations

from typing import Any

import torch

from .. import _C
from ._utils import _get_device_index


class Stream(torch.Stream):
    """A NeuronCore stream; priority < 0 asks for a high-priority stream."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("neuron", index), priority=priority)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event


class Event(torch.Event):
    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                device: Any = None):
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("neuron", index), enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event to `end_event`; both need enable_timing=True."""
        return _C._event_elapsed_time(self, end_event)


def _as_neuron_stream(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


def current_stream(device: Any = None) -> Stream:
    return _as_neuron_stream(torch.accelerator.current_stream(_get_device_index(device, optional=True)))


def default_stream(device: Any = None) -> Stream:
    index = _get_device_index(device, optional=True)
    return Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


def synchronize(device: Any = None) -> None:
    torch.accelerator.synchronize(_get_device_index(device, optional=True))


class StreamContext:
    """Makes `stream` current on its core for the duration of a with-block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous: torch.Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = torch.accelerator.current_stream(self.stream.device_index)
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            torch.accelerator.set_stream(self.previous)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
