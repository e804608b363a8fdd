"""Shared pieces of the Hugging Face integration tests (tests/test_hf_*.py).

Everything here is tiny and offline: models are built from configs and saved
with save_pretrained into pytest tmp dirs, the tokenizer is a word-level
`tokenizers` model built in memory. Nothing is downloaded.
"""
from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

VOCAB = 256
NEURON0 = torch.device("neuron", 0)


def llama_config(**overrides):
    """A 2-layer Llama with hidden size 64 and a 256-token vocabulary (no dropout anywhere)."""
    from transformers import LlamaConfig

    kw = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)
    kw.update(overrides)
    return LlamaConfig(**kw)


def tiny_llama(seed: int = 0, **overrides):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(llama_config(**overrides)).eval()


def save_model(model, path, dtype: torch.dtype | None = None) -> str:
    """save_pretrained (safetensors) in `dtype`; returns the directory as str."""
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(str(path))
    return str(path)


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().cpu().float() - b.detach().cpu().float()).abs().max().item()


def make_tokenizer():
    """A word-level fast tokenizer: words "w0".."w250" plus <pad>=0, <s>=1, </s>=2, <unk>=3."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for i in range(VOCAB - len(vocab)):
        vocab[f"w{i}"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def progression(start: int, step: int, length: int) -> torch.Tensor:
    """A learnable token sequence: an arithmetic progression over the ordinary tokens 4..255."""
    return 4 + (start + step * torch.arange(length)) % (VOCAB - 4)


class ProgressionDataset(torch.utils.data.Dataset):
    """Fixed-length causal-LM samples (input_ids and labels) that a tiny model learns quickly."""

    def __init__(self, n: int, length: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        starts = torch.randint(0, VOCAB - 4, (n,), generator=g)
        steps = torch.randint(1, 4, (n,), generator=g)
        self.rows = [progression(int(s), int(d), length) for s, d in zip(starts, steps)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i].clone()}


class VariableLengthDataset(torch.utils.data.Dataset):
    """Unpadded samples of lengths spread over [min_len, max_len] (plain lists, as a tokenizer returns them)."""

    def __init__(self, n: int, min_len: int, max_len: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
        starts = torch.randint(0, VOCAB - 4, (n,), generator=g)
        self.rows = [progression(int(s), 1, int(n_)).tolist() for s, n_ in zip(starts, lengths)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i]}


def reset_accelerate_state():
    """accelerate keeps process-wide singletons; tests that build Accelerators or Trainers start clean."""
    from accelerate.state import AcceleratorState, GradientState, PartialState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    PartialState._reset_state()


@pytest.fixture
def clean_accelerate_state():
    reset_accelerate_state()
    yield
    reset_accelerate_state()
