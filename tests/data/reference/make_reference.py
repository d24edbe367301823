"""Independent reference logits for the default model (SmolLM2-135M-Instruct Q4_1 GGUF).

A plain numpy forward written from the Hugging Face Llama definition, reading the
GGUF with the `gguf` package (its own dequantizer) and undoing llama.cpp's q/k row
permutation here, separately from the C++ loader. Run once in development:

    python3 tests/data/reference/make_reference.py ~/.cache/nnsight/models/SmolLM2-135M-Instruct.Q4_1.gguf

It writes smollm2_logits.json next to this file: for each prompt (as token ids),
the final-position logits of the first 64 vocabulary entries, the top-10 ids with
their logits, and the layer-5 residual stream at the last position.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

PROMPTS = {
    "paris": [504, 3575, 282, 4649, 314],            # "The capital of France is"
    "eiffel": [504, 414, 46682, 18669, 314, 3807, 281, 260, 2240, 282],  # "The Eiffel Tower is located in the city of"
}


def main(path):
    r = GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}

    def scalar(name):
        f = kv[name]
        return f.parts[f.data[0]][0]

    hidden = int(scalar("llama.embedding_length"))
    n_layers = int(scalar("llama.block_count"))
    n_heads = int(scalar("llama.attention.head_count"))
    n_kv = int(scalar("llama.attention.head_count_kv"))
    eps = float(scalar("llama.attention.layer_norm_rms_epsilon"))
    theta = float(scalar("llama.rope.freq_base"))
    hd = hidden // n_heads

    tensors = {}
    for t in r.tensors:
        arr = dequantize(t.data, t.tensor_type).astype(np.float64)
        shape = [int(x) for x in reversed(t.shape)]  # torch order
        tensors[t.name] = arr.reshape(shape)

    def unpermute(w, heads):
        # GGUF = HF.reshape(heads, 2, hd/2, in).swapaxes(1, 2).reshape(...): invert it.
        out_dim, in_dim = w.shape
        return w.reshape(heads, hd // 2, 2, in_dim).swapaxes(1, 2).reshape(out_dim, in_dim)

    def rms(x, w):
        return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))

    def rope(x, pos):  # x: [len, heads, hd]
        inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
        ang = np.outer(pos, inv)                      # [len, hd/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    emb = tensors["token_embd.weight"]
    out = {}
    for name, ids in PROMPTS.items():
        n = len(ids)
        x = emb[ids]
        pos = np.arange(n)
        layer5 = None
        for l in range(n_layers):
            p = f"blk.{l}."
            h = rms(x, tensors[p + "attn_norm.weight"])
            q = (h @ unpermute(tensors[p + "attn_q.weight"], n_heads).T).reshape(n, n_heads, hd)
            k = (h @ unpermute(tensors[p + "attn_k.weight"], n_kv).T).reshape(n, n_kv, hd)
            v = (h @ tensors[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
            q, k = rope(q, pos), rope(k, pos)
            att = np.zeros((n, n_heads, hd))
            for hh in range(n_heads):
                g = hh // (n_heads // n_kv)
                s = q[:, hh] @ k[:, g].T / np.sqrt(hd)
                s = s + np.triu(np.full((n, n), -np.inf), 1)
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                att[:, hh] = s @ v[:, g]
            x = x + att.reshape(n, hidden) @ tensors[p + "attn_output.weight"].T
            h = rms(x, tensors[p + "ffn_norm.weight"])
            gate = h @ tensors[p + "ffn_gate.weight"].T
            up = h @ tensors[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ tensors[p + "ffn_down.weight"].T
            if l == 5:
                layer5 = x[-1].copy()
        x = rms(x, tensors["output_norm.weight"])
        logits = x[-1] @ emb.T
        top = np.argsort(-logits)[:10]
        out[name] = {
            "ids": ids,
            "logits_head": [float(v) for v in logits[:64]],
            "top_ids": [int(i) for i in top],
            "top_logits": [float(logits[i]) for i in top],
            "layer5_last": [float(v) for v in layer5],
        }
    dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_logits.json")
    with open(dst, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", dst, {k: v["top_ids"][:3] for k, v in out.items()})


if __name__ == "__main__":
    main(sys.argv[1])
