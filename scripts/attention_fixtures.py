"""Hugging Face's eager attention internals on the tiny fixture checkpoints.

Run through scripts/make-attention-fixtures (transformers 5.x, the venv of
make-model-fixtures-v5). For each architecture it reads the checkpoint that
make-model-fixtures-v5 wrote (tests/data/models-v5/<arch>; GPT-2, which has
no model fixture, gets a tiny random checkpoint of its own here) and writes
<out>/<arch>/reference.safetensors:

  ids               int64 [len]               the token ids (ids.2 of the model fixture: longer than every window)
  q.<l>             f32 [len, heads, d]       layer l's queries after q/k norms and rotary
  k.<l>, v.<l>      f32 [len, kv_heads, d]    keys after norms and rotary; values
  scores.<l>        f32 [heads, len, len]     the softmax's input: scaled, soft-capped, masked with -inf
  pattern.<l>       f32 [heads, len, len]     the probabilities (output_attentions)
  z.<l>             f32 [len, heads, d]       each head's output before the output projection
  resid_mid.<l>     f32 [len, hidden]         the residual between attention and MLP (absent for
                                              GPT-NeoX's parallel residual)
  logits            f32 [len, vocab]
  ablated.logits    f32 [len, vocab]          logits with head ABLATE_HEAD of layer ABLATE_LAYER's
                                              probabilities zeroed before they multiply V
  metadata: {"checkpoint": directory of the checkpoint relative to tests/data,
             "ablate_layer", "ablate_head", "attention": the attention module's name}

The values are captured through a registered attention function that calls
the architecture's own eager_attention_forward (so pattern and z are
transformers' own); the scores are recomputed from the same q and k and
checked to give transformers' pattern, and the ablation's output is the
same product checked to give transformers' output unablated.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_fixtures  # noqa: E402

ARCHS = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gpt_neox", "olmo2", "olmo3",
         "smollm3", "phi3", "mixtral", "qwen3_moe", "gpt2"]
ABLATE_LAYER, ABLATE_HEAD = 1, 1

state = {"layers": {}, "ablate": None}


def capture(module, query, key, value, attention_mask, **kwargs):
    eager = sys.modules[type(module).__module__].eager_attention_forward
    out, weights = eager(module, query, key, value, attention_mask, **kwargs)  # [1, q, H, d], [1, H, q, k]
    heads = query.shape[1]
    rep = heads // key.shape[1]
    kr, vr = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    scaling = kwargs.get("scaling")
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    s = torch.matmul(query, kr.transpose(-1, -2)) * scaling
    cap = kwargs.get("softcap")
    if cap:
        s = torch.tanh(s / cap) * cap
    assert attention_mask is not None, "no mask: the reference would attend to future tokens"
    if attention_mask is not None:
        masked = ~attention_mask if attention_mask.dtype == torch.bool else attention_mask < -1e30
        s = s.masked_fill(masked, float("-inf"))
    assert (torch.softmax(s, -1) - weights).abs().max() < 1e-6, "scores do not give transformers' pattern"
    assert (torch.matmul(weights, vr).transpose(1, 2) - out).abs().max() < 1e-6, "pattern . v is not its output"
    layer = module.layer_idx
    if state["ablate"] == layer:
        w = weights.clone()
        w[:, ABLATE_HEAD] = 0
        out = torch.matmul(w, vr).transpose(1, 2).contiguous()
    state["layers"][layer] = dict(q=query[0].transpose(0, 1), k=key[0].transpose(0, 1), v=value[0].transpose(0, 1),
                                  scores=s[0], pattern=weights[0], z=out[0])
    return out, weights


AttentionInterface.register("nnsight_capture", capture)
# The mask an eager attention gets (a custom name would otherwise get sdpa's,
# which leaves the causal mask out when is_causal can stand for it).
AttentionMaskInterface.register("nnsight_capture", eager_mask)


def resid_mid_module(arch, layer):
    """The module whose input is the residual between attention and MLP."""
    if arch == "gpt2":
        return layer.ln_2
    if arch in ("gemma2", "gemma3_text"):
        return layer.pre_feedforward_layernorm
    if arch in ("olmo2", "olmo3"):
        return layer.mlp
    if arch == "gpt_neox":
        return None if layer.use_parallel_residual else layer.post_attention_layernorm
    return layer.post_attention_layernorm


def gpt2_checkpoint(out_dir, tokenizer):
    config = transformers.GPT2Config(vocab_size=model_fixtures.VOCAB, n_embd=64, n_layer=2, n_head=4,
                                     n_positions=128, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(1234)
    model = transformers.GPT2LMHeadModel(config).eval()
    model_fixtures.randomize(model, 1234)
    os.makedirs(out_dir, exist_ok=True)
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    model.save_pretrained(out_dir, state_dict=bf16, safe_serialization=True)
    shutil.copy(tokenizer, os.path.join(out_dir, "tokenizer.json"))


def make(arch, data_root, out_root):
    out_dir = os.path.join(out_root, arch)
    if arch == "gpt2":
        checkpoint = os.path.join(out_dir)
        gpt2_checkpoint(out_dir, os.path.join(data_root, "models-v5", "mistral", "tokenizer.json"))
        ids = torch.randint(3, model_fixtures.VOCAB, (21,), generator=torch.Generator().manual_seed(7))
    else:
        checkpoint = os.path.join(data_root, "models-v5", arch)
        with safe_open(os.path.join(checkpoint, "reference.safetensors"), "pt") as f:
            ids = f.get_tensor("ids.2")
        os.makedirs(out_dir, exist_ok=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32,
                                                              attn_implementation="nnsight_capture").eval()
    layers = model_fixtures.layers_of(model) if arch != "gpt2" else model.transformer.h
    mids = {}
    handles = []
    for l, layer in enumerate(layers):
        m = resid_mid_module(arch, layer)
        if m is not None:
            handles.append(m.register_forward_pre_hook(lambda mod, args, l=l: mids.__setitem__(l, args[0][0])))
    tensors = {"ids": ids.to(torch.int64).contiguous()}
    with torch.no_grad():
        state["ablate"], state["layers"] = None, {}
        tensors["logits"] = model(ids[None], use_cache=False).logits[0].float().contiguous()
        for l, values in state["layers"].items():
            for name, t in values.items():
                tensors[f"{name}.{l}"] = t.float().contiguous()
        for l, t in mids.items():
            tensors[f"resid_mid.{l}"] = t.float().contiguous()
        state["ablate"], state["layers"] = ABLATE_LAYER, {}
        tensors["ablated.logits"] = model(ids[None], use_cache=False).logits[0].float().contiguous()
        state["ablate"] = None
    for h in handles:
        h.remove()
    attn_name = {"gpt2": "attn", "gpt_neox": "attention"}.get(arch, "self_attn")
    meta = {"checkpoint": os.path.relpath(checkpoint, data_root), "ablate_layer": str(ABLATE_LAYER),
            "ablate_head": str(ABLATE_HEAD), "attention": attn_name, "transformers": transformers.__version__,
            "torch": torch.__version__}
    save_file(tensors, os.path.join(out_dir, "reference.safetensors"), metadata=meta)
    print(f"{arch}: {out_dir}")


def main():
    data_root, out_root = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3:] or ARCHS
    unknown = [a for a in wanted if a not in ARCHS]
    if unknown:
        sys.exit(f"unknown architecture(s) {unknown}; known: {ARCHS}")
    torch.set_num_threads(1)
    for arch in wanted:
        make(arch, data_root, out_root)


if __name__ == "__main__":
    main()
