"""Values and control flow that exist only on the device: virtual registers (nisa.register_alloc, _move,
_load, _store), loops whose bounds or condition are registers (nl.fori_loop, nl.while_loop,
nl.dynamic_range), branches on a register (nl.if_else) and views offset by a register
(`tensor.ap(..., scalar_offset=register)`). Scalars computed from registers: device_scalars.py.

A register is an int32 element of a hidden HBM scratch tensor of the kernel (a 64-bit scalar's, an int64
element of another): moving, loading and storing one are DMA copies (the verifier and the cost model see them as such). A loop's body is traced once,
between a loop-begin and a loop-end instruction; a branch's sides are traced once each, after a forward
branch; the executor follows both (nki_runtime/ControlFlow.h)."""
from __future__ import annotations

from .trace import View, current

_FAR = 1 << 30  # a placeholder for a loop's other end until it is known


class VirtualRegister:
    """One int32 register of the engines' sequencers. Its value exists only while the kernel runs: Python
    cannot branch on it or turn it into a number (use nl.fori_loop, nl.while_loop)."""

    def __init__(self, element: int, registers):
        self.element, self.registers = element, registers  # registers: the trace's register tensor

    @property
    def dtype(self) -> str:
        """int32, or int64 for a scalar read from an nl.int64 tile."""
        return self.registers.dtype

    def view(self) -> View:
        return View(self.registers, self.element, (1, 1), (1, 1))

    def _unknown(self, *_):
        raise TypeError("a register's value is known only on the device: Python cannot branch on it or use it "
                        "as a number; loop on it with nl.fori_loop, nl.while_loop or nl.dynamic_range")

    __bool__ = __int__ = __index__ = __float__ = _unknown

    def __repr__(self) -> str:
        return f"VirtualRegister({self.element})"


def _constant(value: int, dtype: str = "int32") -> View:
    import numpy as np
    from .language import shared_constant
    low, high = {"int32": (-2**31, 2**31), "uint32": (0, 2**32), "int64": (-2**63, 2**63)}[dtype]
    if not low <= int(value) < high:
        raise current().error(f"a {dtype} register holds {low} to {high - 1}: {value} does not fit")
    return shared_constant(np.array([[int(value)]], dtype=dtype))


def _dma(dst: View, src: View) -> None:
    from .language import _emit
    _emit("dma_copy", "dma", dst, (src,), None)


def new_register(kind=VirtualRegister, dtype: str = "int32"):
    """A register of the kernel's register file, as a VirtualRegister or an NkiScalar (`kind`); an int64 one
    (a 64-bit scalar) or uint32 one in the file of those."""
    trace = current()
    element = trace.new_register(dtype)
    return kind(element, trace.register_file(element + 1, dtype))


def narrow(value, role: str):
    """value, unless it is a 64-bit or an unsigned scalar: the sequencers loop and branch on int32 registers."""
    if isinstance(value, VirtualRegister) and value.dtype == "int64":
        raise current().error(f"{role} is a 64-bit scalar; loops, branches and comparisons take int32 ones "
                              "(64-bit scalars add, subtract, multiply, and offset HBM access patterns)")
    if isinstance(value, VirtualRegister) and value.dtype == "uint32":
        raise current().error(f"{role} is a uint32 scalar; loops and branches take int32 ones (compare it, as "
                              "`s != 0`, for an int32 condition)")
    return value


def register_alloc(x=None) -> VirtualRegister:
    register = new_register()
    if x is not None:
        register_move(register, x)
    return register


def register_move(dst: VirtualRegister, x) -> None:
    """dst = x, an integer or another register of its width."""
    if isinstance(x, VirtualRegister) and x.dtype != dst.dtype:
        raise current().error(f"register_move: {x.dtype} into {dst.dtype}; the registers' dtypes must match")
    _dma(dst.view(), x.view() if isinstance(x, VirtualRegister) else _constant(x, dst.dtype))


def _one_element(tensor: View, role: str) -> View:
    if not isinstance(tensor, View) or tensor.elements() != 1:
        raise current().error(f"{role} must be a tensor of one element, not {tensor!r}")
    if tensor.dtype.endswith("_x4"):
        raise current().error(f"{role}: packed MX data ({tensor.dtype}) cannot be read as a register")
    return View(tensor.decl, tensor.offset, (1, 1), (1, 1))


def register_load(dst: VirtualRegister, src: View) -> None:
    """dst = the one value of src (HBM or SBUF), converted to int32."""
    _dma(dst.view(), _one_element(src, "register_load's src"))


def register_store(dst: View, src: VirtualRegister) -> None:
    """The one element of dst (HBM or SBUF) = src's value."""
    _dma(_one_element(dst, "register_store's dst"), src.view())


def _register(value, role: str) -> VirtualRegister:
    if isinstance(value, VirtualRegister):
        return narrow(value, role)
    if isinstance(value, bool) or not isinstance(value, int):
        raise current().error(f"{role} must be an int or a VirtualRegister, not {type(value).__name__}")
    return register_alloc(value)


def _loop(begin_inputs, register: VirtualRegister, step: int):
    """Emits a loop's begin; returns a function that emits its end (end_inputs) and joins the two."""
    from .language import _emit
    trace = current()
    if trace.no_reorder_depth:
        raise trace.error("a loop run on the device (fori_loop, while_loop, dynamic_range) cannot be inside "
                          "nl.no_reorder(); static loops (range, affine_range, sequential_range) can")
    begin = _emit("loop_begin", "vector", register.view(), [r.view() for r in begin_inputs], None,
                  coefficients=[step, _FAR])
    begin_index = len(trace.instructions) - 1
    trace.sequencer_depth += 1

    def close(end_inputs) -> None:
        trace.sequencer_depth -= 1
        _emit("loop_end", "vector", register.view(), [r.view() for r in end_inputs], None,
              coefficients=[step, begin_index])
        begin["coefficients"][1] = float(len(trace.instructions) - 1)
    return close


def _counted(lower, upper, step):
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise current().error(f"a device loop's step must be a positive int known when tracing, not {step!r}")
    # As AWS's: the index is a VirtualRegister when a bound is one, else an NkiScalar (scalar arithmetic).
    from .device_scalars import NkiScalar
    kind = VirtualRegister if type(lower) is VirtualRegister or type(upper) is VirtualRegister else NkiScalar
    lower, upper = _register(lower, "the loop's lower bound"), _register(upper, "the loop's upper bound")
    index = new_register(kind)
    return index, _loop((lower, upper), index, step)


def fori_loop(lower, upper, body_fun, step: int = 1, **_) -> None:
    """body_fun(i) for i in range(lower, upper, step), run on the device: bounds ints, registers or
    NkiScalars, the body traced once. i holds the iteration's value: an NkiScalar, or a VirtualRegister
    when a bound is one."""
    index, close = _counted(lower, upper, step)
    body_fun(index)
    close(())


def while_loop(init: VirtualRegister, body_fun) -> None:
    """r = init; while r != 0: r = body_fun(r), on the device (the body returns the next condition)."""
    if not isinstance(init, VirtualRegister):
        raise current().error(f"while_loop's init must be a VirtualRegister, not {type(init).__name__}")
    narrow(init, "while_loop's init")
    condition = register_alloc()
    register_move(condition, init)
    close = _loop((condition,), condition, 0)
    following = body_fun(condition)
    if not isinstance(following, VirtualRegister):
        raise current().error("while_loop's body must return the next condition, a VirtualRegister")
    register_move(condition, following)
    close((condition,))


def dynamic_range(start, stop=None, step: int = 1, **_):
    """`for i in nl.dynamic_range(...)`: a device loop whose body is the for statement's (traced once)."""
    if stop is None:
        start, stop = 0, start
    index, close = _counted(start, stop, step)
    yield index
    close(())


def _numpy_integer(value) -> bool:
    """A NumPy bool or integer scalar (a comparison of NumPy values while tracing gives np.bool_)."""
    dtype = getattr(value, "dtype", None)
    return type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and dtype is not None \
        and dtype.kind in "biu"


def if_else(cond, then_fn, else_fn=None) -> None:
    """then_fn() when cond is nonzero, else else_fn() (if given). A Python bool or int picks a side now; a
    register or NkiScalar (a comparison such as `scalar_load(t) > 0`) branches on the device, each side
    traced once."""
    if not isinstance(cond, VirtualRegister):
        if not isinstance(cond, int) and not _numpy_integer(cond):
            raise current().error(f"if_else's condition must be a bool, an int (NumPy's too), an NkiScalar or "
                                  f"a VirtualRegister, not {type(cond).__name__}")
        chosen = then_fn if cond else else_fn
        if chosen is not None:
            chosen()
        return
    from .language import _emit
    trace = current()
    narrow(cond, "if_else's condition")
    to_else = _emit("branch", "vector", cond.view(), [cond.view()], None, coefficients=[_FAR])
    trace.sequencer_depth += 1
    then_fn()
    if else_fn is not None:
        to_end = _emit("branch", "vector", cond.view(), [], None, coefficients=[_FAR])
        to_else["coefficients"][0] = float(len(trace.instructions))
        else_fn()
        to_else = to_end
    trace.sequencer_depth -= 1
    to_else["coefficients"][0] = float(len(trace.instructions))
