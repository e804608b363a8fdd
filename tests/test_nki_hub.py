"""NKI kernels in the Hugging Face `kernels` layout: the project's own repository
(RMSNorm, SiLU-and-multiply, rotary embedding) loaded from a folder and swapped
into a transformers Llama, whose tokens stay those of the unswapped model."""
from __future__ import annotations

import shutil

import pytest
import torch

from torch_neuronx.nki import hub
from torch_neuronx.nki.kernel import PROGRAMS


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernels") / "nki-llama-kernels"
    shutil.copytree(hub.SHIPPED, folder)
    assert (folder / "build" / "torch-neuron" / "nki_llama_kernels" / "__init__.py").is_file()
    return hub.load_kernel(str(folder))


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval().to("neuron")


def _calls(kernel: str) -> int:
    return sum(p.calls for p in PROGRAMS if p.encoded["kernel"] == kernel)


def test_llama_with_nki_layers_generates_the_same_tokens(package):
    model = _tiny_llama()
    ids = torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(1)).to("neuron")
    with torch.no_grad():
        logits = model(ids).logits.cpu()
        tokens = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0).cpu()
    assert hub.kernelize(model, package) == 7  # 5 RMSNorms, 2 gated MLPs
    before = (_calls("rmsnorm"), _calls("silu_and_mul"))
    with torch.no_grad():
        swapped_logits = model(ids).logits.cpu()
        swapped_tokens = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0).cpu()
    assert _calls("rmsnorm") > before[0] and _calls("silu_and_mul") > before[1]  # the kernels ran
    torch.testing.assert_close(swapped_logits, logits, rtol=1e-5, atol=1e-5)
    assert torch.equal(swapped_tokens, tokens)


def test_rotary_kernel_matches_transformers(package):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 4, 7, 16, generator=g), torch.randn(2, 2, 7, 16, generator=g)
    cos, sin = torch.randn(2, 7, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    expected = apply_rotary_pos_emb(q, k, cos, sin)
    got = package.apply_rotary_pos_emb(*(t.to("neuron") for t in (q, k, cos, sin)))
    for e, o in zip(expected, got):
        torch.testing.assert_close(o.cpu(), e, rtol=1e-6, atol=1e-6)


def test_bf16_rmsnorm_layer(package):
    x = torch.randn(3, 200, 64, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    w = torch.randn(64, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    out = torch.ops.nki_llama_kernels.rms_norm(x.to("neuron"), w.to("neuron"), 1e-6)
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-2, atol=1e-2)


def test_a_folder_that_is_not_a_kernel_repository(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metadata.json"):
        hub.load_kernel(str(tmp_path))
    (tmp_path / "metadata.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="exactly one package"):
        hub.load_kernel(str(tmp_path))
