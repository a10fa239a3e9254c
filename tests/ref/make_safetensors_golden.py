#!/usr/bin/env python3
"""Writes the safetensors golden files under tests/data/safetensors/ with the reference
writer (the `safetensors` Python package, Rust inside). tests/c/test_safetensors.c reads
them and checks that tr_st_write reproduces golden.safetensors byte for byte.

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install safetensors numpy
    /tmp/stvenv/bin/python tests/ref/make_safetensors_golden.py

Values follow simple formulas that the C test recomputes; keep the two in step."""
import json
import os

import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "safetensors")


def tensors():
    return {
        # mixed dtypes, names out of order: the writer sorts by dtype, then name
        "encoder.layer.0.weight": (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3),
        "encoder.layer.0.bias": np.array([0.25, -0.75, 3.0], dtype=np.float32),
        "embeddings.half": np.array([1.0, -2.0, 0.5, 65504.0], dtype=np.float16),
        "position_ids": np.array([[-2, 0, 7, 1 << 40]], dtype=np.int64),
        "token_type": np.array([3, -4], dtype=np.int32),
        "double": np.array([np.pi], dtype=np.float64),
        "mask": np.array([True, False, True]),
        "bytes": np.arange(5, dtype=np.uint8),
        "scalar": np.array(42.0, dtype=np.float32),           # 0-d
        "empty": np.zeros((0, 3), dtype=np.float32),          # zero bytes
        "pooler.vægt": np.array([7.0], dtype=np.float32),     # non-ASCII name
        "ctl\x1bname": np.array([1, 2], dtype=np.int16),      # escaped as \u001b
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors(), os.path.join(OUT, "golden.safetensors"), metadata={"format": "pt"})

    # A sharded folder laid out as transformers writes one.
    shard_dir = os.path.join(OUT, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    a = {"layer.0.w": np.arange(4, dtype=np.float32), "layer.0.b": np.ones(2, dtype=np.float32)}
    b = {"layer.1.w": np.arange(3, dtype=np.int64)}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for part, name in zip((a, b), names):
        save_file(part, os.path.join(shard_dir, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in part})
    index = {"metadata": {"total_size": 4 * 4 + 2 * 4 + 3 * 8}, "weight_map": weight_map}
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
