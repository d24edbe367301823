"""Tiny random Hugging Face checkpoints and Hugging Face's outputs on them.

Run through scripts/make-model-fixtures (which pins torch and transformers
4.51.3 and writes tests/data/models/) or scripts/make-model-fixtures-v5
(transformers 5.x, tests/data/models-v5/: configs in 5.x's own spelling,
references computed by 5.x). For each architecture it writes <out>/<arch>/:

  config.json, model.safetensors (or a sharded index), tokenizer.json
  reference.safetensors:
    ids.<s>          int64 [len]            token ids of test sequence s
    logits.<s>       f32 [len, vocab]       HF logits (eager attention, fp32)
    layer.<s>.<l>    f32 [len, hidden]      output of decoder layer l
    norm.<s>         f32 [len, hidden]      output of the final norm
    greedy.<s>       int64 [new]            HF greedy continuation of sequence s
    ablation.logits  f32 [len0, vocab]      logits of sequence 0 with one module's output zeroed
    router.<s>       f32 [len, experts]     (MoE) output of the router named in the metadata
    expert_in.<s>    f32 [routed, hidden]   (MoE) input of the expert named "expert" in the metadata
    expert.<s>       f32 [routed, hidden]   (MoE) its output (before the routing weight)
    expert_proj.<s>  f32 [routed, inter]    (MoE) the output of its first projection (w1 / gate_proj)
  metadata: {"ablate": "<module path>", "router": "<module path>", "expert": "<module path>"}
    (paths as the checkpoint names the modules, which is what the engine serves;
    transformers 5.x holds a layer's experts in one module with stacked weights,
    so there the MoE references are taken as described in moe_v5_* below, and
    "ablate_transformers" / "router_transformers" / "expert_transformers" say how)

Weights are random (seeded), rounded to bfloat16 and stored so; the
reference runs in float32 on exactly those values.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 320
LENGTHS = [13, 5, 21]  # longer than every sliding window below
NEW_TOKENS = 6
WINDOW = 6

common = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
    tie_word_embeddings=False,
)


# Llama 3.1's own rope scaling (llama.cpp's converter of the pinned version
# reads the original length only from there or its 8192 default).
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}


def arch_specs():
    C = transformers
    return {
        "mistral": (C.MistralConfig(**common, head_dim=16, sliding_window=WINDOW, rms_norm_eps=1e-5),
                    C.MistralForCausalLM, "model.layers.0.mlp"),
        "qwen3": (C.Qwen3Config(**common, head_dim=16, rms_norm_eps=1e-6, sliding_window=None,
                                use_sliding_window=False, rope_theta=1e6),
                  C.Qwen3ForCausalLM, "model.layers.1.self_attn.k_norm"),
        "gemma": (C.GemmaConfig(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh"),
                  C.GemmaForCausalLM, "model.layers.0.mlp.act_fn"),
        "gemma2": (C.Gemma2Config(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                  hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                                  sliding_window=WINDOW, attn_logit_softcapping=3.0,
                                  final_logit_softcapping=4.0),
                   C.Gemma2ForCausalLM, "model.layers.0.post_attention_layernorm"),
        "gpt_neox": (C.GPTNeoXConfig(**{k: v for k, v in common.items() if k != "num_key_value_heads"},
                                     rotary_pct=0.5, rotary_emb_base=10000, use_parallel_residual=True,
                                     hidden_act="gelu", layer_norm_eps=1e-5, attention_bias=True),
                     C.GPTNeoXForCausalLM, "gpt_neox.layers.1.attention.query_key_value"),
        "olmo2": (C.Olmo2Config(**common, rms_norm_eps=1e-6), C.Olmo2ForCausalLM, "model.layers.0.self_attn.q_norm"),
        "phi3": (C.Phi3Config(**{**common, "max_position_embeddings": 128}, original_max_position_embeddings=64,
                              rope_scaling={"type": "longrope",
                                            "short_factor": [1.0 + 0.1 * i for i in range(8)],
                                            "long_factor": [1.0 + 0.5 * i for i in range(8)]}),
                 C.Phi3ForCausalLM, "model.layers.0.mlp.gate_up_proj"),
        "gemma3_text": (C.Gemma3TextConfig(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                           hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                                           sliding_window=WINDOW, sliding_window_pattern=2,
                                           rope_theta=100000.0, rope_local_base_freq=10000.0,
                                           rope_scaling={"rope_type": "linear", "factor": 2.0}),
                        C.Gemma3ForCausalLM, "model.layers.1.self_attn.q_norm"),
        "mixtral": (C.MixtralConfig(**{**common, "intermediate_size": 64}, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                    sliding_window=None, rms_norm_eps=1e-5),
                    C.MixtralForCausalLM, "model.layers.1.block_sparse_moe.experts.3"),
        # Layer 0 dense (mlp_only_layers), layer 1 sparse; top-k weights not renormalized.
        "qwen3_moe": (C.Qwen3MoeConfig(**common, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                       moe_intermediate_size=48, decoder_sparse_step=1, mlp_only_layers=[0],
                                       norm_topk_prob=False, sliding_window=None, use_sliding_window=False,
                                       rms_norm_eps=1e-6),
                      C.Qwen3MoeForCausalLM, "model.layers.1.mlp.experts.1"),
        # Settings a GGUF file can carry (scripts/make-gguf-fixtures converts these):
        # llama.cpp stores no query_pre_attn_scalar (it scales by head_dim), fixes
        # Gemma 3's local layers at every 6th-but-last with rope base 10000, and
        # always renormalizes Qwen3-MoE's top-k weights.
        "gemma2_gguf": (C.Gemma2Config(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                       hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=16,
                                       sliding_window=WINDOW, attn_logit_softcapping=3.0,
                                       final_logit_softcapping=4.0),
                        C.Gemma2ForCausalLM, "model.layers.1.mlp"),
        "gemma3_gguf": (C.Gemma3TextConfig(**{**common, "num_hidden_layers": 7, "tie_word_embeddings": True},
                                           head_dim=16, hidden_activation="gelu_pytorch_tanh",
                                           query_pre_attn_scalar=16, sliding_window=WINDOW, sliding_window_pattern=6,
                                           rope_theta=100000.0, rope_local_base_freq=10000.0,
                                           rope_scaling={"rope_type": "linear", "factor": 2.0}),
                        C.Gemma3ForCausalLM, "model.layers.5.self_attn.k_norm"),
        "qwen3_moe_gguf": (C.Qwen3MoeConfig(**common, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                            moe_intermediate_size=48, decoder_sparse_step=1, mlp_only_layers=[],
                                            norm_topk_prob=True, sliding_window=None, use_sliding_window=False,
                                            rms_norm_eps=1e-6),
                           C.Qwen3MoeForCausalLM, "model.layers.1.mlp.experts.2"),
        # Last, so that the fixtures above keep their seeds. Llama 3.x's rope
        # (llama3 scaling: with this base and head size frequencies 0-3 are
        # kept, 4 smoothed, 5-7 divided by the factor) and 3.2's tied head; Qwen2's q/k/v biases (its o_proj has none) and
        # the sliding-window fields Qwen2.5's configs carry, switched off.
        "llama": (C.LlamaConfig(**{**common, "tie_word_embeddings": True}, head_dim=16, rms_norm_eps=1e-5,
                                rope_theta=500000.0, rope_scaling=LLAMA3_SCALING),
                  C.LlamaForCausalLM, "model.layers.1.self_attn.o_proj"),
        "qwen2": (C.Qwen2Config(**{**common, "tie_word_embeddings": True}, rms_norm_eps=1e-6, rope_theta=1e6,
                                use_sliding_window=False, sliding_window=32, max_window_layers=1),
                  C.Qwen2ForCausalLM, "model.layers.0.self_attn.v_proj"),
    }

ROUTERS = {"mixtral": "model.layers.1.block_sparse_moe.gate", "qwen3_moe": "model.layers.1.mlp.gate",
           "qwen3_moe_gguf": "model.layers.0.mlp.gate"}
if os.environ.get("NNSIGHT_FIXTURE_VARIANT") == "1":
    ROUTERS["qwen3_moe"] = "model.layers.3.mlp.gate"  # every second layer is sparse


def variant_specs():
    """Other settings of every architecture (NNSIGHT_FIXTURE_VARIANT=1), for checks
    beyond the committed fixtures: more layers, MQA/MHA, biases, other windows and
    rotary fractions, sequential residual, other MoE routing."""
    C = transformers
    c4 = {**common, "num_hidden_layers": 4}
    specs = {
        "mistral": (C.MistralConfig(**c4, head_dim=16, sliding_window=4), C.MistralForCausalLM, "model.layers.2.mlp"),
        "qwen3": (C.Qwen3Config(**{**c4, "num_key_value_heads": 4, "tie_word_embeddings": True}, head_dim=16,
                                attention_bias=True, sliding_window=None),
                  C.Qwen3ForCausalLM, "model.layers.3.self_attn.q_norm"),
        "gemma": (C.GemmaConfig(**{**c4, "num_key_value_heads": 1, "tie_word_embeddings": True}, head_dim=16,
                                hidden_act="gelu_pytorch_tanh"),
                  C.GemmaForCausalLM, "model.layers.1.mlp"),
        "gemma2": (C.Gemma2Config(**{**c4, "tie_word_embeddings": True}, head_dim=16, query_pre_attn_scalar=16,
                                  sliding_window=3),
                   C.Gemma2ForCausalLM, "model.layers.2.pre_feedforward_layernorm"),
        "gpt_neox": (C.GPTNeoXConfig(**{k: v for k, v in c4.items() if k != "num_key_value_heads"},
                                     rotary_pct=0.25, use_parallel_residual=False, hidden_act="gelu_new"),
                     C.GPTNeoXForCausalLM, "gpt_neox.layers.2.mlp.act"),
        "olmo2": (C.Olmo2Config(**{**c4, "num_key_value_heads": 4}), C.Olmo2ForCausalLM,
                  "model.layers.1.self_attn.k_norm"),
        "phi3": (C.Phi3Config(**c4, partial_rotary_factor=0.5, sliding_window=5, original_max_position_embeddings=64,
                              rope_scaling={"type": "longrope", "short_factor": [1.0, 1.3, 1.9, 2.4],
                                            "long_factor": [1.0, 2.0, 3.0, 4.0]}),
                 C.Phi3ForCausalLM, "model.layers.3.self_attn.qkv_proj"),
        "gemma3_text": (C.Gemma3TextConfig(**{**c4, "tie_word_embeddings": True}, head_dim=16,
                                           query_pre_attn_scalar=16, sliding_window=3, sliding_window_pattern=3,
                                           final_logit_softcapping=6.0),
                        C.Gemma3ForCausalLM, "model.layers.2.self_attn.k_norm"),
        "mixtral": (C.MixtralConfig(**{**c4, "intermediate_size": 32}, head_dim=16, num_local_experts=8,
                                    num_experts_per_tok=2, sliding_window=5),
                    C.MixtralForCausalLM, "model.layers.3.block_sparse_moe.experts.5"),
        "qwen3_moe": (C.Qwen3MoeConfig(**c4, head_dim=16, num_experts=4, num_experts_per_tok=3,
                                       moe_intermediate_size=32, decoder_sparse_step=2, mlp_only_layers=[],
                                       norm_topk_prob=True, sliding_window=None),
                      C.Qwen3MoeForCausalLM, "model.layers.1.mlp.gate"),
        "llama": (C.LlamaConfig(**{**c4, "num_key_value_heads": 1}, head_dim=16, attention_bias=True, mlp_bias=True),
                  C.LlamaForCausalLM, "model.layers.3.mlp.down_proj"),
        "qwen2": (C.Qwen2Config(**{**c4, "num_key_value_heads": 4}, rope_theta=10000.0,
                                rope_scaling={"rope_type": "yarn", "factor": 2.0}),
                  C.Qwen2ForCausalLM, "model.layers.2.self_attn.q_proj"),
    }
    if V5:  # model types newer than transformers 4.51
        specs["olmo3"] = (C.Olmo3Config(**{**c4, "num_key_value_heads": 1}, sliding_window=3, attention_bias=True,
                                        layer_types=["full_attention", "sliding_attention", "full_attention",
                                                     "sliding_attention"],
                                        rope_parameters={
                                            "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0,
                                                               "factor": 8.0, "attention_factor": 1.3,
                                                               "beta_fast": 8, "beta_slow": 2},
                                            "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}),
                          C.Olmo3ForCausalLM, "model.layers.1.mlp")
        specs["smollm3"] = (C.SmolLM3Config(**c4, no_rope_layers=[0, 1, 1, 0],
                                            rope_scaling={"rope_type": "yarn", "factor": 2.0}),
                            C.SmolLM3ForCausalLM, "model.layers.0.self_attn.q_proj")
    return specs


def gemma3_text_v5(layer_types):
    """Gemma 3's text model in 5.x's spelling (rope_parameters per layer type), with `layer_types`."""
    return transformers.Gemma3TextConfig(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                         hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                                         sliding_window=WINDOW, layer_types=layer_types,
                                         rope_parameters={
                                             "full_attention": {"rope_type": "linear", "factor": 2.0,
                                                                "rope_theta": 100000.0},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})


def arch_specs_v5():
    """The architectures of arch_specs() (not the *_gguf ones) as transformers 5.x
    spells them: rope_parameters (flat, or one dict per layer type for Gemma 3),
    layer_types. Gemma 3 gets a layer pattern no 4.x sliding_window_pattern can
    express (first layer global, second local)."""
    C = transformers
    return {
        "mistral": (C.MistralConfig(**common, head_dim=16, sliding_window=WINDOW, rms_norm_eps=1e-5),
                    C.MistralForCausalLM, "model.layers.0.mlp"),
        "qwen3": (C.Qwen3Config(**common, head_dim=16, rms_norm_eps=1e-6, sliding_window=None,
                                use_sliding_window=False,
                                rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
                  C.Qwen3ForCausalLM, "model.layers.1.self_attn.k_norm"),
        "gemma": (C.GemmaConfig(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                hidden_act="gelu_pytorch_tanh"),
                  C.GemmaForCausalLM, "model.layers.0.mlp.act_fn"),
        "gemma2": (C.Gemma2Config(**{**common, "tie_word_embeddings": True}, head_dim=16,
                                  hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                                  sliding_window=WINDOW, attn_logit_softcapping=3.0,
                                  final_logit_softcapping=4.0,
                                  layer_types=["sliding_attention", "full_attention"]),
                   C.Gemma2ForCausalLM, "model.layers.0.post_attention_layernorm"),
        "gpt_neox": (C.GPTNeoXConfig(**{k: v for k, v in common.items() if k != "num_key_value_heads"},
                                     use_parallel_residual=True, hidden_act="gelu", layer_norm_eps=1e-5,
                                     attention_bias=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                      "partial_rotary_factor": 0.5}),
                     C.GPTNeoXForCausalLM, "gpt_neox.layers.1.attention.query_key_value"),
        "olmo2": (C.Olmo2Config(**common, rms_norm_eps=1e-6), C.Olmo2ForCausalLM, "model.layers.0.self_attn.q_norm"),
        "phi3": (C.Phi3Config(**{**common, "max_position_embeddings": 128}, original_max_position_embeddings=64,
                              rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                               "short_factor": [1.0 + 0.1 * i for i in range(8)],
                                               "long_factor": [1.0 + 0.5 * i for i in range(8)],
                                               "original_max_position_embeddings": 64}),
                 C.Phi3ForCausalLM, "model.layers.0.mlp.gate_up_proj"),
        "gemma3_text": (gemma3_text_v5(["full_attention", "sliding_attention"]),
                        C.Gemma3ForCausalLM, "model.layers.1.self_attn.q_norm"),
        "mixtral": (C.MixtralConfig(**{**common, "intermediate_size": 64}, head_dim=16, num_local_experts=4,
                                    num_experts_per_tok=2, sliding_window=None, rms_norm_eps=1e-5),
                    C.MixtralForCausalLM, "model.layers.1.block_sparse_moe.experts.3"),
        "qwen3_moe": (C.Qwen3MoeConfig(**common, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                       moe_intermediate_size=48, decoder_sparse_step=1, mlp_only_layers=[0],
                                       norm_topk_prob=False, sliding_window=None, use_sliding_window=False,
                                       rms_norm_eps=1e-6),
                      C.Qwen3MoeForCausalLM, "model.layers.1.mlp.experts.1"),
        # Gemma 3 4B and larger are multimodal checkpoints (Gemma3ForConditionalGeneration):
        # a tiny SigLIP tower beside the text model, whose text part the engine serves.
        # The image tokens lie outside the ids the fixture draws (3 .. IMAGE_TOKENS[0] - 1).
        "gemma3": (C.Gemma3Config(
            text_config=gemma3_text_v5(["sliding_attention", "full_attention"]).to_dict(),
            vision_config=C.SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, image_size=28, patch_size=14).to_dict(),
            mm_tokens_per_image=4, image_token_index=IMAGE_TOKENS[0], boi_token_index=IMAGE_TOKENS[1],
            eoi_token_index=IMAGE_TOKENS[2], tie_word_embeddings=True),
            C.Gemma3ForConditionalGeneration, "model.language_model.layers.0.mlp"),
        "llama": (C.LlamaConfig(**{**common, "tie_word_embeddings": True}, head_dim=16, rms_norm_eps=1e-5,
                                rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                                 **{k: v for k, v in LLAMA3_SCALING.items() if k != "rope_type"}}),
                  C.LlamaForCausalLM, "model.layers.1.self_attn.o_proj"),
        "qwen2": (C.Qwen2Config(**{**common, "tie_word_embeddings": True}, rms_norm_eps=1e-6,
                                rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                use_sliding_window=False, sliding_window=32, max_window_layers=1),
                  C.Qwen2ForCausalLM, "model.layers.0.self_attn.v_proj"),
        # OLMo 3 (transformers 4.57+, so 5.x only here): OLMo 2's layer, a window on
        # all but every 4th layer, YaRN on the full-attention layers only (the
        # ramp spans dimensions 0..2 with this base and original length), the
        # sliding layers on a base of their own.
        "olmo3": (C.Olmo3Config(**{**common, "num_hidden_layers": 4}, rms_norm_eps=1e-6, sliding_window=WINDOW,
                                rope_parameters={
                                    "full_attention": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                       "original_max_position_embeddings": 32},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}),
                  C.Olmo3ForCausalLM, "model.layers.3.self_attn.q_norm"),
        # SmolLM3 (transformers 4.53+, so 5.x only here): Llama's layer, tied head,
        # no rotary embedding on every 2nd layer.
        "smollm3": (C.SmolLM3Config(**{**common, "num_hidden_layers": 4, "tie_word_embeddings": True},
                                    no_rope_layer_interval=2,
                                    rope_parameters={"rope_type": "default", "rope_theta": 2e6}),
                    C.SmolLM3ForCausalLM, "model.layers.1.self_attn.k_proj"),
    }


IMAGE_TOKENS = (VOCAB - 3, VOCAB - 2, VOCAB - 1)  # gemma3: image, begin-of-image, end-of-image
V5 = int(transformers.__version__.split(".")[0]) >= 5
# transformers 5.x: a sparse layer's router and experts sit under `mlp` for
# Mixtral too (the router at mlp.gate returns (logits, weights, indices)); the
# experts are one module with stacked weights
# (experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]). The
# checkpoint it saves keeps the per-expert names (block_sparse_moe.experts.E.w1).


def make_tokenizer(path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = ["The capital of France is Paris. The capital of Italy is Rome. " * 4,
            "Hello world, this is a tiny tokenizer for test fixtures."]
    tok.train_from_iterator(text, trainer)
    # Every id the model can produce must decode: fill the vocabulary up to VOCAB.
    tok.add_special_tokens([f"<unused{i}>" for i in range(VOCAB - tok.get_vocab_size())])
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    tok.save(path)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    gemma = isinstance(model, (transformers.GemmaForCausalLM, transformers.Gemma2ForCausalLM,
                               transformers.Gemma3ForCausalLM, transformers.Gemma3ForConditionalGeneration))
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if "norm" in name and name.endswith("weight"):
                # Gemma's norms multiply by (1 + w): keep the product near 1 either way.
                p.copy_((0.0 if gemma else 1.0) + 0.1 * r)
            elif gemma and "embed_tokens" in name:
                # Gemma scales embeddings by sqrt(hidden) = 8; without this the (tied)
                # head would mostly predict the input token back.
                p.copy_(0.03 * r)
            elif name.endswith("bias"):
                p.copy_(0.1 * r)
            else:
                p.copy_(0.15 * r)
            p.copy_(p.to(torch.bfloat16).float())  # exactly representable in the stored bf16


def text_model_of(model):
    """The decoder stack: model.model, or a multimodal model's model.model.language_model."""
    if hasattr(model, "gpt_neox"):
        return model.gpt_neox
    return model.model.language_model if hasattr(model.model, "language_model") else model.model


def layers_of(model):
    return text_model_of(model).layers


def final_norm_of(model):
    return model.gpt_neox.final_layer_norm if hasattr(model, "gpt_neox") else text_model_of(model).norm


def module_at(model, path):
    m = model
    for part in path.split("."):
        m = getattr(m, part) if not part.isdigit() else m[int(part)]
    return m


def module_path(model, module):
    return next(name for name, m in model.named_modules() if m is module)


def first(o):
    return o[0] if isinstance(o, tuple) else o


EXPERT_PROJ = {"mixtral": "w1", "qwen3_moe": "gate_proj", "qwen3_moe_gguf": "gate_proj"}


def experts_v5(model, expert):
    """transformers 5.x: (the module holding every expert of the layer, the expert's index)."""
    layer, index = expert.split(".experts.")
    return module_at(model, layer.replace("block_sparse_moe", "mlp") + ".experts"), int(index)


def moe_v5_expert(experts, e, args, act_inputs):
    """One expert's input rows, first projection and output (before the routing
    weight) in transformers 5.x, where the experts are one module: the rows and
    their order are the ones its loop takes for expert e from the routing it
    was given (`args`, caught by a pre-hook), the projection is what its act_fn
    received for e (caught by a hook; the calls come in ascending expert order,
    one per expert with rows), and the output is the loop's own arithmetic on
    the stacked weights (F.linear, act_fn, F.linear) for those rows, checked
    to reproduce the caught projection bit for bit."""
    hidden, top_k_index = args[0], args[1]
    mask = torch.nn.functional.one_hot(top_k_index, num_classes=experts.num_experts + 1).permute(2, 1, 0)
    _, token_idx = torch.where(mask[e])
    x = hidden[token_idx]
    gate, up = torch.nn.functional.linear(x, experts.gate_up_proj[e]).chunk(2, dim=-1)
    hit = sorted(set(top_k_index.flatten().tolist()) - {experts.num_experts})
    assert len(act_inputs) == len(hit), (len(act_inputs), hit)
    if e in hit:
        assert torch.equal(gate, act_inputs[hit.index(e)]), "the expert's first projection differs from act_fn's input"
    out = torch.nn.functional.linear(experts.act_fn(gate) * up, experts.down_proj[e])
    return x, out, gate


def run(model, ids, capture=None, expert=None, proj=None):
    outs = {}
    handles = []
    if expert and V5:
        experts, e = experts_v5(model, expert)
        act_inputs = []
        handles.append(experts.register_forward_pre_hook(lambda m, args: outs.__setitem__("experts_args", args)))
        handles.append(experts.act_fn.register_forward_hook(lambda m, i, o: act_inputs.append(i[0])))
    elif expert:
        def keep(m, i, o):
            outs["expert_in"], outs["expert"] = i[0], o
        handles.append(module_at(model, expert).register_forward_hook(keep))
        handles.append(module_at(model, expert + "." + proj).register_forward_hook(
            lambda m, i, o: outs.__setitem__("expert_proj", o)))
    for l, layer in enumerate(layers_of(model)):
        handles.append(layer.register_forward_hook(lambda m, i, o, l=l: outs.__setitem__(("layer", l), first(o))))
    handles.append(final_norm_of(model).register_forward_hook(lambda m, i, o: outs.__setitem__("norm", first(o))))
    if capture:
        handles.append(module_at(model, capture).register_forward_hook(
            lambda m, i, o: outs.__setitem__("capture", first(o))))
    with torch.no_grad():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0]
        if expert and V5:
            outs["expert_in"], outs["expert"], outs["expert_proj"] = moe_v5_expert(
                experts, e, outs.pop("experts_args"), act_inputs)
    for h in handles:
        h.remove()
    return logits, outs


def greedy(model, ids, n):
    ids = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(n):
            # A full forward each step (no cache): the plainest reading of the model.
            nxt = int(model(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax())
            ids.append(nxt)
            out.append(nxt)
    return out


def make(arch, spec, out_dir, tokenizer_path, seed):
    config, cls, ablate = spec
    config._attn_implementation = "eager"
    if V5:
        config._experts_implementation = "eager"  # the plain per-expert loop (moe_v5_expert reads it)
    torch.manual_seed(seed)
    model = cls(config).eval()
    randomize(model, seed)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    # Stored in bfloat16 (half the bytes); every value is exact in float32.
    shard = "150KB" if arch == "qwen3" else "50GB"  # one sharded checkpoint among the fixtures
    # (The model itself stays float32: casting it would also round buffers such
    # as the rotary inv_freq, which transformers computes in float32.)
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    model.save_pretrained(out_dir, state_dict=bf16, safe_serialization=True, max_shard_size=shard)
    shutil.copy(tokenizer_path, os.path.join(out_dir, "tokenizer.json"))

    g = torch.Generator().manual_seed(seed + 1)
    tensors = {}
    meta = {"ablate": ablate, "transformers": transformers.__version__, "torch": torch.__version__}
    router = ROUTERS.get(arch)
    if router:
        meta["router"] = router
    if router and V5:
        meta["router_transformers"] = router = router.replace("block_sparse_moe", "mlp")  # where 5.x computes it
    expert = ablate if arch in EXPERT_PROJ and ".experts." in ablate else None
    if expert:
        meta["expert"] = expert
    if expert and V5:
        experts, e = experts_v5(model, expert)
        meta["expert_transformers"] = (f"{module_path(model, experts)} expert {e}: input rows and act_fn input "
                                       "from hooks, output by the experts loop's arithmetic (model_fixtures.py)")
        meta["ablate_transformers"] = f"{module_path(model, experts)}.down_proj[{e}] zeroed"
    seqs = []
    for s, n in enumerate(LENGTHS):
        ids = torch.randint(3, IMAGE_TOKENS[0] if arch == "gemma3" else VOCAB, (n,), generator=g).tolist()
        seqs.append(ids)
        logits, outs = run(model, ids, router, expert, EXPERT_PROJ.get(arch))
        tensors[f"ids.{s}"] = torch.tensor(ids, dtype=torch.int64)
        tensors[f"logits.{s}"] = logits.float().contiguous()
        for l in range(config.get_text_config().num_hidden_layers):
            tensors[f"layer.{s}.{l}"] = outs[("layer", l)][0].float().contiguous()
        tensors[f"norm.{s}"] = outs["norm"][0].float().contiguous()
        tensors[f"greedy.{s}"] = torch.tensor(greedy(model, ids, NEW_TOKENS), dtype=torch.int64)
        if router:
            tensors[f"router.{s}"] = outs["capture"].reshape(n, -1).float().contiguous()
        if expert:
            # Every expert runs every step in transformers 4.51, also on no rows.
            for k in ("expert_in", "expert", "expert_proj"):
                tensors[f"{k}.{s}"] = outs[k].float().contiguous()
    # Ablation: the module's output zeroed (element 0 of a tuple output).
    def zero(m, i, o):
        if isinstance(o, tuple):
            return (torch.zeros_like(o[0]),) + tuple(o[1:])
        return torch.zeros_like(o)
    with torch.no_grad():
        if expert and V5:
            # No module is one expert in 5.x: its down projection zeroed makes its output exactly zero.
            saved = experts.down_proj[e].clone()
            experts.down_proj[e].zero_()
            tensors["ablation.logits"] = model(torch.tensor([seqs[0]]), use_cache=False).logits[0].float().contiguous()
            experts.down_proj[e].copy_(saved)
        else:
            h = module_at(model, ablate).register_forward_hook(zero)
            tensors["ablation.logits"] = model(torch.tensor([seqs[0]]), use_cache=False).logits[0].float().contiguous()
            h.remove()
    save_file(tensors, os.path.join(out_dir, "reference.safetensors"), metadata=meta)
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    print(f"{arch}: {out_dir} ({size // 1024} KB)")


def main():
    out_root = sys.argv[1]
    wanted = sys.argv[2:]
    if os.environ.get("NNSIGHT_FIXTURE_VARIANT") == "1":
        specs = variant_specs()  # 4.x arguments; 5.x converts them (rope_scaling, sliding_window_pattern, ...)
    else:
        specs = arch_specs_v5() if V5 else arch_specs()
    seed0 = int(os.environ.get("NNSIGHT_FIXTURE_SEED", "1000"))
    unknown = [a for a in wanted if a not in specs]
    if unknown:
        sys.exit(f"unknown architecture(s) {unknown}; known: {sorted(specs)}")
    torch.set_num_threads(1)
    os.makedirs(out_root, exist_ok=True)
    tok_path = os.path.join(out_root, ".tokenizer.json")
    make_tokenizer(tok_path)
    for i, (arch, spec) in enumerate(specs.items()):
        if wanted and arch not in wanted:
            continue
        make(arch, spec, os.path.join(out_root, arch), tok_path, seed0 + i)
    os.remove(tok_path)


if __name__ == "__main__":
    main()
