#!/usr/bin/python3
"""Train the small MobileNetV2-style Fashion-MNIST classifier and export it to ONNX.

Runs with Debian's python3, python3-torch and python3-numpy (no pip) and the images of
Debian's dataset-fashion-mnist package:

    /usr/bin/python3 scripts/train_fashion_mnist.py [--out models/fashion-mnist/model.onnx]
        [--epochs 4] [--data /usr/share/datasets/fashion-mnist] [--steps N]

The network (1.53 M multiply-accumulates and 24,090 parameters per `tinysplit inspect`) is
MobileNetV2 in miniature: a 3x3 stride-2 stem, four inverted residual blocks (1x1 expansion,
3x3 depthwise, 1x1 linear projection, ReLU6, residual add when the shape allows), a 1x1 head
conv, global average pooling and a linear classifier. Input: one 28x28 grey channel, pixel / 255 (no other normalisation), NCHW,
batch 1 in the exported file (fixed size, so tinysplit runs it at 28x28).

Training is deterministic on the CPU: fixed seeds, deterministic algorithms, at most two
threads, a seeded shuffle. Only the 60,000 training images are used for training; the
10,000 test images are read only to print the final float accuracy. `--steps N` stops after
N optimiser steps (for quick smoke tests).
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    if magic >> 8 != 0x08 or ndim not in (1, 3):
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        sys.exit(f"{path}: truncated")
    return arr.reshape(dims)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(y.astype(np.int64))
    return x, y


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(inplace=True))
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 3),   # 14x14
            InvertedResidual(16, 24, 2, 3),   # 7x7
            InvertedResidual(24, 24, 1, 4),
            InvertedResidual(24, 48, 1, 4))
        self.head = nn.Sequential(nn.Conv2d(48, 96, 1, bias=False), nn.BatchNorm2d(96), nn.ReLU6(inplace=True))
        self.fc = nn.Linear(96, classes)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def accuracy(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default="models/fashion-mnist/model.onnx")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0 = all epochs)")
    ap.add_argument("--seed", type=int, default=20231)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    torch.use_deterministic_algorithms(True)

    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "test")
    model = Net()
    steps_per_epoch = (len(xtr) + args.batch - 1) // args.batch
    total = args.steps if args.steps > 0 else args.epochs * steps_per_epoch
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=total, pct_start=0.15)
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        loss_sum = 0.0
        for i in range(0, len(xtr), args.batch):
            if step >= total:
                break
            idx = perm[i:i + args.batch]
            xb = xtr[idx]
            # Light augmentation: horizontal flips (clothes are left-right symmetric classes).
            flip = torch.rand(len(idx), generator=gen) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            loss = F.cross_entropy(model(xb), ytr[idx], label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss)
            step += 1
        print(f"epoch {epoch + 1}: {step} steps, mean loss {loss_sum / max(1, steps_per_epoch):.4f}, "
              f"{time.time() - t0:.0f} s", flush=True)
        if step >= total:
            break
    acc = accuracy(model, xte, yte)
    print(f"float test accuracy (torch): {acc:.4f}", flush=True)

    model.eval()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), tmp, opset_version=13, input_names=["image"],
                      output_names=["logits"], do_constant_folding=True)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
