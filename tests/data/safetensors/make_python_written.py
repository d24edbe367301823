#!/usr/bin/env python3
"""A .safetensors file written by the reference `safetensors` Python package,
for tests/core/safetensors/safetensors_test.cpp (reading a file this library
did not write). Values follow formulas the C++ test recomputes:
  f64  [2, 3]  = arange(6) * 0.5 - 1
  f32  [4]     = arange(4) ** 2 / 8
  f16  [3, 2]  = arange(6) - 2.5
  i64  [2]     = [-2**40, 2**40 + 7]
  i32  [3]     = [-7, 0, 2**31 - 1]
  i16  [2, 2]  = [[-300, 300], [0, 1]]
  i8   [5]     = arange(5) - 2
  u8   [4]     = [0, 1, 128, 255]
  bool [3]     = [True, False, True]
  empty [0, 3] (f32)
  scalar []    = 3.5 (f32)
with metadata {"format": "np", "source": "make_python_written.py"}.
"""
import os

import numpy as np
from safetensors.numpy import save_file

tensors = {
    "f64": (np.arange(6, dtype=np.float64) * 0.5 - 1).reshape(2, 3),
    "f32": np.arange(4, dtype=np.float32) ** 2 / 8,
    "f16": (np.arange(6, dtype=np.float16) - np.float16(2.5)).reshape(3, 2),
    "i64": np.array([-2**40, 2**40 + 7], dtype=np.int64),
    "i32": np.array([-7, 0, 2**31 - 1], dtype=np.int32),
    "i16": np.array([[-300, 300], [0, 1]], dtype=np.int16),
    "i8": np.arange(5, dtype=np.int8) - 2,
    "u8": np.array([0, 1, 128, 255], dtype=np.uint8),
    "bool": np.array([True, False, True]),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "scalar": np.array(3.5, dtype=np.float32),
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_written.safetensors")
save_file(tensors, path, metadata={"format": "np", "source": "make_python_written.py"})
print("wrote", path)
