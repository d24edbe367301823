#!/usr/bin/env python3
"""Golden values from the default model for the RealModelGguf suite.

Reads SmolLM2-135M-Instruct.Q4_1.gguf (from $NNSIGHT_HOME, default
~/.cache/nnsight, under models/) with the reference `gguf` Python package and
records, dequantized by gguf.quants.dequantize:
  * "gguf_rows": rows of tensors exactly as stored (GGUF row order),
  * "hf_rows":   rows of q/k projections after undoing llama.cpp's rotary
                 permutation with numpy, i.e. in Hugging Face row order.
Output: real_model_golden.json beside this script.
"""
import json
import os

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

HOME = os.environ.get("NNSIGHT_HOME") or os.path.expanduser("~/.cache/nnsight")
MODEL = os.path.join(HOME, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

GGUF_ROWS = {
    "token_embd.weight": [0, 1, 49151],   # Q8_0
    "blk.0.attn_q.weight": [0, 1, 575],   # Q4_1
    "blk.29.ffn_down.weight": [0],        # Q4_1, 1536 wide
    "blk.0.attn_norm.weight": [0],        # F32 (a 1-D tensor is one row)
    "output_norm.weight": [0],            # F32
}
# (tensor, heads, rows in Hugging Face order)
HF_ROWS = [("blk.0.attn_q.weight", 9, [0, 1, 33, 100]), ("blk.3.attn_k.weight", 3, [1, 32, 191])]


def unpermute(w, n_head):
    # llama.cpp stored w_hf.reshape(n_head, 2, d/2, in).swapaxes(1, 2); invert it.
    out, rest = w.shape[0], w.shape[1:]
    return w.reshape(n_head, out // n_head // 2, 2, *rest).swapaxes(1, 2).reshape(w.shape)


def main():
    reader = GGUFReader(MODEL)
    tensors = {t.name: t for t in reader.tensors}

    def full(name):
        t = tensors[name]
        x = dequantize(t.data, t.tensor_type).astype(np.float32)
        return x.reshape(-1, int(t.shape[0]))  # [rows, ne0]

    golden = {"model": os.path.basename(MODEL), "gguf_rows": {}, "hf_rows": {}}
    for name, rows in GGUF_ROWS.items():
        x = full(name)
        golden["gguf_rows"][name] = {
            "type": tensors[name].tensor_type.name,
            "rows": {str(r): [float(v) for v in x[r]] for r in rows},
        }
    for name, heads, rows in HF_ROWS:
        x = unpermute(full(name), heads)
        golden["hf_rows"][name] = {"heads": heads, "rows": {str(r): [float(v) for v in x[r]] for r in rows}}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_model_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
