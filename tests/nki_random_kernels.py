"""NKI kernels that use the engines' random number generators (nisa.rng, rand2, dropout, the state
instructions, nl.rand and nl.random_seed) and nl.device_print, for test_nki_random.py."""
import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as beta
import neuronxcc.nki.isa as bisa
import neuronxcc.nki.language as bnl


def _random_bits(shape, dtype, engine):
    out = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
    bits = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    nisa.rng(bits, engine=engine)
    nisa.dma_copy(dst=out, src=bits)
    return out


@nki.jit
def random_bits_uint32(x):
    return _random_bits(x.shape, nl.uint32, nisa.engine.vector)


@nki.jit
def random_bits_uint8_gpsimd(x):
    return _random_bits(x.shape, nl.uint8, nisa.engine.gpsimd)


@nki.jit
def random_bits_uint16_3d(x):
    """A [partitions, 4, 256] tile: each partition's 1,024 elements from its lane's generators in turn."""
    out = nl.ndarray(x.shape, dtype=nl.uint16, buffer=nl.shared_hbm)
    bits = nl.ndarray(x.shape, dtype=nl.uint16, buffer=nl.sbuf)
    nisa.rng(bits)
    nisa.dma_copy(dst=out, src=bits)
    return out


@nki.jit(platform_target="trn3")
def uniform_between(x, low, high):
    """rand2 between two numbers given as per-partition tiles when low is an HBM tensor, else scalars."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    values = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    lows = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    highs = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=lows, src=low)
    nisa.dma_copy(dst=highs, src=high)
    nisa.rand2(values, lows, highs)
    nisa.dma_copy(dst=out, src=values)
    return out


@nki.jit(platform_target="trn3")
def uniform_scalars(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    values = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.rand2(values, -2.0, 3.0)
    nisa.dma_copy(dst=out, src=values)
    return out


@nki.jit
def rand2_on_trn2(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    values = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.rand2(values, 0.0, 1.0)
    nisa.dma_copy(dst=out, src=values)
    return out


@nki.jit
def dropout_scalar(x, rate):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    data = nl.load(x)
    kept = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dropout(kept, data, rate)
    nl.store(out, kept)
    return out


@nki.jit
def dropout_per_partition(x, rates):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    data = nl.load(x)
    probabilities = nl.load(rates)
    nl.store(out, nl.dropout(data, probabilities))
    return out


@nki.jit
def dropout_integer_with_bf16_rate(x, rates):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    data = nl.load(x)
    probabilities = nl.load(rates)
    kept = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dropout(kept, data, probabilities)
    nl.store(out, kept)
    return out


@nki.jit
def gpsimd_state_round_trip(seeds):
    """(bits after loading `seeds`, the state read back right after loading, bits after loading again)."""
    first = nl.ndarray((seeds.shape[0], 64), dtype=nl.uint32, buffer=nl.shared_hbm)
    again = nl.ndarray((seeds.shape[0], 64), dtype=nl.uint32, buffer=nl.shared_hbm)
    state_out = nl.ndarray(seeds.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    state = nl.ndarray(seeds.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=state, src=seeds)
    read = nl.ndarray(seeds.shape, dtype=nl.uint32, buffer=nl.sbuf)
    bits = nl.ndarray((seeds.shape[0], 64), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_set_state(state, engine=nisa.engine.gpsimd)
    nisa.rand_get_state(read, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=state_out, src=read)
    nisa.rng(bits, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=first, src=bits)
    nisa.rand_set_state(state, engine=nisa.engine.gpsimd)
    bits2 = nl.ndarray((seeds.shape[0], 64), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(bits2, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=again, src=bits2)
    return first, state_out, again


@nki.jit(platform_target="trn3")
def vector_state_saved_and_restored(x):
    """Bits, then the same bits again after restoring the state saved before them (NeuronCore-v4: the
    Vector engine's 24-word states)."""
    first = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    again = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
    saved = nl.ndarray((x.shape[0], 24), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(saved, engine=nisa.engine.vector)
    bits = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(bits, engine=nisa.engine.vector)
    nisa.dma_copy(dst=first, src=bits)
    nisa.rand_set_state(saved, engine=nisa.engine.vector)
    bits2 = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(bits2, engine=nisa.engine.vector)
    nisa.dma_copy(dst=again, src=bits2)
    return first, again


@nki.jit
def vector_state_on_trn2(x):
    out = nl.ndarray((x.shape[0], 24), dtype=nl.uint32, buffer=nl.shared_hbm)
    saved = nl.ndarray((x.shape[0], 24), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(saved, engine=nisa.engine.vector)
    nisa.dma_copy(dst=out, src=saved)
    return out


@nki.jit
def state_of_wrong_width(x):
    out = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    saved = nl.ndarray((x.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(saved, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=out, src=saved)
    return out


@nki.jit
def seeded_twice(seed):
    """nl.random_seed with a [1, 1] tile, nl.rand, the same seed again, nl.rand: (a, b), equal."""
    a_out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    b_out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=seed)
    nl.random_seed(tile)
    nl.store(a_out, nl.rand((128, 256), dtype=nl.float32))
    nisa.set_rng_seed(tile)
    nl.store(b_out, nl.rand((128, 256), dtype=nl.float32))
    return a_out, b_out


@beta.jit
def beta_seeded_dropout(x):
    """The beta API: nl.random_seed(number), then isa.dropout returning its tile."""
    out = bnl.ndarray(x.shape, dtype=x.dtype, buffer=bnl.shared_hbm)
    bnl.random_seed(1234567891)
    data = bnl.load(x)
    bnl.store(out, bisa.dropout(data, 0.5))
    return out


@nki.jit
def rng_into_float(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    bits = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.rng(bits)
    nisa.dma_copy(dst=out, src=bits)
    return out


@nki.jit
def print_tiles(x):
    """nl.device_print of each 128-row tile in a loop (SBUF, bf16 copy) and of the HBM input."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.device_print("input:", x)
    for t in nl.affine_range(x.shape[0] // 128):
        tile = nl.load(x[t * 128:(t + 1) * 128, :])
        nl.device_print("tile:", tile)
        nl.device_print("bf16:", nl.copy(tile, dtype=nl.bfloat16))
        nl.store(out[t * 128:(t + 1) * 128, :], tile)
    return out
