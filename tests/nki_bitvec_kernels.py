"""Kernels with the ALU's bitvec operators (nl.bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift,
invert, logical_not) on integer tiles, written for these tests."""
import nki
import nki.isa as nisa
import nki.language as nl


BITVEC = {"and": nl.bitwise_and, "or": nl.bitwise_or, "xor": nl.bitwise_xor, "shl": nl.left_shift,
          "shr": nl.right_shift}


@nki.jit
def bitwise(x, y, shift):
    """x & y, x | y, x ^ y (tiles), x << shift, x >> shift (immediates), ~x and logical_not(y & 1)."""
    a, b = nl.load(x), nl.load(y)
    results = [BITVEC[name](a, b) for name in ("and", "or", "xor")]
    results += [nl.left_shift(a, shift), nl.right_shift(a, shift), nl.invert(a), nl.logical_not(nl.bitwise_and(b, 1))]
    outs = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm) for _ in results]
    for out, value in zip(outs, results):
        nl.store(out, value=value)
    return tuple(outs)


@nki.jit
def bitwise_misuse(x, what):
    a = nl.load(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    if what == "float":
        nisa.tensor_tensor(out, a, a, op=nl.bitwise_and)
    elif what == "mixed":
        nisa.tensor_scalar(out, a, nl.bitwise_and, 3, op1=nl.add, operand1=1)
    result = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(result, value=out)
    return result
