"""The NKI kernels: rows of a [rows, features] tensor in 128-partition tiles,
the last tile as many rows as are left."""
import nki
import nki.isa as nisa
import nki.language as nl

P = 128


@nki.jit
def rmsnorm(x, weight, eps):
    """x * rsqrt(mean(x^2) + eps) * weight, in fp32, rounded once to x's dtype. Two passes over each tile
    on the engines: the squares with their sum (activation's reduction), then x * scale * weight in one
    scalar_tensor_tensor."""
    rows, hidden = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.load(weight.reshape((1, hidden)).broadcast_to((P, hidden)), dtype=nl.float32)
    for t in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - t * P)
        tile = nl.load(x[t * P:t * P + n, :], dtype=nl.float32)
        squares = nl.ndarray((n, hidden), dtype=nl.float32)
        total = nl.ndarray((n, 1), dtype=nl.float32)
        nisa.activation(dst=squares, op=nl.square, data=tile, reduce_op=nl.add, reduce_res=total)
        shifted = nl.ndarray((n, 1), dtype=nl.float32)
        nisa.tensor_scalar(shifted, total, op0=nl.multiply, operand0=1.0 / hidden, op1=nl.add, operand1=eps)
        scale = nl.rsqrt(shifted)
        normed = nl.ndarray((n, hidden), dtype=x.dtype)
        nisa.scalar_tensor_tensor(dst=normed, data=tile, op0=nl.multiply, operand0=scale, op1=nl.multiply,
                                  operand1=w[0:n, :])
        nl.store(out[t * P:t * P + n, :], value=normed)
    return out


@nki.jit
def silu_and_mul(gate, up):
    rows, features = gate.shape
    out = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - t * P)
        g = nl.load(gate[t * P:t * P + n, :], dtype=nl.float32)
        u = nl.load(up[t * P:t * P + n, :], dtype=nl.float32)
        nl.store(out[t * P:t * P + n, :], value=nl.multiply(nl.silu(g), u, dtype=gate.dtype))
    return out


@nki.jit
def rotary(x, cos, sin):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] for the halves x1, x2."""
    rows, dim = x.shape
    half = dim // 2
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - t * P)
        r = slice(t * P, t * P + n)
        v = nl.load(x[r, :], dtype=nl.float32)
        c = nl.load(cos[r, :], dtype=nl.float32)
        s = nl.load(sin[r, :], dtype=nl.float32)
        low = nl.subtract(nl.multiply(v[:, 0:half], c[:, 0:half]), nl.multiply(v[:, half:dim], s[:, 0:half]))
        high = nl.add(nl.multiply(v[:, half:dim], c[:, half:dim]), nl.multiply(v[:, 0:half], s[:, half:dim]))
        nl.store(out[r, 0:half], value=nl.copy(low, dtype=x.dtype))
        nl.store(out[r, half:dim], value=nl.copy(high, dtype=x.dtype))
    return out
