"""Kernels written for these tests with nisa.activate2 (NeuronCore-v4): the tensor-scalar stage, the activation
and the register reduction in the forms AWS's documentation and attention kernels use them."""
import nki
import nki.isa as nisa
import nki.language as nl

OPS = {"add": nl.add, "subtract": nl.subtract, "multiply": nl.multiply, "bypass": nl.bypass,
       "maximum": nl.maximum, "minimum": nl.minimum, "abs_max": nl.abs_max, "abs_min": nl.abs_min,
       "copy": nl.copy, "exp": nl.exp, "tanh": nl.tanh, "prelu": nl.prelu, "sigmoid": nl.sigmoid}


def _immediate(value, rows):
    """A float stays an immediate; a list becomes a [rows, 1] fp32 SBUF tile (one value per partition)."""
    if not isinstance(value, (list, tuple)):
        return value
    tile = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    for p, v in enumerate(value):
        nisa.memset(tile[p:p + 1, :], v)
    return tile


@nki.jit(platform_target="trn3")
def activate2(x, op, op0, imm0, op1, imm1, reverse0=False, reverse1=False, relu_param=0.0, out_dtype=None,
              engine=None):
    """out = op((x op0 imm0) op1 imm1), each immediate a float or a list of one value per partition."""
    rows = x.shape[0]
    out = nl.ndarray(x.shape, dtype=out_dtype or x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    result = nl.ndarray(x.shape, dtype=out_dtype or x.dtype, buffer=nl.sbuf)
    nisa.activate2(result, OPS[op], tile, imm0=_immediate(imm0, rows), imm1=_immediate(imm1, rows),
                   op0=OPS[op0], op1=OPS[op1], relu_param=_immediate(relu_param, rows), reverse0=reverse0,
                   reverse1=reverse1, engine=engine)
    nl.store(out, value=result)
    return out


@nki.jit(platform_target="trn3")
def scaled_row_reduction(x, scale, reduce_op, parts):
    """The attention-score pattern: copy(x * scale) written out, and reduce_op over each row's `parts` column
    blocks chained through the registers (reset_reduce on the first block, reduce after, reduce_res on the
    last)."""
    rows, cols = x.shape
    width = cols // parts
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    reduced = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    total = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(parts):
        block = nl.load(x[:, j * width:(j + 1) * width])
        scaled = nl.ndarray((rows, width), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activate2(scaled, nl.copy, block, imm0=scale, imm1=0.0, op0=nl.multiply, op1=nl.add,
                       reduce_op=OPS[reduce_op],
                       reduce_cmd=nisa.reduce_cmd.reset_reduce if j == 0 else nisa.reduce_cmd.reduce,
                       reduce_res=total if j == parts - 1 else None)
        nl.store(out[:, j * width:(j + 1) * width], value=scaled)
    nl.store(reduced, value=total)
    return out, reduced


@nki.jit(platform_target="trn3")
def reset_then_reduce(x, reduce_op):
    """reduce_cmd.reset (the registers to reduce_op's identity), then reduce, then idle with reduce_res (which
    reads the registers)."""
    rows = x.shape[0]
    reduced = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    scratch = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    kw = dict(imm0=0.0, imm1=0.0, op0=nl.bypass, op1=nl.bypass, reduce_op=OPS[reduce_op])
    nisa.activate2(scratch, nl.copy, tile, reduce_cmd=nisa.reduce_cmd.reset, **kw)
    nisa.activate2(scratch, nl.copy, tile, reduce_cmd=nisa.reduce_cmd.reduce, **kw)
    nisa.activate2(scratch, nl.copy, tile, reduce_cmd=nisa.reduce_cmd.idle, reduce_res=total, **kw)
    nl.store(reduced, value=total)
    return reduced


@nki.jit(platform_target="trn3")
def activate2_misuse(x, what):
    """activate2 called against one of its rules, named by `what`."""
    tile = nl.load(x)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    kw = dict(imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.add)
    if what == "pair":
        kw.update(op0=nl.add, op1=nl.add)
    elif what == "reverse":
        kw.update(op1=nl.bypass, reverse1=True)
    elif what == "reduce_op":
        kw.update(reduce_op=nl.multiply, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    elif what == "gpsimd_reduce":
        kw.update(engine=nisa.engine.gpsimd, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    elif what == "vector":
        kw.update(engine=nisa.engine.vector)
    elif what == "hbm":
        tile = x
    elif what == "imm_dtypes":
        first = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        second = nl.ndarray((x.shape[0], 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(first, 1.0)
        nisa.memset(second, 0.0)
        kw.update(imm0=first, imm1=second)
    elif what == "call_bypass":
        nl.bypass(tile, 1.0)
    nisa.activate2(dst, nl.exp, tile, **kw)
    return dst


@nki.jit(platform_target="trn2")
def activate2_on_trn2(x):
    tile = nl.load(x)
    nisa.activate2(tile, nl.exp, tile, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.add)
    return tile


@nki.jit(platform_target="trn3")
def magnitude_pick(x, y, which):
    """nl.abs_max(x, y) or nl.abs_min(x, y) of two tiles, element-wise."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=OPS[which](nl.load(x), nl.load(y)))
    return out


@nki.jit(platform_target="trn3")
def activate2_gathered(data, offsets, n, scale):
    """exp(data[:, columns] * scale) with the columns an index tile picks (tensor indirection of data)."""
    out = nl.ndarray((data.shape[0], n), dtype=data.dtype, buffer=nl.shared_hbm)
    tile, index = nl.load(data), nl.load(offsets)
    result = nl.ndarray((data.shape[0], n), dtype=data.dtype, buffer=nl.sbuf)
    nisa.activate2(result, nl.exp, tile.indirect(index, num_elem=n), imm0=scale, imm1=0.0, op0=nl.multiply,
                   op1=nl.bypass)
    nl.store(out, result)
    return out


@nki.jit
def activation_of(x, name):
    """nisa.activation(op=nl.<name>) of x, and the nl function of that name (Scalar engine both)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    direct = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    result = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=result, op=getattr(nl, name), data=tile)
    nl.store(out, value=result)
    nl.store(direct, value=getattr(nl, name)(tile))
    return out, direct
