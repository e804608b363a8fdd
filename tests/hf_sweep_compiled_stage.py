"""The sweep's compiled-StaticCache stage (HF_SWEEP_COMPILE=1, see
hf_architecture_sweep.py): greedy generate() with a StaticCache on the neuron
model, eagerly and with the decode step compiled by the "neuron" backend."""
from __future__ import annotations

import re
import traceback

from hf_sweep_compare import SEED, _short, _tokens_differ, _where


# The stages of the compiled StaticCache run; a crash or time-out in one of them classifies the
# architecture by the stage (classify()), as the child's result never arrives.
STATIC_EAGER_STAGE = "neuron:static-eager"
STATIC_COMPILED_STAGE = "neuron:static-compiled"


def _static_generate(model, ids, mask, gen_kwargs, backend=None):
    """Greedy generate() with a StaticCache: eagerly, or with the decode step compiled by backend."""
    import torch
    from transformers import CompileConfig

    extra = {"disable_compile": True}
    if backend is not None:
        # generate() keeps its StaticCache on the model (model._cache) for the next call, and checking
        # it then fails in transformers, eagerly too, where the model never wrote some of its layers
        # (mamba's LinearAttentionLayer, the StaticLayers of models without a KV cache): a fresh
        # cache, as the eager run had
        if hasattr(model, "_cache"):
            del model._cache
        torch._dynamo.reset()  # nothing compiled earlier in this process is reused
        extra = {"compile_config": CompileConfig(backend=backend)}
    torch.manual_seed(SEED)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, cache_implementation="static", **gen_kwargs, **extra)
    return out.sequences.to("cpu"), [t.detach().to("cpu") for t in out.logits or []]


def _compile_error(exc: BaseException) -> str:
    # Dynamo's advice to set TORCHDYNAMO_VERBOSE would take half of the short text
    msg = re.sub(r"\s*Set TORCHDYNAMO_VERBOSE=1.*", "", f"{type(exc).__name__}: {exc}", flags=re.S)
    return " ".join(msg.split())[:400]


def _dynamo_eager_verdict(model, ids, mask, gen_kwargs, static_seq, static_steps) -> str:
    """After a compile failure: the same generate() with Dynamo's "eager" backend (Dynamo's capture
    and guards, the captured graph run as is, no lowering) tells a failure of the neuron backend
    from one of Dynamo or of the model's code under Dynamo."""
    try:
        seq, steps = _static_generate(model, ids, mask, gen_kwargs, backend="eager")
    except Exception as exc:  # noqa: BLE001
        return f"raises too ({_compile_error(exc)[:120]})"
    differ, _ = _tokens_differ(static_seq, static_steps, seq, steps, ids.shape[-1])
    return "differs too" if differ else "agrees with eager static"


def compiled_static_stage(model, input_ids, attention_mask, gen_kwargs: dict, stage) -> dict:
    """HF_SWEEP_COMPILE: greedy generate() with a StaticCache on the neuron model, eagerly and then with
    the decode step compiled by the "neuron" backend. Returns the keys for the result: static_tokens,
    compiled_tokens, compile_problems (compiled vs eager static; with dynamo_eager, what Dynamo's
    eager backend does then), or static_unsupported (the eager StaticCache run raised, so there is
    nothing to compare the compiled one with)."""
    import torch_neuronx

    ids, mask = input_ids.to("neuron"), attention_mask.to("neuron")
    prompt_len = ids.shape[-1]
    stage(STATIC_EAGER_STAGE)
    try:
        static_seq, static_steps = _static_generate(model, ids, mask, gen_kwargs)
    except Exception as exc:  # noqa: BLE001
        return {"static_unsupported": _short(exc)[:200]}
    out = {"static_tokens": static_seq[0, prompt_len:].tolist(), "compile_problems": []}

    stage(STATIC_COMPILED_STAGE)
    torch_neuronx.reset_compile_report()
    try:
        seq, steps = _static_generate(model, ids, mask, gen_kwargs, backend="neuron")
    except Exception as exc:  # noqa: BLE001
        out["compile_problems"].append(f"compiled generate raises {_compile_error(exc)}")
        out["compile_where"] = _where(exc, plugin=True)
        out["compile_trace"] = traceback.format_exc()[-4000:]
    else:
        out["compiled_tokens"] = seq[0, prompt_len:].tolist()
        # generate() compiles only with a compileable cache, which some models (rwkv, xlstm, reformer,
        # ...) never use: the count tells a compiled pass from one that ran eagerly throughout
        out["compiled_graphs"] = len(torch_neuronx.compile_records())
        differ, ties = _tokens_differ(static_seq, static_steps, seq, steps, prompt_len)
        if differ:
            out["compile_problems"].append(f"compiled tokens differ: eager static {static_seq[:, prompt_len:].tolist()}"
                                           f" vs compiled {seq[:, prompt_len:].tolist()}")
        notes = [] if out["compiled_graphs"] else ["generate() compiled no graph"]
        if ties and not differ:
            notes.append(f"near-tie at {', '.join(ties)}")
        if notes:
            out["compile_note"] = "compiled StaticCache: " + "; ".join(notes)
    if out["compile_problems"]:
        out["dynamo_eager"] = _dynamo_eager_verdict(model, ids, mask, gen_kwargs, static_seq, static_steps)
    return out
