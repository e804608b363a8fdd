"""How the architecture sweep (hf_architecture_sweep.py) compares two runs of
one model and summarises what went wrong: the tolerances, greedy-token
comparison with near-ties, and short error texts for the report."""
from __future__ import annotations

import traceback

ATOL = 1e-4
RTOL = 1e-4
SEED = 0


def _first_tensor(x):
    import torch
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "logits") and isinstance(getattr(x, "logits"), torch.Tensor):
        return x.logits
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        for y in x:
            t = _first_tensor(y)
            if t is not None:
                return t
    return None


def _short(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return msg[:400]


def _where(exc: BaseException, plugin: bool = False) -> str:
    """The innermost frame of the traceback that lies in transformers/torch source (or, with plugin,
    in torch_neuronx, where the compile backend's errors come from), for the report."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if "site-packages" in fr.filename or "dist-packages" in fr.filename:
            path = fr.filename.split("-packages/")[-1]
            return f"{path}:{fr.lineno} in {fr.name}"
        if plugin and "/torch_neuronx/" in fr.filename:
            return f"torch_neuronx/{fr.filename.split('/torch_neuronx/')[-1]}:{fr.lineno} in {fr.name}"
    return ""


def _add_note(result: dict, note: str) -> None:
    result["note"] = f"{result['note']}; {note}" if result.get("note") else note


def _tokens_differ(ref_seq, ref_steps, seq, steps, prompt_len: int) -> tuple[bool, list[str]]:
    """Compares two greedy generations (sequences and per-step logits) of the same prompt batch.
    Returns (differ, near_ties): a divergence is only a near-tie, listed and not counted, when both
    runs' logits at that step agree within ATOL/RTOL and the top two reference logits of that row
    are within that tolerance of each other (a tie that rounding may flip)."""
    import torch
    if seq.shape == ref_seq.shape and torch.equal(seq, ref_seq):
        return False, []
    if seq.shape != ref_seq.shape or ref_seq.dim() != 2:
        return True, []
    ties = []
    for row in range(ref_seq.shape[0]):
        diff = (ref_seq[row] != seq[row]).nonzero()
        if not diff.numel():
            continue
        step = int(diff[0]) - prompt_len
        tie = False
        if 0 <= step < min(len(ref_steps), len(steps)):
            r, d = ref_steps[step].double(), steps[step].double()
            if r.shape == d.shape and r.dim() == 2 and torch.allclose(r, d, atol=ATOL, rtol=RTOL):
                top2 = r[row].topk(2).values
                tie = float(top2[0] - top2[1]) <= ATOL + RTOL * float(top2[0].abs())
        if not tie:
            return True, ties
        ties.append(f"row {row} token {step}")
    return False, ties
