"""Views alias device storage: writing through a view changes the base, and metadata matches the CPU."""
import pytest
import torch


def _base(shape=(4, 6), dtype=torch.float32):
    cpu = torch.arange(torch.Size(shape).numel(), dtype=dtype).reshape(shape)
    return cpu, cpu.clone().to("neuron")


# name -> function producing a view of a (4, 6) tensor (the same on both devices)
VIEWS = {
    "view": lambda t: t.view(2, 12),
    "view_flat": lambda t: t.view(-1),
    "reshape": lambda t: t.reshape(3, 8),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "permute": lambda t: t.view(2, 2, 6).permute(2, 0, 1),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "slice": lambda t: t[1:3, ::2],
    "slice_step": lambda t: t[::3, 1::2],
    "select": lambda t: t.select(0, 2),
    "index_int": lambda t: t[3],
    "unfold": lambda t: t.unfold(1, 3, 2),
    "as_strided": lambda t: t.as_strided((3, 3), (5, 1), 2),
    "diagonal": lambda t: t.diagonal(offset=1),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "squeeze": lambda t: t[1:2].squeeze(0),
    "expand": lambda t: t[:, :1].expand(4, 5),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 3)),
    "movedim": lambda t: t.movedim(0, 1),
    "split": lambda t: t.split(2, dim=1)[1],
    "chunk": lambda t: t.chunk(2, dim=0)[1],
    "unbind": lambda t: t.unbind(1)[4],
    "view_as": lambda t: t.view_as(torch.empty(24, 1)),
    "detach": lambda t: t.detach(),
    "T_alias": lambda t: t.mT,
}


@pytest.mark.parametrize("name", list(VIEWS), ids=list(VIEWS))
def test_view_metadata_and_aliasing(name):
    make = VIEWS[name]
    cpu, dev = _base()
    vc, vd = make(cpu), make(dev)
    assert vd.device == dev.device
    assert vd._base is (None if name == "detach" else dev)
    assert vd.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr(), "view does not alias device memory"
    assert vd.shape == vc.shape
    assert vd.stride() == vc.stride()
    assert vd.storage_offset() == vc.storage_offset()
    torch.testing.assert_close(vd.cpu(), vc, rtol=0, atol=0)
    # write through the view (expand is not writable elementwise; use its source)
    if name == "expand":
        return
    vc.mul_(-1).add_(0.5)
    vd.mul_(-1).add_(0.5)
    torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0)
    assert not torch.equal(dev.cpu(), torch.arange(24.0).reshape(4, 6)), "the base did not change"


def test_view_write_via_setitem_and_copy():
    cpu, dev = _base()
    v = dev[1:3, 2:5]
    v[0, 0] = 100.0
    v[1] = torch.tensor([7.0, 8.0, 9.0])
    assert dev[1, 2].item() == 100.0
    assert dev[2, 2:5].tolist() == [7.0, 8.0, 9.0]
    dev.t()[5].fill_(-1)  # column 5
    assert dev[:, 5].tolist() == [-1.0] * 4
    dev.diagonal().copy_(torch.tensor([10.0, 11.0, 12.0, 13.0]))
    assert [dev[i, i].item() for i in range(4)] == [10.0, 11.0, 12.0, 13.0]
    dev.narrow(0, 3, 1).zero_()
    assert dev[3].tolist() == [0.0] * 6


def test_base_write_is_visible_in_view():
    _, dev = _base()
    v = dev.view(24)[5:10]
    t = dev.t()
    dev.add_(1000)
    assert v.tolist() == [1005.0, 1006.0, 1007.0, 1008.0, 1009.0]
    assert t[0].tolist() == [1000.0, 1006.0, 1012.0, 1018.0]


def test_view_as_real_and_complex():
    cpu = torch.randn(3, 4, dtype=torch.complex64)
    dev = cpu.to("neuron")
    rc, rd = torch.view_as_real(cpu), torch.view_as_real(dev)
    assert rd.dtype == torch.float32 and rd.shape == (3, 4, 2) and rd.stride() == rc.stride()
    assert rd.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    rd[..., 1] = 0.0  # zero the imaginary parts through the real view
    assert torch.equal(dev.imag.cpu(), torch.zeros(3, 4))
    assert torch.equal(dev.real.cpu(), cpu.real)
    floats = torch.randn(5, 2).to("neuron")
    c = torch.view_as_complex(floats)
    assert c.dtype == torch.complex64 and c.shape == (5,)
    assert c.untyped_storage().data_ptr() == floats.untyped_storage().data_ptr()
    floats[:, 0] = 2.0
    assert torch.equal(c.real.cpu(), torch.full((5,), 2.0))


def test_view_then_in_place_op_then_compute():
    cpu, dev = _base((3, 8))
    for t in (cpu, dev):
        v = t.view(6, 4)[::2]
        v.sqrt_()
        t.unfold(1, 4, 4)[:, 1].mul_(2)
    torch.testing.assert_close(dev.cpu(), cpu)
    torch.testing.assert_close((dev.t() @ dev).cpu(), cpu.t() @ cpu)


def test_dtype_view():
    cpu = torch.tensor([1.0, -2.0, 0.5])
    dev = cpu.to("neuron")
    ic, idv = cpu.view(torch.int32), dev.view(torch.int32)
    assert idv.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert idv.cpu().tolist() == ic.tolist()
    idv[0] = 0
    assert dev[0].item() == 0.0


def test_storage_offset_and_strides_match_cpu():
    cpu = torch.randn(5, 6, 7)
    dev = cpu.to("neuron")
    for f in (lambda t: t[2:, 1:5:2, 3], lambda t: t.permute(2, 0, 1)[1:, :, 2:],
              lambda t: t.transpose(1, 2).unsqueeze(0)[:, 1], lambda t: t.view(30, 7)[7:20:3],
              lambda t: t[..., None, 4].expand(5, 6, 3), lambda t: t.unfold(2, 2, 3)):
        vc, vd = f(cpu), f(dev)
        assert (vd.shape, vd.stride(), vd.storage_offset(), vd.is_contiguous()) == \
               (vc.shape, vc.stride(), vc.storage_offset(), vc.is_contiguous())
        torch.testing.assert_close(vd.cpu(), vc, rtol=0, atol=0)
        # clone() gives a fresh, non-aliased tensor on the device
        cl = vd.clone()
        assert cl.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
        torch.testing.assert_close(cl.cpu(), vc, rtol=0, atol=0)


def test_reshape_copies_only_when_needed():
    dev = torch.arange(12.0).reshape(3, 4).to("neuron")
    r = dev.reshape(4, 3)  # contiguous: a view
    assert r.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    rt = dev.t().reshape(12)  # non-viewable: a copy
    assert rt.untyped_storage().data_ptr() != dev.untyped_storage().data_ptr()
    assert rt.tolist() == torch.arange(12.0).reshape(3, 4).t().reshape(12).tolist()
