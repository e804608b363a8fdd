"""Per-core caching allocator: stats, cache, capacity, OOM, memory fraction; pinned host memory."""
import pytest
import torch

from conftest import DEFAULT_HBM, GiB, requires_default_topology, requires_two_devices

MiB = 2**20


def _round(nbytes):
    """What a tensor adds to memory_allocated: its size rounded to 512 B, as on CUDA
    (blocks round to 2 MiB above 1 MiB, but the remainder counts as reserved only)."""
    return (nbytes + 511) // 512 * 512


@pytest.mark.parametrize("numel", [1, 1000, 300_000, 1_000_000])
def test_memory_allocated_grows_by_rounded_size_and_drops(numel):
    torch.neuron.empty_cache()  # no cached block may serve the request
    before = torch.neuron.memory_allocated()
    t = torch.empty(numel, dtype=torch.float32, device="neuron")
    assert torch.neuron.memory_allocated() - before == _round(4 * numel)
    assert torch.neuron.memory_allocated(0) == torch.neuron.memory_allocated("neuron:0") == before + _round(4 * numel)
    del t
    assert torch.neuron.memory_allocated() == before


def test_memory_reserved_is_cached_until_empty_cache():
    torch.neuron.empty_cache()
    reserved0 = torch.neuron.memory_reserved()
    t = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() == reserved0 + 4 * MiB
    del t
    assert torch.neuron.memory_reserved() == reserved0 + 4 * MiB  # still cached
    # the cached block is reused for a request of the same size: no new reservation
    t2 = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() == reserved0 + 4 * MiB
    del t2
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == reserved0


def test_peak_stats_and_reset():
    torch.neuron.empty_cache()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    a = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    b = torch.empty(2 * MiB, dtype=torch.uint8, device="neuron")
    del a
    assert torch.neuron.max_memory_allocated() == base + 10 * MiB
    assert torch.neuron.max_memory_reserved() >= base + 10 * MiB
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base + 2 * MiB
    del b
    assert torch.neuron.max_memory_allocated() == base + 2 * MiB
    torch.neuron.reset_max_memory_allocated()
    assert torch.neuron.max_memory_allocated() == base


def test_memory_stats_keys_agree_with_accelerator():
    t = torch.empty(1234, device="neuron")
    stats = torch.neuron.memory_stats()
    acc = torch.accelerator.memory_stats(0)
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "active_bytes.all.current", "requested_bytes.all.current", "allocation.all.current",
                "segment.all.current", "num_ooms", "num_alloc_retries"):
        assert key in stats, key
        assert stats[key] == acc[key], key
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved()
    assert torch.accelerator.memory_allocated(0) == torch.neuron.memory_allocated()
    assert stats["requested_bytes.all.current"] <= stats["allocated_bytes.all.current"]
    assert stats["allocation.all.current"] >= 1
    assert "neuron:0" in torch.neuron.memory_summary()
    del t


def test_a_growing_tensor_reuses_its_memory():
    """A KV cache one token longer each step (torch.cat, as transformers' DynamicCache does) is served
    from the memory the previous step freed: small blocks are carved from shared 2 MiB segments and
    merge when freed, as on CUDA. With a cached segment per block, every step took new memory."""
    torch.neuron.empty_cache()
    stats0 = torch.neuron.memory_stats()
    kv = torch.zeros(1, 12, 16, 64, device="neuron")
    token = torch.ones(1, 12, 1, 64, device="neuron")
    sizes = 0
    for _ in range(300):
        kv = torch.cat([kv, token], dim=-2)
        sizes += kv.numel() * 4
    stats = torch.neuron.memory_stats()
    assert sizes > 100 * MiB  # what a segment per size would have reserved
    assert stats["reserved_bytes.all.current"] - stats0["reserved_bytes.all.current"] <= 8 * MiB
    assert stats["num_device_alloc"] - stats0["num_device_alloc"] <= 4
    assert torch.equal(kv[0, :, 16:].cpu(), torch.ones(12, 300, 64))  # the blocks held what was written
    assert torch.equal(kv[0, :, :16].cpu(), torch.zeros(12, 16, 64))
    assert stats["inactive_split_bytes.all.current"] <= stats["reserved_bytes.all.current"]


@requires_default_topology
def test_mem_get_info():
    torch.neuron.empty_cache()
    t = torch.empty(5 * MiB, dtype=torch.uint8, device="neuron")
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * GiB == DEFAULT_HBM
    assert free == total - torch.neuron.memory_reserved()
    assert (free, total) == torch.accelerator.get_memory_info(0)
    del t


@requires_two_devices
def test_per_device_separation():
    torch.neuron.empty_cache()
    stats0 = torch.neuron.memory_stats(0)
    r1 = torch.neuron.memory_allocated(1)
    t = torch.empty(4 * MiB, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(1) == r1 + 4 * MiB
    assert torch.neuron.memory_allocated(0) == stats0["allocated_bytes.all.current"]
    after0 = torch.neuron.memory_stats(0)
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current", "allocation.all.current"):
        assert after0[key] == stats0[key], key
    with torch.neuron.device(1):
        assert torch.neuron.memory_allocated() == r1 + 4 * MiB
    del t


@requires_two_devices
def test_op_outputs_are_charged_to_their_core():
    a = torch.ones(MiB, device="neuron:1")  # 4 MiB
    torch.neuron.empty_cache()
    before = [torch.neuron.memory_allocated(i) for i in range(2)]
    c = a + a
    d = torch.exp(a)
    e = torch.cat([a, a])
    grown = [torch.neuron.memory_allocated(i) - before[i] for i in range(2)]
    assert grown[0] == 0, "an op on neuron:1 was charged to neuron:0"
    assert grown[1] >= 16 * MiB
    assert c.device == d.device == e.device == torch.device("neuron:1")
    out = torch.empty(1, device="neuron:1")
    torch.mul(a, a, out=out)  # resized out: the new memory belongs to neuron:1
    assert torch.neuron.memory_allocated(0) == before[0]
    assert torch.neuron.memory_allocated(1) >= before[1] + 20 * MiB
    del c, d, e, out
    assert [torch.neuron.memory_allocated(i) for i in range(2)] == before


@requires_default_topology
def test_out_of_memory():
    keep = torch.arange(1000, dtype=torch.float32, device="neuron")
    ooms = torch.neuron.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(25 * GiB, dtype=torch.uint8, device="neuron")
    message = str(info.value)
    assert "NeuronCore 0" in message and "out of memory" in message
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    assert torch.equal(keep.cpu(), torch.arange(1000, dtype=torch.float32))
    later = torch.ones(1000, device="neuron") + keep
    assert later.sum().item() == 1000 + sum(range(1000))


def test_set_per_process_memory_fraction():
    torch.neuron.empty_cache()
    reserved = torch.neuron.memory_reserved()
    total = torch.neuron.mem_get_info()[1]
    fraction = (reserved + 32 * MiB) / total
    torch.neuron.set_per_process_memory_fraction(fraction)
    try:
        small = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
        with pytest.raises(torch.OutOfMemoryError, match="NeuronCore 0"):
            torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
        del small
        # the limit also holds for the outputs of ops, not only for torch.empty
        a = torch.ones(20 * MiB, dtype=torch.uint8, device="neuron")
        with pytest.raises(torch.OutOfMemoryError, match="NeuronCore 0"):
            torch.cat([a, a])
        assert a.sum().item() == 20 * MiB
        del a
    finally:
        torch.neuron.set_per_process_memory_fraction(1.0)
    big = torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
    assert big.numel() == 64 * MiB
    with pytest.raises((ValueError, RuntimeError)):
        torch.neuron.set_per_process_memory_fraction(1.5)


def test_pinned_memory():
    plain = torch.randn(1000, 3)
    assert not plain.is_pinned()
    pinned = plain.pin_memory()
    assert pinned.is_pinned() and pinned.device.type == "cpu"
    assert torch.equal(pinned, plain)
    assert torch.empty(10, pin_memory=True).is_pinned()
    assert pinned[10:].is_pinned()  # a view into pinned memory
    dev = pinned.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(dev.cpu(), plain)
    assert not dev.cpu().is_pinned()


def test_dataloader_pin_memory():
    data = torch.arange(60, dtype=torch.float32).reshape(20, 3)
    labels = torch.arange(20)
    ds = torch.utils.data.TensorDataset(data, labels)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, pin_memory=True)
    seen = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        xd = x.to("neuron", non_blocking=True)
        seen.append(xd.cpu())
    assert torch.equal(torch.cat(seen), data)
