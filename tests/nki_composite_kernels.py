"""Kernels with nki.language's composite functions (var, all, softmax, rms_norm, expand_dims, no_reorder,
the buffer predicates), written for these tests."""
import nki
import nki.isa as nisa
import nki.language as nl


def _out(tile):
    result = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
    nl.store(result, value=tile)
    return result


@nki.jit
def reductions(x, axis, dtype):
    """nl.var and nl.all of x along axis, and nl.softmax along its trailing axes."""
    a = nl.load(x)
    return (_out(nl.var(a, axis=axis, dtype=dtype)), _out(nl.all(a, axis=axis)),
            _out(nl.softmax(a, axis=axis, dtype=dtype)))


@nki.jit
def rms_norm(x, w, n, epsilon, dtype):
    return _out(nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=n, epsilon=epsilon, dtype=dtype))


@nki.jit
def expanded(x, axis):
    """x with a new axis at `axis`, summed over its trailing axes: the new axis must not change the sums."""
    a = nl.load(x)
    wide = nl.expand_dims(a, axis)
    return _out(nl.sum(wide, axis=tuple(range(1, wide.ndim)), keepdims=False)), _out(nl.copy(wide))


@nki.jit
def ordered(x, use_device_loop):
    """Work inside nl.no_reorder(); a device loop inside it when asked."""
    with nl.no_reorder():
        a = nl.load(x)
        b = nl.add(a, 3.0)
        c = nl.multiply(b, 2.0)
        if use_device_loop:
            nl.fori_loop(0, 2, lambda i: None)
    return _out(c)


@nki.jit
def facts(x):
    """The buffer predicates on tensors and buffer constants, and the target's sub-version, as a tile of 0/1."""
    a = nl.load(x)
    answers = [nl.is_hbm(x), nl.is_sbuf(x), nl.is_on_chip(a), nl.is_sbuf(a), nl.is_psum(a), nl.is_psum(nl.psum),
               nl.is_hbm(nl.shared_hbm), nl.is_on_chip(nl.hbm), nisa.get_nc_sub_version() == 0]
    out = nl.ndarray((1, len(answers)), dtype=nl.float32, buffer=nl.sbuf)
    for i, answer in enumerate(answers):
        nisa.memset(out[0:1, i:i + 1], 1.0 if answer else 0.0)
    return _out(out)


@nki.jit
def gathered(data, indices, dtype):
    """nl.gather_flattened of data's partitions (free axes flattened) at the indices."""
    return _out(nl.gather_flattened(nl.load(data), nl.load(indices), dtype=dtype))
