"""The two physical cores of a logical NeuronCore talking to each other (nki.lnc.sendrecv,
sendrecv_compute, core_barrier), launched as two instances, against torch references."""
from __future__ import annotations

import pytest
import torch

import nki_lnc_kernels as k  # noqa: E402
from torch_neuronx.nki.trace import NkiError


def halves(seed: int, P: int = 8, F: int = 16) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(2, P, F)


def test_sendrecv_swaps_the_cores_halves():
    x = halves(1)
    assert torch.equal(k.halves_exchanged[2](x.to("neuron")).cpu(), x.flip(0))


@pytest.mark.parametrize("deprecated_name", [False, True])
def test_sendrecv_into_its_own_source_receives_before_it_overwrites(deprecated_name, monkeypatch, tmp_path):
    x = halves(2, P=4, F=8)
    if deprecated_name:  # the warning comes as the kernel is traced: a disk cache of its own makes it trace
        monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
        with pytest.warns(DeprecationWarning, match="nki.isa.sendrecv is deprecated: use nki.lnc.sendrecv"):
            got = k.halves_exchanged_in_place[2](x.to("neuron"), True)
    else:
        got = k.halves_exchanged_in_place[2](x.to("neuron"))
    assert torch.equal(got.cpu(), x.flip(0))


@pytest.mark.parametrize("op_name, reference", [("add", torch.add), ("maximum", torch.maximum),
                                                ("minimum", torch.minimum)])
def test_sendrecv_compute_gives_both_cores_the_reduction(op_name, reference):
    x = halves(3)
    both = reference(x[0], x[1])
    assert torch.equal(k.halves_reduced[2](x.to("neuron"), op_name).cpu(), torch.stack([both, both]))


def test_a_core_reads_what_the_other_wrote_before_the_barrier():
    x = halves(4)
    out, shared = k.doubled_then_read_across_a_barrier[2](x.to("neuron"))
    assert torch.equal(shared.cpu(), 2 * x)
    assert torch.equal(out.cpu(), 2 * x.flip(0) + 1)


@pytest.mark.parametrize("how, message", [
    ("only_rank_0", r"the two cores' collectives do not pair up \(rank 0: \['sendrecv'\], rank 1: \[\]\)"),
    ("to_itself", "must be the other core"),
    ("shared_src", "sendrecv's src must be in SBUF or private HBM, not shared HBM"),
    ("multiply", "reduces with nl.add, nl.maximum or nl.minimum, not multiply"),
    ("in_a_device_loop", "inside a device loop or an nl.if_else side is not emulated"),
    ("barrier_on_sbuf", "core_barrier's data must be a tensor in shared HBM"),
])
def test_misused_collectives_are_refused_while_tracing(how, message):
    with pytest.raises(NkiError, match=message):
        k.misuse[2](halves(5).to("neuron"), how)


def test_the_cores_are_a_launch_of_two_instances():
    with pytest.raises(NkiError, match=r"a launch of two instances here \(kernel\[2\] or kernel\[nl.nc\(2\)\]\), "
                                       r"not a grid of \[1\]"):
        k.halves_exchanged(halves(6).to("neuron"))
    with pytest.raises(NkiError, match=r"not a grid of \[4\]"):
        k.halves_exchanged[4](halves(6).to("neuron"))


def test_trn1_has_no_collectives_between_cores(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    with pytest.raises(NkiError, match="sendrecv runs on NeuronCore-v3 \\(trn2\\) and newer"):
        k.halves_exchanged[2](halves(7).to("neuron"))
