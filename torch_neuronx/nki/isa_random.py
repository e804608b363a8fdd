"""The random number instructions of nki.isa (current API, destination first): the Vector and GpSimd
engines' generators, seeded, read and written per compute lane (nki_runtime/Random.h).

A run of a kernel starts the generators from the device's torch generator (the CPU's for NumPy inputs), so
`torch.manual_seed` makes a kernel's random numbers repeat; rand_set_state and set_rng_seed set them
from the kernel. The numbers follow the documented distributions, not Trainium's bit streams (which AWS
does not publish)."""
from __future__ import annotations

from .language import _emit, _operand
from .trace import FLOATS, View, current

_INTEGERS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
_WORDS_PER_GENERATOR = 6
_GENERATORS_PER_LANE = {"vector": 4, "gpsimd": 1}


def _random_engine(engine, instruction: str, allowed=("vector", "gpsimd")) -> str:
    chosen = "vector" if engine in (None, "unknown") else engine
    if chosen not in allowed:
        raise current().error(f"{instruction} runs on the {' or '.join(allowed)} engine, not {chosen}")
    if chosen == "gpsimd" and current().version < 3:
        raise current().error(f"{instruction} on the GpSimd engine needs NeuronCore-v3 or newer")
    return chosen


def _on_chip(view: View, role: str, instruction: str, engine: str) -> None:
    if view.ndim < 2:
        raise current().error(f"{instruction}: {role} {view!r} must be a [partitions, free...] tile")
    allowed = ("sbuf",) if engine == "gpsimd" else ("sbuf", "psum")
    if view.buffer not in allowed:
        raise current().error(f"{instruction}: {role} {view!r} must be in {' or '.join(allowed).upper()} "
                              f"(the {engine} engine's memories)")


def rng(dst: View, engine=None, mask=None, **_) -> None:
    """32 random bits per element of dst, truncated to its integer dtype (the low bits)."""
    chosen = _random_engine(engine, "rng")
    if dst.dtype not in _INTEGERS:
        raise current().error(f"rng writes an integer tile ({', '.join(_INTEGERS)}), not {dst.dtype}")
    _on_chip(dst, "dst", "rng", chosen)
    _emit("rng", chosen, dst, (), mask)


def rand2(dst: View, min, max, mask=None, **_) -> None:  # noqa: A002 (AWS's parameter names)
    """Uniform random numbers in [min, max] (scalars or [partitions, 1] tiles) on the Vector engine."""
    if current().version < 4:
        raise current().error("rand2 needs NeuronCore-v4 (trn3) or newer; on NeuronCore-v3 use rng and scale")
    if not isinstance(min, View) and not isinstance(max, View) and not float(min) < float(max):
        raise current().error(f"rand2 needs min < max, got [{min}, {max}]")
    _uniform(dst, min, max, mask)


def _uniform(dst: View, low, high, mask) -> None:
    _on_chip(dst, "dst", "rand2", "vector")
    inputs = []
    operand0 = _operand(low, inputs, dst, "rand2's min")
    operand1 = _operand(high, inputs, dst, "rand2's max")
    _emit("rand2", "vector", dst, inputs, mask, operand0=operand0, operand1=operand1)


def dropout(dst: View, data: View, prob, mask=None, **_) -> None:
    """dst = data with each element replaced by 0 with probability prob (a scalar or a [partitions, 1]
    tile), on the Vector engine; the kept elements are not rescaled."""
    if tuple(dst.shape) != tuple(data.shape):
        raise current().error(f"dropout: dst {dst!r} and data {data!r} differ in shape")
    integer = data.dtype in _INTEGERS
    if isinstance(prob, View):
        if integer and prob.dtype != "float32":
            raise current().error(f"dropout of an integer tile takes a float32 probability, not {prob.dtype}")
        if not integer and prob.dtype not in FLOATS:
            raise current().error(f"dropout's probability is a float tile, not {prob.dtype}")
    elif not 0.0 <= float(prob) <= 1.0:
        raise current().error(f"dropout's probability {prob} is outside [0, 1]")
    if integer and dst.dtype != data.dtype:
        raise current().error(f"dropout of {data.dtype} data writes {data.dtype}, not {dst.dtype}")
    for view, role in ((dst, "dst"), (data, "data")):
        _on_chip(view, role, "dropout", "vector")
    inputs = [data]
    operand0 = _operand(prob, inputs, data, "dropout's probability")
    _emit("dropout", "vector", dst, inputs, mask, operand0=operand0)


def _state_tile(tile: View, instruction: str, engine: str) -> None:
    words = _GENERATORS_PER_LANE[engine] * _WORDS_PER_GENERATOR
    if tile.dtype != "uint32":
        raise current().error(f"{instruction}: the state tile is uint32, not {tile.dtype}")
    if tile.ndim != 2 or tile.shape[1] != words:
        raise current().error(f"{instruction}: the {engine} engine's state is [partitions, {words}] uint32 "
                              f"({_GENERATORS_PER_LANE[engine]} XORWOW generators of {_WORDS_PER_GENERATOR} "
                              f"words per lane), not {list(tile.shape)}")
    _on_chip(tile, "the state tile", instruction, engine)


def _state_engine(engine, instruction: str) -> str:
    # NeuronCore-v3 keeps the states on GpSimd only; v4 on Vector too.
    allowed = ("vector", "gpsimd") if current().version >= 4 else ("gpsimd",)
    default = "gpsimd" if engine in (None, "unknown") else engine
    return _random_engine(default, instruction, allowed)


def rand_set_state(src_seeds: View, engine=None, **_) -> None:
    """Load each lane's generator states from its partition of src_seeds ([partitions, 6] uint32 on
    GpSimd, [partitions, 24] on Vector)."""
    chosen = _state_engine(engine, "rand_set_state")
    _state_tile(src_seeds, "rand_set_state", chosen)
    _emit("rand_set_state", chosen, src_seeds, (src_seeds,), None)


def rand_get_state(dst: View, engine=None, **_) -> None:
    """Store each lane's generator states into its partition of dst (the layout rand_set_state reads)."""
    chosen = _state_engine(engine, "rand_get_state")
    _state_tile(dst, "rand_get_state", chosen)
    _emit("rand_get_state", chosen, dst, (), None)


def set_rng_seed(src_seeds: View, **_) -> None:
    """Seed every generator of the Vector engine from the one 32-bit value of a [1, 1] tile."""
    if not isinstance(src_seeds, View) or tuple(src_seeds.shape) != (1, 1) or \
            src_seeds.dtype not in ("int32", "uint32"):
        raise current().error(f"set_rng_seed takes a [1, 1] int32 or uint32 tile, not {src_seeds!r}")
    _on_chip(src_seeds, "the seed", "set_rng_seed", "vector")
    _emit("set_rng_seed", "vector", src_seeds, (src_seeds,), None)


def seed_immediate(seed: int, scratch: View) -> None:
    """Seed the Vector engine from a number in the program (the beta API's nl.random_seed(42)); `scratch`
    is a [1, 1] tile the instruction names and leaves unwritten. The seed travels as two exact halves."""
    value = int(seed) & 0xFFFFFFFF
    _emit("set_rng_seed", "vector", scratch, (), None, coefficients=[value >> 16, value & 0xFFFF])
