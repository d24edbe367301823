"""Rotary tables transformers computes for scaled ropes, from config.json texts.

Run through scripts/make-rope-fixtures (transformers 5.x, the venv of
make-model-fixtures-v5). Writes <out>/yarn.safetensors: for each case c,

  inv_freq.<c>  f32 [rotary_dim / 2]   the inverse frequencies transformers' rope init returns
  cos.<c>       f32 [POSITIONS, rotary_dim / 2]  cos(position * inv_freq) * attention factor,
  sin.<c>       f32 [POSITIONS, rotary_dim / 2]  as transformers' rotary forward makes them
  metadata: "config.<c>": the config.json text, "layer_type.<c>": the layer type
            whose rope it is ("" for a model with one rope), "transformers": version

The C++ test parses each config.json text as the engine does and compares
the rotary embedding it builds with these tables.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

POSITIONS = 64


def qwen3(**over):
    d = dict(model_type="qwen3", vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=131072,
             use_sliding_window=False, sliding_window=None)
    d.update(over)
    return d


CASES = {
    # Qwen3's long-context recipe in 5.x's spelling, max_position_embeddings raised to match.
    "qwen3_v5": (qwen3(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                        "original_max_position_embeddings": 32768}), None),
    # The same in 4.x's spelling.
    "qwen3_v4": (qwen3(rope_theta=1e6, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                     "original_max_position_embeddings": 32768}), None),
    # No original length: the context length is the original; 4.x's "type".
    "qwen2_no_original": (dict(qwen3(rope_theta=1e6, rope_scaling={"type": "yarn", "factor": 2.0},
                                     max_position_embeddings=32768), model_type="qwen2"), None),
    # The attention factor from mscale / mscale_all_dim; other betas.
    "qwen3_mscale": (qwen3(max_position_embeddings=32768,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0, "mscale": 1.0,
                                            "mscale_all_dim": 0.5, "beta_fast": 16, "beta_slow": 2,
                                            "original_max_position_embeddings": 4096}), None),
    # A given attention factor, the correction range not truncated.
    "qwen3_untruncated": (qwen3(max_position_embeddings=16384,
                                rope_parameters={"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                                                 "attention_factor": 1.5, "truncate": False,
                                                 "original_max_position_embeddings": 4096}), None),
    # No factor: max_position_embeddings / original_max_position_embeddings.
    "qwen3_factor_from_ratio": (qwen3(max_position_embeddings=65536,
                                      rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": None,
                                                       "original_max_position_embeddings": 16384}), None),
}

# OLMo 3 7B's long-context rope as the hub's config.json spells it (4.x): YaRN on
# the full-attention layers, the sliding ones unscaled.
OLMO3 = dict(model_type="olmo3", vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=65536, rope_theta=500000.0,
             rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192,
                           "attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1},
             sliding_window=4096)
CASES["olmo3_full"] = (OLMO3, "full_attention")
CASES["olmo3_sliding"] = (OLMO3, "sliding_attention")


def tables(config, layer_type):
    params = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    kind = params["rope_type"]
    if kind == "default":
        base = params["rope_theta"]
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        inv_freq, attention = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), 1.0
    else:
        inv_freq, attention = ROPE_INIT_FUNCTIONS[kind](config, None, layer_type=layer_type)
    pos = torch.arange(POSITIONS, dtype=torch.float)
    freqs = pos[:, None] * inv_freq[None, :].float()
    return inv_freq.float(), (freqs.cos() * attention).float(), (freqs.sin() * attention).float()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tensors, meta = {}, {"transformers": transformers.__version__}
    for name, (d, layer_type) in CASES.items():
        text = json.dumps(d)
        config = transformers.CONFIG_MAPPING[d["model_type"]].from_dict(json.loads(text))
        inv_freq, cos, sin = tables(config, layer_type)
        tensors[f"inv_freq.{name}"] = inv_freq.contiguous()
        tensors[f"cos.{name}"] = cos.contiguous()
        tensors[f"sin.{name}"] = sin.contiguous()
        meta[f"config.{name}"] = text
        meta[f"layer_type.{name}"] = layer_type or ""
    save_file(tensors, os.path.join(out, "yarn.safetensors"), metadata=meta)
    print(f"{len(CASES)} cases: {out}/yarn.safetensors")


if __name__ == "__main__":
    main()
