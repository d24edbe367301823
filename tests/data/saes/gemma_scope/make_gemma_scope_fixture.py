"""Tiny archives in Gemma Scope's layout (google/gemma-scope-*: params.npz with
W_enc, W_dec, b_enc, b_dec, threshold), written by NumPy itself, and what
Gemma Scope's own JumpReLU SAE computes on them (its tutorial's formula:
acts = (pre > threshold) * relu(pre), pre = x @ W_enc + b_enc; recon =
acts @ W_dec + b_dec), for tests/models/attached/gemma_scope_test.cpp.

Run by developers (any Python with numpy and safetensors, e.g.
~/.cache/nnsight/fixture-venv-v5/bin/python):
  python tests/data/saes/gemma_scope/make_gemma_scope_fixture.py
"""
import os
import zipfile

import numpy as np
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
d_in, d_sae = 8, 16
params = {
    "W_enc": (0.5 * rng.standard_normal((d_in, d_sae))).astype(np.float32),
    "W_dec": (0.5 * rng.standard_normal((d_sae, d_in))).astype(np.float32),
    "b_enc": (0.1 * rng.standard_normal(d_sae)).astype(np.float32),
    "b_dec": (0.1 * rng.standard_normal(d_in)).astype(np.float32),
    "threshold": np.abs(0.3 * rng.standard_normal(d_sae)).astype(np.float32),
}
np.savez(os.path.join(here, "params.npz"), **params)
# The same arrays: compressed (refused), one in Fortran order and float16 (read), and a zip64 archive (read).
np.savez_compressed(os.path.join(here, "compressed.npz"), **params)
odd = dict(params)
odd["W_enc"] = np.asfortranarray(params["W_enc"])
odd["b_dec"] = params["b_dec"].astype(np.float16)
np.savez(os.path.join(here, "fortran_f16.npz"), **odd)
# zip64 records as an archive over 4 GiB has them (Gemma Scope's widest SAEs):
# the limit lowered so that every size and offset past 100 bytes takes them.
limit = zipfile.ZIP64_LIMIT
zipfile.ZIP64_LIMIT = 100
with zipfile.ZipFile(os.path.join(here, "zip64.npz"), "w", zipfile.ZIP_STORED) as z:
    for name, a in params.items():
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, a)
zipfile.ZIP64_LIMIT = limit

x = rng.standard_normal((5, d_in)).astype(np.float32)
pre = x @ params["W_enc"] + params["b_enc"]
acts = (pre > params["threshold"]) * np.maximum(pre, 0)
recon = acts @ params["W_dec"] + params["b_dec"]
assert (acts > 0).any() and (acts == 0).any()
save_file({"x": x, "acts": acts.astype(np.float32), "recon": recon.astype(np.float32),
           "b_dec_f16": params["b_dec"].astype(np.float16).astype(np.float32)},
          os.path.join(here, "reference.safetensors"))
print("wrote", sorted(f for f in os.listdir(here) if not f.endswith(".py")))
