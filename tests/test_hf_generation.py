"""transformers generate() on neuron with unchanged user code; the reference is the same model on CPU."""
from __future__ import annotations

import pytest
import torch

from conftest import requires_default_topology
from hf_helpers import NEURON0, make_tokenizer, max_abs_diff, save_model, tiny_llama

pytestmark = requires_default_topology

NEW_TOKENS = 12


@pytest.fixture(scope="module")
def llama_path(tmp_path_factory):
    return save_model(tiny_llama(seed=0), tmp_path_factory.mktemp("gen_llama"))


@pytest.fixture(scope="module")
def models(llama_path):
    """(cpu model, neuron model) loaded from the same checkpoint the way a user would."""
    from transformers import AutoModelForCausalLM

    cpu = AutoModelForCausalLM.from_pretrained(llama_path).eval()
    neuron = AutoModelForCausalLM.from_pretrained(llama_path, device_map="neuron").eval()
    assert neuron.device == NEURON0
    return cpu, neuron


@pytest.fixture(scope="module")
def prompt():
    return torch.randint(4, 256, (1, 9), generator=torch.Generator().manual_seed(1))


def _generate(model, inputs, **kw):
    if isinstance(inputs, torch.Tensor):
        inputs = {"input_ids": inputs}
    inputs = {k: v.to(model.device) for k, v in inputs.items()}
    kw.setdefault("do_sample", False)
    out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, return_dict_in_generate=True, output_logits=True,
                         **kw)
    assert out.sequences.device == model.device
    return out


def _assert_same_as_cpu(models, inputs, logits_tol=1e-4, **kw):
    cpu, neuron = models
    ref = _generate(cpu, inputs, **kw)
    got = _generate(neuron, inputs, **kw)
    assert torch.equal(got.sequences.cpu(), ref.sequences)
    assert len(got.logits) == len(ref.logits)
    for g, r in zip(got.logits, ref.logits):
        assert g.device == NEURON0
        torch.testing.assert_close(g.cpu(), r, rtol=logits_tol, atol=logits_tol)
    return got, ref


def test_greedy_matches_cpu(models, prompt):
    from transformers import DynamicCache

    got, ref = _assert_same_as_cpu(models, prompt)
    assert got.sequences.shape == (1, prompt.shape[1] + NEW_TOKENS)
    assert isinstance(got.past_key_values, DynamicCache)  # the default cache
    assert got.past_key_values.layers[0].keys.device == NEURON0


def test_static_cache_without_compile_matches_cpu(models, prompt):
    from transformers import StaticCache

    got, _ = _assert_same_as_cpu(models, prompt, cache_implementation="static", disable_compile=True)
    assert isinstance(got.past_key_values, StaticCache)
    assert got.past_key_values.layers[0].keys.device == NEURON0


def test_static_cache_default_autocompile(models, prompt):
    """The unchanged-code path `generate(cache_implementation="static")`.

    transformers 5.12 auto-compiles the forward for a StaticCache whenever device.type is in
    ["cuda", "xpu", "neuron", "tpu"] (generation/utils.py _valid_auto_compile_criteria), with the
    default CompileConfig(backend="inductor", mode="reduce-overhead"): Inductor lowers it for neuron
    (docs/compile.md). Greedy tokens equal eager neuron's and the CPU device's; backend="neuron" too.
    """
    import torch_neuronx
    from transformers import CompileConfig

    cpu, neuron = models
    ref = _generate(cpu, prompt, cache_implementation="static", disable_compile=True)
    torch_neuronx.reset_compile_report()
    got = _generate(neuron, prompt, cache_implementation="static")
    assert any(r.route == "inductor" for r in torch_neuronx.compile_records()), "generate() did not compile"
    assert torch.equal(got.sequences.cpu(), ref.sequences)
    torch_neuronx.reset_compile_report()
    named = _generate(neuron, prompt, cache_implementation="static", compile_config=CompileConfig(backend="neuron"))
    assert [r.route for r in torch_neuronx.compile_records()][:1] == ["neuron"]
    assert torch.equal(named.sequences.cpu(), ref.sequences)


def test_model_compile_with_no_arguments_matches_eager(llama_path, prompt):
    """`model.compile()`: transformers' PreTrainedModel.compile with torch's default backend."""
    import torch_neuronx
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(llama_path, device_map="neuron").eval()
    with torch.no_grad():
        eager = model(prompt.to(NEURON0)).logits
        torch._dynamo.reset()
        torch_neuronx.reset_compile_report()
        model.compile()
        compiled = model(prompt.to(NEURON0)).logits
    assert compiled.device == NEURON0
    assert [r.route for r in torch_neuronx.compile_records()] == ["inductor"]
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_beam_search_matches_cpu(models, prompt):
    got, ref = _assert_same_as_cpu(models, prompt, num_beams=3, output_scores=True)
    torch.testing.assert_close(got.sequences_scores.cpu(), ref.sequences_scores, rtol=1e-4, atol=1e-4)


def test_seeded_sampling_is_reproducible(models, prompt):
    _, neuron = models
    kw = dict(do_sample=True, top_k=0, temperature=1.5)

    def sample(seed):
        torch.manual_seed(seed)  # seeds CPU and every NeuronCore generator
        return _generate(neuron, prompt, **kw).sequences.cpu()

    first, again, other = sample(123), sample(123), sample(124)
    assert torch.equal(first, again)
    assert not torch.equal(first[:, prompt.shape[1]:], other[:, prompt.shape[1]:])
    # the draws come from the NeuronCore generator: moving the CPU generator alone changes nothing
    torch.manual_seed(123)
    torch.randn(1000)
    assert torch.equal(_generate(neuron, prompt, **kw).sequences.cpu(), first)


def test_left_padded_batch_matches_cpu(models):
    tok = make_tokenizer()
    tok.padding_side = "left"
    texts = ["w1 w2 w3 w4 w5 w6 w7", "w9 w8", "w40 w41 w42 w43"]
    batch = tok(texts, padding=True, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()
    got, _ = _assert_same_as_cpu(models, batch, pad_token_id=tok.pad_token_id)
    # the padded rows really generate from their own prompts: row 1 equals its unpadded generation
    single = _generate(models[1], tok(texts[1:2], return_tensors="pt"), pad_token_id=tok.pad_token_id)
    assert torch.equal(got.sequences[1, -NEW_TOKENS:].cpu(), single.sequences[0, -NEW_TOKENS:].cpu())


@pytest.mark.parametrize("arch", ["qwen3_moe", "mixtral"])
def test_moe_greedy_matches_cpu(arch, tmp_path, monkeypatch):
    """MoE experts on non-CPU devices take transformers' grouped_mm path with an *integer* torch.histc."""
    from transformers import AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, \
        Qwen3MoeForCausalLM

    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, max_position_embeddings=256)
    if arch == "mixtral":
        cls, cfg = MixtralForCausalLM, MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **common)
    else:
        cls, cfg = Qwen3MoeForCausalLM, Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                                      head_dim=16, **common)
    torch.manual_seed(0)
    path = save_model(cls(cfg), tmp_path)

    histc_calls = []
    original_histc = torch.histc

    def spy_histc(input, *args, **kwargs):
        histc_calls.append((input.device.type, input.dtype))
        return original_histc(input, *args, **kwargs)

    monkeypatch.setattr(torch, "histc", spy_histc)
    cpu = AutoModelForCausalLM.from_pretrained(path).eval()
    neuron = AutoModelForCausalLM.from_pretrained(path, device_map="neuron").eval()
    ids = torch.randint(4, 256, (2, 7), generator=torch.Generator().manual_seed(2))
    _assert_same_as_cpu((cpu, neuron), ids, pad_token_id=0)
    assert ("neuron", torch.int32) in histc_calls, histc_calls  # the integer histc really ran on neuron
    assert ("cpu", torch.float32) in histc_calls


def test_forward_logits_match_cpu(models, prompt):
    cpu, neuron = models
    with torch.no_grad():
        ref = cpu(prompt).logits
        got = neuron(prompt.to("neuron")).logits
    assert max_abs_diff(got, ref) < 1e-5


@pytest.fixture(scope="module")
def pipeline_path(llama_path):
    make_tokenizer().save_pretrained(llama_path)
    return llama_path


def test_text_generation_pipeline_on_neuron_matches_cpu(pipeline_path):
    from transformers import pipeline

    ref = pipeline("text-generation", model=pipeline_path, device="cpu")
    for device in ("neuron", "neuron:1"):
        pipe = pipeline("text-generation", model=pipeline_path, device=device)
        assert pipe.model.device == torch.device(device if ":" in device else "neuron:0")
        for text in ("w1 w2 w3", "w200 w7"):
            kw = dict(max_new_tokens=6, do_sample=False)
            assert pipe(text, **kw)[0]["generated_text"] == ref(text, **kw)[0]["generated_text"]


def test_pipeline_integer_device_lands_on_cpu_transformers_limit(pipeline_path):
    """pipeline(device=0) runs on CPU: a transformers 5.12 limitation.

    Pipeline.__init__ maps an integer device through a fixed chain (mlu, musa, cuda, npu, hpu, xpu, mps)
    and otherwise picks torch.device("cpu"); it has no neuron branch, although torch.device(0) itself is
    neuron:0 with this plugin. Pass device="neuron" / "neuron:N" instead (tested above).
    """
    from transformers import pipeline

    assert torch.device(0) == NEURON0
    pipe = pipeline("text-generation", model=pipeline_path, device=0)
    assert pipe.device == torch.device("cpu") and pipe.model.device.type == "cpu"
