#!/usr/bin/env python3
"""Golden dequantization values for tests/core/gguf/dequantize_test.cpp.

For each ggml type, writes a few blocks of random bytes (with the f16 scale
fields replaced by moderate values so no block decodes to inf/NaN) and the
float32 values that the reference `gguf` Python package (gguf.quants.dequantize)
decodes them to. Run from anywhere:  python3 make_quant_golden.py
Output: quant_golden.json beside this script.
"""
import json
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

rng = np.random.default_rng(20240611)


def f16_bytes(x):
    return np.array([x], dtype=np.float16).tobytes()


def random_blocks(qtype, nblocks):
    """Random blocks; scale fields set to finite f16 values of either sign."""
    size = {T.Q4_0: 18, T.Q4_1: 20, T.Q8_0: 34, T.Q4_K: 144, T.Q6_K: 210}[qtype]
    out = bytearray()
    for _ in range(nblocks):
        b = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        scale = lambda: f16_bytes(rng.uniform(-0.1, 0.1))
        if qtype in (T.Q4_0, T.Q8_0):
            b[0:2] = scale()
        elif qtype == T.Q4_1:
            b[0:2] = scale()
            b[2:4] = scale()
        elif qtype == T.Q4_K:
            b[0:2] = scale()
            b[2:4] = scale()
        elif qtype == T.Q6_K:
            b[208:210] = scale()
        out += b
    return bytes(out)


def main():
    golden = {}
    for qtype, nblocks in [(T.Q4_0, 3), (T.Q4_1, 3), (T.Q8_0, 3), (T.Q4_K, 2), (T.Q6_K, 2)]:
        raw = random_blocks(qtype, nblocks)
        values = dequantize(np.frombuffer(raw, dtype=np.uint8), qtype).astype(np.float32)
        golden[qtype.name] = {"hex": raw.hex(), "values": [float(v) for v in values]}
    f16 = rng.standard_normal(40).astype(np.float16)
    golden["F16"] = {"hex": f16.tobytes().hex(),
                     "values": [float(v) for v in dequantize(np.frombuffer(f16.tobytes(), np.uint8), T.F16)]}
    bf16_raw = rng.integers(0, 65536, 40, dtype=np.uint16)
    bf16_raw[(bf16_raw & 0x7F80) == 0x7F80] &= 0xBFFF  # no inf/NaN exponents
    golden["BF16"] = {"hex": bf16_raw.tobytes().hex(),
                      "values": [float(v) for v in dequantize(np.frombuffer(bf16_raw.tobytes(), np.uint8), T.BF16)]}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
