"""The neuron RNG in transformers Trainer checkpoints.

Trainer 5.12 saves and restores the Python, NumPy, CPU and CUDA/XLA/NPU/HPU/
MLU/MUSA generator states with each checkpoint, but not neuron's, so a model
with dropout does not resume bit-exactly on neuron (accelerate's save_state
does save it). This callback, through Trainer's own callback interface, writes
every core's generator state next to Trainer's rng_state.pth and restores it
when training resumes:

    Trainer(..., callbacks=[NeuronRngStateCallback()])
"""
from __future__ import annotations

import os
import warnings

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR


def _checkpoint_dir(args, step: int) -> str:
    """Where Trainer writes the checkpoint of `step`."""
    return os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{step}")


def _state_file(checkpoint_dir: str, process_index: int) -> str:
    return os.path.join(checkpoint_dir, f"neuron_rng_state_{process_index}.pth")


class NeuronRngStateCallback(TrainerCallback):
    """Saves the neuron generators with each Trainer checkpoint and restores them on resume.

    A resumed run finds its checkpoint as Trainer does for resume_from_checkpoint=True (the
    checkpoint of the resumed step under output_dir), or at TrainingArguments.resume_from_checkpoint.
    """

    def on_save(self, args, state, control, **kwargs):
        checkpoint = _checkpoint_dir(args, state.global_step)
        if os.path.isdir(checkpoint):
            torch.save(torch.neuron.get_rng_state_all(), _state_file(checkpoint, args.process_index))

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # a fresh run; a resumed one starts at its checkpoint's step
            return
        candidates = [_checkpoint_dir(args, state.global_step)]
        if isinstance(args.resume_from_checkpoint, str):
            candidates.insert(0, args.resume_from_checkpoint)
        for checkpoint in candidates:
            path = _state_file(checkpoint, args.process_index)
            if os.path.isfile(path):
                torch.neuron.set_rng_state_all(torch.load(path, weights_only=True))
                return
        warnings.warn(f"resuming at step {state.global_step} without a neuron RNG state (looked in "
                      f"{', '.join(candidates)}): random ops such as dropout will not repeat the original run's",
                      stacklevel=2)
