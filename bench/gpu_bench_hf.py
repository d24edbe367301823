"""The peer of gpu_bench: Hugging Face transformers on the same GPU, the same
Llama-3-8B shapes (random bf16 weights made on the device), greedy decode
with its KV cache at each batch and one prefill -- the rows gpu_bench prints,
measured the way a user of transformers would run them (eager, model.forward
per step).

    python bench/gpu_bench_hf.py [--batches 1,8,64] [--steps 32] [--prefill 2048]
"""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--prefill", type=int, default=2048)
    args = ap.parse_args()

    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                         rope_theta=500000.0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    import transformers
    print(f"peer: transformers {transformers.__version__}, torch {torch.__version__}, eager")

    @torch.inference_mode()
    def decode(batch):
        ids = torch.randint(3, config.vocab_size, (batch, 32), device="cuda")
        out = model(ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        nxt.cpu()
        return batch * args.steps / (time.perf_counter() - t0)

    decode(1)  # warm-up
    print("\n| measure (transformers) | value |\n|---|---|")
    for b in [int(x) for x in args.batches.split(",")]:
        print(f"| decode batch {b} | {decode(b):.1f} tokens/s |", flush=True)
    best = 1e30
    with torch.inference_mode():
        for _ in range(3):
            ids = torch.randint(3, config.vocab_size, (1, args.prefill), device="cuda")
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                model(ids, use_cache=True, logits_to_keep=1).logits.cpu()
            except TypeError:  # transformers before logits_to_keep
                model(ids, use_cache=True).logits[:, -1].cpu()
            best = min(best, time.perf_counter() - t0)
    print(f"| prefill {args.prefill} tokens | {args.prefill / best:.0f} tokens/s |")


if __name__ == "__main__":
    main()
