"""Kernels for the two physical cores of a logical NeuronCore (nki.lnc: sendrecv, sendrecv_compute,
core_barrier), launched as two instances, one per core, written for these tests."""
import nki
import nki.isa as nisa
import nki.language as nl
import nki.lnc


def _own_half(x):
    """This core's [P, F] half of x [2, P, F], in SBUF."""
    rank = nl.program_id(0)
    _, P, F = x.shape
    tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x[rank])
    return rank, tile


@nki.jit
def halves_exchanged(x):
    """out[r] = x[1 - r]: each core sends its half and receives the other's."""
    rank, mine = _own_half(x)
    _, P, F = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    theirs = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nki.lnc.sendrecv(src=mine, dst=theirs, send_to_rank=1 - rank, recv_from_rank=1 - rank)
    nisa.dma_copy(dst=out[rank], src=theirs)
    return out


@nki.jit
def halves_exchanged_in_place(x, deprecated_name: bool = False):
    """out[r] = x[1 - r], the received half written over the sent one (dst is src); through nki.isa's
    deprecated name when asked."""
    rank, mine = _own_half(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    exchange = nisa.sendrecv if deprecated_name else nki.lnc.sendrecv
    kwargs = {"pipe_id": 0} if deprecated_name else {}
    exchange(mine, mine, 1 - rank, 1 - rank, **kwargs)
    nisa.dma_copy(dst=out[rank], src=mine)
    return out


@nki.jit
def halves_reduced(x, op_name: str):
    """out[r] = op(x[r], x[1 - r]) on both cores (sendrecv_compute)."""
    rank, mine = _own_half(x)
    _, P, F = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    reduced = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nki.lnc.sendrecv_compute(mine, reduced, 1 - rank, 1 - rank, reduce_op=getattr(nl, op_name))
    nisa.dma_copy(dst=out[rank], src=reduced)
    return out


@nki.jit
def doubled_then_read_across_a_barrier(x):
    """Each core writes 2 x[r] into a shared buffer, waits at a barrier, then reads the other core's part:
    out[r] = 2 x[1 - r] + 1. Before each core's write, a device loop of two iterations and, after the
    barrier, an nl.if_else: their jumps must follow the reordered program."""
    rank, mine = _own_half(x)
    _, P, F = x.shape
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.fori_loop(0, 2, lambda i: nisa.tensor_scalar(mine, mine, op0=nl.multiply, operand0=1.0))
    nisa.tensor_scalar(mine, mine, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=shared[rank], src=mine)
    nki.lnc.core_barrier(shared, (0, 1))
    theirs = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=theirs, src=shared[1 - rank])
    one = nisa.register_alloc(1)
    nl.if_else(one, lambda: nisa.tensor_scalar(theirs, theirs, op0=nl.add, operand0=1.0))
    nisa.dma_copy(dst=out[rank], src=theirs)
    return out, shared


@nki.jit
def misuse(x, how: str):
    """One misuse of the cores' collectives per `how`."""
    rank, mine = _own_half(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if how == "only_rank_0" and rank == 0:
        nki.lnc.sendrecv(mine, mine, 1, 1)
    elif how == "to_itself":
        nki.lnc.sendrecv(mine, mine, rank, rank)
    elif how == "shared_src":
        nki.lnc.sendrecv(out[rank], mine, 1 - rank, 1 - rank)
    elif how == "multiply":
        nki.lnc.sendrecv_compute(mine, mine, 1 - rank, 1 - rank, reduce_op=nl.multiply)
    elif how == "in_a_device_loop":
        nl.fori_loop(0, 2, lambda i: nki.lnc.sendrecv(mine, mine, 1 - rank, 1 - rank))
    elif how == "barrier_on_sbuf":
        nki.lnc.core_barrier(mine, (0, 1))
    nisa.dma_copy(dst=out[rank], src=mine)
    return out
