"""The "neuron" torch.distributed backend.

Registered when the plugin loads, so `init_process_group("neuron")`, and
`init_process_group()` with no backend when the accelerator is neuron, give a
process group whose neuron (and CPU) tensors move through shared memory
between ranks of one host, and through Gloo between hosts. The backend itself
is C++ (distributed/ in the repository); see docs/distributed.md.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch

BACKEND_NAME = "neuron"
# Names the host a rank runs on; ranks with the same name share memory. Defaults
# to the host name; setting it per rank lets one machine stand in for several.
HOST_ENV = "TORCH_NEURONX_DIST_HOST"

_registered = False


def is_available() -> bool:
    """True when torch has distributed support and the C++ backend was built into the plugin."""
    from .. import _C

    return torch.distributed.is_available() and hasattr(_C, "_NeuronBackend")


def _host_name() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()


def _hosts_of_ranks(store, rank: int, world_size: int) -> list[str]:
    """Every rank's host name, exchanged through the group's store."""
    store.set(f"torch_neuronx/host/{rank}", _host_name())
    return [store.get(f"torch_neuronx/host/{r}").decode() for r in range(world_size)]


def _create_backend(store, rank: int, world_size: int, timeout: timedelta):
    """The creator torch calls for each process group (register_backend's non-extended form)."""
    from .. import _C

    hosts = _hosts_of_ranks(store, rank, world_size)
    if len(set(hosts)) == 1:
        return _C._NeuronBackend(store, rank, world_size, timeout)
    return _create_multi_host_backend(store, rank, world_size, timeout, hosts)


def _create_multi_host_backend(store, rank: int, world_size: int, timeout: timedelta, hosts: list[str]):
    """Shared memory within each host, Gloo between hosts (see distributed/MultiHostBackend.h).

    Hosts are numbered in the order of their lowest ranks, and a host's lowest rank leads it. Every rank builds
    the same groups in the same order (its host's, the leaders' if it leads, everyone's), so the rendezvous of
    one cannot wait on another.
    """
    from torch.distributed import PrefixStore, ProcessGroupGloo

    from .. import _C

    order = list(dict.fromkeys(hosts))  # host names by lowest rank
    host = order.index(hosts[rank])
    local_ranks = [r for r in range(world_size) if hosts[r] == hosts[rank]]
    local = _C._NeuronBackend(PrefixStore(f"torch_neuronx/host{host}/", store), local_ranks.index(rank),
                              len(local_ranks), timeout)
    leaders = None
    if local_ranks[0] == rank:
        leaders = ProcessGroupGloo(PrefixStore("torch_neuronx/leaders/", store), host, len(order), timeout)
    everyone = ProcessGroupGloo(PrefixStore("torch_neuronx/all/", store), rank, world_size, timeout)
    return _C._NeuronMultiHostBackend(rank, world_size, [order.index(h) for h in hosts], local, leaders, everyone,
                                      timeout)


def register() -> None:
    """Registers the backend with torch.distributed; a no-op when torch lacks distributed."""
    global _registered
    if _registered or not is_available():
        return
    _registered = True
    backend = torch.distributed.Backend
    if BACKEND_NAME in backend.backend_list:
        return  # already registered, e.g. by an earlier import of another copy
    # "cpu" too: object collectives and CPU tensors in a "neuron" group use this
    # backend. The default backend for CPU-only groups stays gloo (torch keeps an
    # existing default_device_backend_map entry).
    backend.register_backend(BACKEND_NAME, _create_backend, devices=["neuron", "cpu"])
