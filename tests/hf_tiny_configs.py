"""Tiny random configs for every causal-LM architecture transformers ships.

Generic shrinking rules (hidden size, layers, heads, experts, vocabulary, ...)
plus per-architecture overrides, used by hf_architecture_sweep.py.
"""
from __future__ import annotations

import dataclasses
import os

PROMPT = [17, 42, 99, 7, 150, 63, 200, 31]  # token ids, remapped per vocabulary by prompt_ids()
# ---------------------------------------------------------------------------
# Generic shrinking
# ---------------------------------------------------------------------------

HIDDEN = 64
LAYERS = 2
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
FFN = 64
MOE_FFN = 32
VOCAB = 256
MAX_POSITIONS = 128
EXPERTS = 4
TOP_K = 2
WINDOW = 8
# A larger initialisation than the usual 0.02, so that the random layers, not the (often tied) token
# embeddings, decide the greedy tokens.
INIT_RANGE = float(os.environ.get("HF_SWEEP_INIT_RANGE", "0.5"))

HIDDEN_KEYS = {"hidden_size", "n_embd", "n_embed", "d_model", "embed_dim", "model_dim", "word_embed_proj_dim",
               "embedding_size", "emb_dim", "embedding_dim", "hidden_size_global", "lru_width", "d_embed",
               "input_embedding_size", "output_embedding_size", "backbone_hidden_size"}
LAYER_KEYS = {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers", "encoder_layers",
              "num_decoder_layers", "num_encoder_layers", "depth", "num_global_layers", "conf_num_hidden_layers",
              "num_blocks"}
HEAD_KEYS = {"num_attention_heads", "n_head", "n_heads", "decoder_attention_heads", "encoder_attention_heads",
             "num_heads", "attention_heads", "num_decoder_attention_heads", "num_encoder_attention_heads",
             "conf_num_attention_heads", "index_n_heads"}
KV_HEAD_KEYS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num", "kv_n_heads",
                "num_query_groups", "num_global_key_value_heads"}
HEAD_DIM_KEYS = {"head_dim", "attention_head_dim", "attention_head_size", "d_head", "dim_head", "index_head_dim",
                 "global_head_dim", "kv_channels"}
FFN_KEYS = {"intermediate_size", "ffn_dim", "decoder_ffn_dim", "encoder_ffn_dim", "n_inner", "d_ff", "dff",
            "ffn_hidden_size", "intermediate_dim", "dim_ff", "d_inner", "mlp_dim", "feed_forward_size",
            "dense_intermediate_size", "intermediate_size_mlp", "shared_intermediate_size"}
MOE_FFN_KEYS = {"moe_intermediate_size", "expert_intermediate_size", "shared_expert_intermediate_size",
                "moe_shared_expert_intermediate_size", "expert_ffn_hidden_size"}
EXPERT_KEYS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"}
TOP_K_KEYS = {"num_experts_per_tok", "top_k", "moe_topk", "moe_top_k", "moe_k", "num_experts_per_token"}
SHARED_EXPERT_KEYS = {"n_shared_experts", "num_shared_experts", "moe_num_shared_experts"}
POSITION_KEYS = {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_target_positions",
                 "max_source_positions", "context_length"}
WINDOW_KEYS = {"sliding_window", "sliding_window_size", "attention_window_size", "window_size"}
# per-layer lists of layer kinds: shrunk to one layer of each kind (which sets the layer count)
LAYER_LIST_KEYS = {"layer_types", "layers_block_type", "mlp_layer_types", "block_types", "indexer_types"}
# Mamba / SSM mixers: 8 heads of 16 (= expand 2 x hidden 64), state 16, chunks of 16
SSM_VALUES = {"mamba_n_heads": 8, "mamba_num_heads": 8, "n_mamba_heads": 8, "mamba_d_head": 16,
              "mamba_head_dim": 16, "mamba_headdim": 16, "mamba_d_state": 16, "ssm_state_size": 16,
              "state_size": 16, "mamba_chunk_size": 16, "chunk_size": 16, "mamba_d_ssm": 128,
              "mamba_n_groups": 1, "mamba_ngroups": 1, "n_groups": 1, "mamba_dt_rank": 8, "time_step_rank": 8,
              "mamba_expand": 2, "expand": 2}
# MLA (DeepSeek-style) attention; head_dim follows qk_rope_head_dim there
MLA_VALUES = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
              "v_head_dim": 16, "o_lora_rank": 16}
# fields left None by some configs that their modelling code needs
FILL_NONE = {"num_experts_per_tok": TOP_K, "n_routed_experts": EXPERTS, "n_shared_experts": 1, "head_dim": HEAD_DIM,
             "num_key_value_heads": 2}

# Per-architecture values applied after the generic rules: {model_type: {key: value}}; a dict value
# under a sub-config's name updates that sub-config. Keys starting with "@" are not config fields:
#   "@config_class": build the config from the model class's own config_class (e.g. a decoder config)
#   "@set": {"sub.field": value} set on the built config (fields that no constructor takes)
#   "@unsupported": a reason; the architecture is reported as not runnable standalone (a CPU failure)
OVERRIDES: dict[str, dict] = {
    # hybrid Mamba/attention stacks: one attention layer among the Mamba ones
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["mamba", "attention"]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1},
    # the shared transformer block needs two hybrid layers to be shared between
    "zamba": {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1,
              "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]},
    "mamba2": {"num_heads": 8},  # num_heads x head_dim must equal expand x hidden_size
    "xlstm": {"qk_dim_factor": 1.0},  # the recurrent state is allocated for qk_dim == v_dim
    "zamba2": {"layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"], "num_hidden_layers": 4},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "num_layers": 2},
    # ReformerModelWithLMHead needs is_decoder; axial position shape must multiply to the positions
    "reformer": {"is_decoder": True, "attn_layers": ["local", "lsh"], "axial_pos_shape": [8, 16],
                 "axial_pos_embds_dim": [32, 32], "max_position_embeddings": 128, "local_attn_chunk_length": 8,
                 "lsh_attn_chunk_length": 8, "num_buckets": 4, "attention_head_size": 16},
    "blt": {"encoder_hash_byte_group_vocab": 64, "encoder_hash_byte_group_size": [3, 4]},
    # the KV-shared layers reuse the last non-shared layer of the same kind: 2 + 2 layers
    "gemma3n_text": {"num_hidden_layers": 4, "num_kv_shared_layers": 2, "intermediate_size": FFN,
                     "layer_types": ["sliding_attention", "full_attention"] * 2,
                     "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]},
    "gemma3n": {"text_config": {"num_hidden_layers": 4, "num_kv_shared_layers": 2, "intermediate_size": FFN,
                                "layer_types": ["sliding_attention", "full_attention"] * 2,
                                "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]}},
    "gemma4_assistant": {"@unsupported": "a draft model: needs the backbone's inputs_embeds and shared_kv_states"},
    "gemma4_unified_assistant": {"@unsupported": "a draft model: needs the backbone's inputs_embeds and "
                                                 "shared_kv_states"},
    # DbrxAttentionConfig takes no rope_theta, which the attention reads (checkpoints carry it)
    "dbrx": {"attn_config": {"clip_qkv": 8.0}, "@set": {"attn_config.rope_theta": 10000.0}},
    # MusicgenForCausalLM is the decoder alone (its config_class); the prompt has one row per codebook
    "musicgen": {"@config_class": True},
    "musicgen_melody": {"@config_class": True},
}
# Architectures whose prompt is not a (1, len(PROMPT)) tensor of token ids.
PROMPT_SHAPES: dict[str, tuple[int, ...]] = {"musicgen": (4, len(PROMPT)), "musicgen_melody": (4, len(PROMPT))}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_MISSING = object()


def _field_default(cls, name):
    """The dataclass default of a config field (_MISSING when it has none)."""
    import dataclasses

    for f in dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ():
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            return _MISSING
    return _MISSING


def _distinct_indices(lst):
    """Index of the first layer of each distinct kind, in order."""
    seen, idx = [], []
    for i, x in enumerate(lst):
        key = repr(x)
        if key not in seen:
            seen.append(key)
            idx.append(i)
    return idx


def _shrink_values(cfg) -> dict:
    """The new values for a config instance's own fields (sub-configs are handled by the caller).

    A field that the config class defaults to None but the instance has set was derived in
    __post_init__ (from the hidden size, the layer count, ...): it is left out, so that it is derived
    again from the new values.
    """
    from transformers import PreTrainedConfig

    cls = type(cfg)
    attrs = {k: v for k, v in vars(cfg).items() if not k.startswith("_") and not isinstance(v, PreTrainedConfig)}
    derived = {k for k, v in attrs.items() if v is not None and _field_default(cls, k) is None}
    new = {}
    heads = attrs.get("num_attention_heads")
    n_layers_old = next((attrs[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                         if _is_int(attrs.get(k))), None)
    for key, val in attrs.items():
        if val is None and key in FILL_NONE:
            new[key] = FILL_NONE[key]
            continue
        if key in derived and key not in LAYER_LIST_KEYS and key != "head_dim":
            continue
        if _is_int(val):
            if key in SSM_VALUES:
                new[key] = SSM_VALUES[key]
            elif key in MLA_VALUES:
                new[key] = MLA_VALUES[key]
            elif key in HIDDEN_KEYS:
                new[key] = HIDDEN
            elif key in LAYER_KEYS:
                new[key] = min(val, LAYERS)
            elif key in HEAD_KEYS:
                new[key] = min(val, HEADS)
            elif key in KV_HEAD_KEYS:
                if heads is not None and val == heads:
                    new[key] = HEADS      # multi-head attention stays MHA
                elif val == 1:
                    new[key] = 1          # multi-query stays MQA
                else:
                    new[key] = 2
            elif key in HEAD_DIM_KEYS:
                new[key] = HEAD_DIM
            elif key in FFN_KEYS:
                new[key] = FFN
            elif key in MOE_FFN_KEYS:
                new[key] = MOE_FFN
            elif key in EXPERT_KEYS:
                new[key] = min(val, EXPERTS)
            elif key in TOP_K_KEYS:
                new[key] = min(val, TOP_K)
            elif key in SHARED_EXPERT_KEYS:
                new[key] = min(val, 1)
            elif key in POSITION_KEYS:
                new[key] = min(val, MAX_POSITIONS)
            elif key in WINDOW_KEYS:
                new[key] = min(val, WINDOW)
            elif key == "rotary_dim":
                new[key] = HEAD_DIM // 2
            elif key == "hidden_size_per_layer_input":
                new[key] = min(val, 16)
            elif key in ("laurel_rank", "adapter_rank"):
                new[key] = min(val, 8)
            elif (key == "vocab_size" or key.endswith(("_vocab_size", "_vocab")) or key.startswith("vocab_size_")) \
                    and key != "type_vocab_size":
                new[key] = min(val, VOCAB)
    for key in ("initializer_range", "init_std"):
        if isinstance(attrs.get(key), float) and key not in derived:
            new[key] = INIT_RANGE
    for key in ("use_mamba_kernels", "use_mem_eff_path"):  # CUDA-only kernels
        if attrs.get(key) is True:
            new[key] = False
    if "qk_rope_head_dim" in new and "head_dim" in new:
        new["head_dim"] = new["qk_rope_head_dim"]
    # grouped routing: 4 experts in 2 groups, routing to the best group
    if _is_int(attrs.get("n_group")) and attrs["n_group"] > 1:
        new["n_group"] = 2
        new["topk_group"] = 1
    for key in ("first_k_dense_replace", "num_dense_layers"):
        if _is_int(attrs.get(key)) and attrs[key] > 0:
            new[key] = 1
    # linear-attention (gated delta net) heads
    if _is_int(attrs.get("linear_num_key_heads")):
        new["linear_num_key_heads"] = 2
    if _is_int(attrs.get("linear_num_value_heads")):
        new["linear_num_value_heads"] = 4
    for key in ("linear_key_head_dim", "linear_value_head_dim"):
        if _is_int(attrs.get(key)):
            new[key] = HEAD_DIM
    # per-layer kind lists make the layer count: one layer of each kind; other per-layer lists
    # (same length as the original stack) keep the entries of the same layers
    kind_lists = {k: list(attrs[k]) for k in LAYER_LIST_KEYS if isinstance(attrs.get(k), (list, tuple)) and attrs[k]}
    keep = None
    if kind_lists:
        main = kind_lists.get("layer_types") or next(iter(kind_lists.values()))
        keep = _distinct_indices(main)
        for k, v in kind_lists.items():
            if len(v) == len(main):
                for i in _distinct_indices(v):
                    if i not in keep:
                        keep.append(i)
        keep = sorted(keep)
        while len(keep) < LAYERS:
            keep.append(keep[-1])
        for k, v in kind_lists.items():
            new[k] = [v[i] for i in keep] if len(v) == len(main) else [v[min(i, len(v) - 1)] for i in keep]
        for key in LAYER_KEYS:
            if _is_int(attrs.get(key)):
                new[key] = len(keep)
    n = new.get("num_hidden_layers", attrs.get("num_hidden_layers"))
    if keep is None and _is_int(n):
        keep = list(range(n))
    if keep is not None and _is_int(n_layers_old):
        for key, val in attrs.items():
            if key in LAYER_LIST_KEYS or key in new or not isinstance(val, (list, tuple)):
                continue
            if len(val) == n_layers_old and n_layers_old > len(keep):
                vals = [val[min(i, len(val) - 1)] for i in keep]
                if key in FFN_KEYS and all(_is_int(x) for x in vals):
                    vals = [FFN] * len(vals)
                new[key] = vals
    # layer-index lists
    for key in ("mlp_only_layers", "moe_layers", "full_attn_idxs", "cross_attention_layers", "attn_layer_indices"):
        val = attrs.get(key)
        if key in new or key in derived:
            continue
        if isinstance(val, (list, tuple)) and val and _is_int(n) and all(_is_int(x) for x in val):
            kept = [x for x in val if x < n]
            new[key] = kept if kept else [n - 1]
    return new


def _remap_token_ids(values: dict, attrs: dict, vocab: int) -> None:
    """Special token ids at or past the (new) vocabulary size move to its top."""
    remap = {}

    def fix(x):
        if _is_int(x) and x >= vocab:
            if x not in remap:
                remap[x] = vocab - 1 - len(remap)
            return remap[x]
        return x

    for key, val in sorted(attrs.items()):
        if key.endswith(("_token_id", "_token_index", "_token_ids")):
            if _is_int(val):
                if val >= vocab:
                    values[key] = fix(val)
            elif isinstance(val, (list, tuple)) and any(_is_int(x) and x >= vocab for x in val):
                values[key] = [fix(x) for x in val]


def config_class(model_type: str):
    from transformers import CONFIG_MAPPING

    if OVERRIDES.get(model_type, {}).get("@config_class"):
        return model_class(model_type).config_class
    return CONFIG_MAPPING[model_type]


def model_class(model_type: str):
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])


def shrunk_config(model_type: str):
    """The tiny config for model_type."""
    from transformers import PreTrainedConfig

    cls = config_class(model_type)
    override = {k: v for k, v in OVERRIDES.get(model_type, {}).items() if not k.startswith("@")}
    default = cls()

    def shrink(cfg, extra):
        attrs = {k: v for k, v in vars(cfg).items() if not k.startswith("_")}
        values = _shrink_values(cfg)
        vocab = values.get("vocab_size", attrs.get("vocab_size"))
        if _is_int(vocab):
            _remap_token_ids(values, attrs, vocab)
        for key, val in attrs.items():
            if isinstance(val, PreTrainedConfig):
                sub = val.to_diff_dict()
                sub.pop("transformers_version", None)
                for k in list(sub):  # derived fields: derived again from the new values
                    if _field_default(type(val), k) is None:
                        del sub[k]
                sub["model_type"] = val.model_type
                sub.update(shrink(val, extra.get(key, {}) if isinstance(extra.get(key), dict) else {}))
                values[key] = sub
        for key, val in extra.items():
            if isinstance(val, dict) and isinstance(values.get(key), dict):
                values[key].update(val)
            else:
                values[key] = val
        return values

    values = shrink(default, override)
    config = cls(**values)
    for path, val in OVERRIDES.get(model_type, {}).get("@set", {}).items():
        *parents, name = path.split(".")
        obj = config
        for p in parents:
            obj = getattr(obj, p)
        setattr(obj, name, val)
    return config


def prompt_ids(config, model_type: str):
    """The fixed prompt, avoiding the config's special token ids."""
    import torch

    special = set()

    def collect(cfg):
        from transformers import PreTrainedConfig
        for key, val in vars(cfg).items():
            if isinstance(val, PreTrainedConfig):
                collect(val)
            elif key.endswith(("_token_id", "_token_index", "_token_ids")):
                for x in (val if isinstance(val, (list, tuple)) else [val]):
                    if _is_int(x):
                        special.add(x)

    collect(config)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None) or VOCAB
    ids = []
    for t in PROMPT:
        t = t % vocab
        while t in special:
            t = (t + 1) % vocab
        ids.append(t)
    shape = PROMPT_SHAPES.get(model_type, (1, len(ids)))
    x = torch.tensor(ids, dtype=torch.long)
    x = x.repeat(shape[0], 1) if len(shape) == 2 else x.repeat(*shape[:-1], 1)
    return x


