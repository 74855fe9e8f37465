# Shared by the PyTorch peers of `train` (tests/bench/trainer_torch_ddp.py, scripts/gpu_torch_ddp.py):
# reads a ddp-shards dataset (docs/trainer.md#data-format: 32-byte header, float32 features,
# int32 labels) with numpy memmaps, and builds the same MLP as `train` (Linear-ReLU-...-Linear).
import json
import os

import numpy as np
import torch


def load_shards(data_dir):
    """Returns (x float32 [N, F], y int64 [N], classes) as CPU tensors."""
    index = json.load(open(os.path.join(data_dir, "index.json")))
    f = index["features"]
    xs, ys = [], []
    for shard in index["shards"]:
        n = shard["samples"]
        path = os.path.join(data_dir, shard["file"])
        xs.append(np.memmap(path, dtype="<f4", mode="r", offset=32, shape=(n, f)))
        ys.append(np.memmap(path, dtype="<i4", mode="r", offset=32 + 4 * n * f, shape=(n,)))
    x = torch.from_numpy(np.concatenate(xs))
    y = torch.from_numpy(np.concatenate(ys).astype(np.int64))
    return x, y, index["classes"]


def mlp(widths):
    """Linear-ReLU-...-Linear over `widths` (input, hidden..., classes), seeded like every rank."""
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    torch.manual_seed(0)
    return torch.nn.Sequential(*layers)
