"""Kernels that reach their data through AWS's NkiTensor view methods (NKI 0.5 and later), written for these
tests: each moves the elements a view names into an output of the view's shape."""
import nki
import nki.isa as nisa
import nki.language as nl


def _out(shape, dtype):
    return nl.ndarray(tuple(shape), dtype=dtype, buffer=nl.shared_hbm)


def _sbuf(x):
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    return tile


def _dma_out(view):
    """A new HBM output holding the view's elements, copied by DMA (bit for bit)."""
    out = _out(view.shape, view.dtype)
    nisa.dma_copy(dst=out, src=view)
    return out


def _through_vector_engine(view):
    """The view's elements copied by tensor_copy into a fresh tile of its shape, then to HBM."""
    tile = nl.ndarray(view.shape, dtype=view.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=tile, src=view)
    out = _out(view.shape, view.dtype)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def hbm_view(x, how: str):
    """x seen through one chain of view methods, copied by DMA."""
    views = {
        "slice": lambda: x.slice(1, 4, 20, 3),
        "select": lambda: x.select(0, 2),
        "select_last": lambda: x.select(2, 1),
        "flatten": lambda: x.flatten_dims(1, 2),
        "expand_squeeze": lambda: x.expand_dim(3).squeeze_dim(0),
        "pattern_round_trip": lambda: x.ap(x.slice(1, 2, 7).get_pattern(), offset=x.slice(1, 2, 7).offset),
    }
    return _dma_out(views[how]())


@nki.jit
def sbuf_view(x, how: str):
    """x [8, 24] loaded into SBUF and seen through one chain of view methods, copied on the Vector engine."""
    tile = _sbuf(x)
    views = {
        "split_permute": lambda: tile.reshape_dim(1, (4, -1)).permute((0, 2, 1)),
        "rearrange": lambda: tile.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}),
        "merge_back": lambda: tile.reshape_dim(1, (2, 3, 4)).flatten_dims(1, 2),
        "broadcast": lambda: tile.slice(1, 5, 6).expand_dim(1).broadcast(1, 3).squeeze_dim(2),
        "select_partition": lambda: tile.select(0, 3),
        "strided": lambda: tile.slice(0, 1, 8, 2).slice(1, 0, 24, 5),
    }
    return _through_vector_engine(views[how]())


@nki.jit
def bits_as(x, dtype_name: str):
    """x's bytes in SBUF read as another dtype (view / reinterpret_cast), moved out by DMA (as bits: a compute
    engine would read some of them as NaNs)."""
    tile = _sbuf(x)
    return _dma_out(tile.view(getattr(nl, dtype_name)) if dtype_name != "int32" else tile.reinterpret_cast(nl.int32))


@nki.jit
def row_picked_on_the_device(x, index):
    """x.select(0, index[0, 0]): a row chosen by a value known only as the kernel runs."""
    index_tile = _sbuf(index)
    return _dma_out(x.select(0, index_tile))


@nki.jit
def rows_reversed_by_a_device_loop(x):
    """out[r] = x[R - 1 - r]: each row selected by arithmetic on a device loop's index."""
    R, F = x.shape
    out = _out((R, F), x.dtype)

    def body(i):
        nisa.dma_copy(dst=out.select(0, R - 1 - i), src=x.select(0, i))

    nl.fori_loop(0, R, body)
    return out


@nki.jit
def rows_gathered(x, indices):
    """out[p] = x[indices[p, 0]] through vector_select (an indirect DMA)."""
    index_tile = _sbuf(indices)
    out = nl.ndarray((indices.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=x.vector_select(0, index_tile))
    return _dma_out(out)


@nki.jit
def misuse(x, how: str):
    """One misuse of the view methods per `how`, each refused while tracing."""
    tile = _sbuf(x)
    bad = {
        "permute_partitions": lambda: tile.reshape_dim(1, (4, 6)).permute((1, 0, 2)),
        "flatten_permuted": lambda: tile.reshape_dim(1, (4, 6)).permute((0, 2, 1)).flatten_dims(1, 2),
        "slice_backwards": lambda: tile.slice(1, 9, 3),
        "squeeze_wide": lambda: tile.squeeze_dim(1),
        "broadcast_wide": lambda: tile.broadcast(1, 4),
        "split_partitions": lambda: tile.reshape_dim(0, (2, 4)),
        "view_uneven": lambda: tile.view(nl.uint8).slice(1, 0, 6).view(nl.int32),
        "bad_split": lambda: tile.reshape_dim(1, (5, -1)),
    }
    bad[how]()
    out = _out(x.shape, x.dtype)
    nisa.dma_copy(dst=out, src=tile)
    return out
