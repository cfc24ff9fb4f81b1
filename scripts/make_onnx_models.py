#!/usr/bin/python3
"""Build the small ONNX test models used by tests/onnx_import_test.cpp.

Runs with Debian's python3 plus python3-torch and python3-torchvision (no pip):

    /usr/bin/python3 scripts/make_onnx_models.py [--out tests/data/onnx]

For every model it writes
    <name>.onnx      the model exported by torch.onnx.export
    <name>.ref.bin   float32 little-endian: for each case, the input (NCHW, batch 1)
                     followed by torch's output
    <name>.ref.json  what the .bin holds (shapes, number of cases) plus the number of
                     multiply-accumulates and parameters of the conv/linear layers as
                     counted from torch, for cross-checking the importer.

Weights are random but deterministic (torch.manual_seed). BatchNorm statistics are
made non-trivial: running mean/var are first measured on a random batch (so that
activations stay in a sane range through deep nets), then perturbed, and gamma/beta
are drawn at random. Everything runs on the CPU in float32.
"""

import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import mnasnet as tv_mnasnet
from torchvision.models import mobilenetv2 as tv_mobilenetv2
from torchvision.models import mobilenetv3 as tv_mobilenetv3
from torchvision.models import squeezenet as tv_squeezenet
from torchvision.models.resnet import BasicBlock

NUM_CLASSES = 10
CASES = 2


# --------------------------------------------------------------------------- models

class SqueezeNetMini(nn.Module):
    """SqueezeNet 1.1 layout (fire modules, ceil-mode max pools, conv classifier)
    at roughly half the channels, so the file stays well under 2 MB."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        Fire = tv_squeezenet.Fire
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(32, 8, 32, 32),
            Fire(64, 8, 32, 32),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(128, 24, 96, 96),
            Fire(192, 24, 96, 96),
            Fire(192, 32, 128, 128),
            Fire(256, 32, 128, 128),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5),
            nn.Conv2d(256, num_classes, kernel_size=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        with torch.no_grad():  # logits of order 1 rather than 0.05
            self.classifier[1].weight.mul_(8.0)

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class SmallResNet(nn.Module):
    """ResNet with torchvision's BasicBlock, few channels: stem conv + max pool with
    padding, identity and projection shortcuts, global pool, fc."""

    def __init__(self, widths=(16, 32, 64, 96), blocks=(2, 1, 1, 1), num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        layers = []
        inplanes = widths[0]
        for i, (planes, n) in enumerate(zip(widths, blocks)):
            stride = 1 if i == 0 else 2
            for j in range(n):
                down = None
                s = stride if j == 0 else 1
                if s != 1 or inplanes != planes:
                    down = nn.Sequential(
                        nn.Conv2d(inplanes, planes, 1, stride=s, bias=False),
                        nn.BatchNorm2d(planes),
                    )
                layers.append(BasicBlock(inplanes, planes, s, down))
                inplanes = planes
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class MatMulHead(nn.Module):
    """y = x @ W + b with W stored [in][out]: exports as MatMul followed by Add."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) / n_in ** 0.5)
        self.bias = nn.Parameter(torch.randn(n_out) * 0.1)

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


class TinyNet(nn.Module):
    """Hand-made net for the corners the torchvision models do not reach: dilation,
    asymmetric zero padding, grouped (not depthwise) conv, average pool with and
    without count_include_pad, ReduceMean + per-channel Mul, scalar Mul/Add, concat,
    max pool with padding, view(size(0), -1) shape arithmetic, MatMul + Add, Softmax."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=2, dilation=2)
        self.bn1 = nn.BatchNorm2d(16)
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))  # left, right, top, bottom
        self.conv2 = nn.Conv2d(16, 24, 3, stride=2, padding=0, groups=4, bias=False)
        self.bn2 = nn.BatchNorm2d(24)
        self.pool_excl = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.dw = nn.Conv2d(24, 24, 3, padding=1, groups=24, bias=False)
        self.bn3 = nn.BatchNorm2d(24)
        self.pool_incl = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True)
        self.se_fc = nn.Conv2d(48, 48, 1)
        self.conv3 = nn.Conv2d(48, 32, (3, 1), stride=1, padding=(1, 0))
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.head = MatMulHead(32 * 4 * 4, 32)
        self.fc = nn.Linear(32, num_classes)
        with torch.no_grad():  # spread the softmax so that errors are not hidden
            self.fc.weight.mul_(30.0)

    def forward(self, x):
        x = F.relu6(self.bn1(self.conv1(x)))                    # 16x32x32, dilation 2
        x = F.hardswish(self.bn2(self.conv2(self.pad(x))))      # 24x16x16, groups 4
        a = self.pool_excl(x)                                   # count_include_pad=False
        b = torch.sigmoid(self.bn3(self.dw(x)))                 # depthwise
        x = torch.cat([a, b], dim=1)                            # 48x16x16
        x = self.pool_incl(x)                                   # 48x8x8, count_include_pad
        s = x.mean((2, 3), keepdim=True)                        # ReduceMean -> GAP
        s = F.hardsigmoid(self.se_fc(s))
        x = x * s                                               # per-channel Mul
        x = x * 0.5 + 0.25                                      # scalar Mul, Add
        x = F.relu(self.conv3(x))                               # 32x8x8, 3x1 kernel
        x = self.maxpool(x)                                     # 32x4x4
        x = x.reshape(x.size(0), -1)                            # Shape/Gather/.../Reshape
        x = F.relu(self.head(x))                                # MatMul + Add
        return F.softmax(self.fc(x), dim=1)


def channel_shuffle(x, groups):
    """ShuffleNet's shuffle: view the channels as [groups, C/groups], swap the two, flatten."""
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    """One ShuffleNetV2 unit (Ma et al. 2018, as torchvision lays it out): with stride 1 the
    input is halved, one half passes, the other goes 1x1 - depthwise 3x3 - 1x1; with stride 2
    both halves are computed from the whole input. The halves are joined and shuffled."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        half = cout // 2

        def bn_conv(a, b, k, s, groups, relu):
            layers = [nn.Conv2d(a, b, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(b)]
            return layers + ([nn.ReLU(inplace=True)] if relu else [])

        if stride > 1:
            self.left = nn.Sequential(*bn_conv(cin, cin, 3, stride, cin, False), *bn_conv(cin, half, 1, 1, 1, True))
        else:
            self.left = nn.Sequential()
        right_in = cin if stride > 1 else half
        self.right = nn.Sequential(*bn_conv(right_in, half, 1, 1, 1, True), *bn_conv(half, half, 3, stride, half, False),
                                   *bn_conv(half, half, 1, 1, 1, True))

    def forward(self, x):
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            y = torch.cat((a, self.right(b)), dim=1)
        else:
            y = torch.cat((self.left(x), self.right(x)), dim=1)
        return channel_shuffle(y, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 x0.5 (channels 24-48-96-192-1024, units 4-8-4), written out here."""

    def __init__(self, widths=(24, 48, 96, 192, 1024), repeats=(4, 8, 4), num_classes=NUM_CLASSES):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        units, cin = [], widths[0]
        for cout, n in zip(widths[1:4], repeats):
            units.append(ShuffleUnit(cin, cout, 2))
            units += [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
            cin = cout
        self.units = nn.Sequential(*units)
        self.head = nn.Sequential(nn.Conv2d(cin, widths[4], 1, bias=False), nn.BatchNorm2d(widths[4]), nn.ReLU(inplace=True))
        self.fc = nn.Linear(widths[4], num_classes)

    def forward(self, x):
        x = self.head(self.units(self.stem(x)))
        return self.fc(x.mean([2, 3]))


class SliceNet(nn.Module):
    """Slice and Split on channels and spatially: chunk, split with uneven parts, a channel
    slice, a strided spatial slice (x[..., 1::2, ::2]) and a crop."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 24, 3, padding=1)
        self.conv2 = nn.Conv2d(12, 16, 3, padding=1)
        self.proj = nn.Conv2d(8, 16, 1)
        self.conv3 = nn.Conv2d(16 + 7, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 + 5, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))                       # 24x16x16
        a, b = x.chunk(2, dim=1)                        # Split on channels: 12 + 12
        y = F.relu(self.conv2(a) + self.proj(b[:, 2:10]))  # a channel slice
        p, q, r = torch.split(y, [7, 4, 5], dim=1)      # uneven Split
        z = torch.cat((p, y), dim=1)[:, :, 1::2, ::2]   # strided spatial slice: 23x8x8
        z = F.relu(self.conv3(z))                       # 16x8x8
        c = z[:, :, 2:6, 1:7]                           # crop: 16x4x6
        return self.fc(torch.cat((c.mean([2, 3]), z.mean([2, 3]), r.mean([2, 3])), dim=1))


class ActNet(nn.Module):
    """LeakyRelu, Tanh, PRelu with one slope per channel and with a single slope."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 24, 3, padding=1)
        self.prelu_c = nn.PReLU(24)
        self.conv3 = nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24)
        self.prelu_1 = nn.PReLU()
        self.conv4 = nn.Conv2d(24, 32, 1)
        self.fc = nn.Linear(32, num_classes)
        with torch.no_grad():
            self.prelu_c.weight.copy_(torch.linspace(-0.5, 0.8, 24))

    def forward(self, x):
        x = F.leaky_relu(self.conv1(x), 0.1)
        x = self.prelu_c(self.conv2(x))
        x = self.prelu_1(self.conv3(x))
        x = torch.tanh(self.conv4(x))
        return self.fc(x.mean([2, 3]))


class ShuffleOnly(nn.Module):
    """Channel shuffles with 2, 3 and 4 groups between convolutions."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 24, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(24, 24, 3, padding=1, groups=4)
        self.conv3 = nn.Conv2d(24, 24, 3, padding=1, groups=3)
        self.fc = nn.Linear(24, num_classes)

    def forward(self, x):
        x = channel_shuffle(F.relu(self.conv1(x)), 2)
        x = channel_shuffle(F.relu(self.conv2(x)), 3)
        x = channel_shuffle(F.relu(self.conv3(x)), 4)
        return self.fc(x.mean([2, 3]))
class TransposeNet(nn.Module):
    """General Transposes between convolutions on non-square maps: H and W swapped,
    C and H swapped, and both 3-cycles of (C, H, W)."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=(1, 2), padding=1)    # 8x24x12
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)                  # after H<->W: 16x12x24
        self.conv3 = nn.Conv2d(12, 8, 3, padding=1)                  # after C<->H: 8x16x24
        self.conv4 = nn.Conv2d(24, 16, 3, stride=2, padding=1)       # after (W,C,H): 16x4x8
        self.conv5 = nn.Conv2d(4, 8, 1)                              # after (H,W,C): 8x8x16
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x.transpose(2, 3)))
        x = F.relu(self.conv3(x.permute(0, 2, 1, 3)))
        x = F.relu(self.conv4(x.permute(0, 3, 1, 2)))
        x = F.relu(self.conv5(x.permute(0, 2, 3, 1)))
        return self.fc(x.mean([2, 3]))


class UNetSmall(nn.Module):
    """A small FPN / U-Net: strided encoder, a top-down path with nearest
    Resize (asymmetric, floor) and lateral adds, ConvTranspose up (2x2 stride 2;
    3x3 stride 2 pad 1 output_padding 1 in 2 groups), bilinear Resize in both
    torch modes (pytorch_half_pixel, align_corners), a per-pixel sigmoid map."""

    def __init__(self):
        super().__init__()

        def cbr(cin, cout, s):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

        self.e1 = cbr(3, 8, 1)      # 8x32x32
        self.e2 = cbr(8, 16, 2)     # 16x16x16
        self.e3 = cbr(16, 24, 2)    # 24x8x8
        self.e4 = cbr(24, 32, 2)    # 32x4x4
        self.l4 = nn.Conv2d(32, 16, 1)
        self.l3 = nn.Conv2d(24, 16, 1)
        self.l2 = nn.Conv2d(16, 16, 1)
        self.up2 = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, 2), nn.BatchNorm2d(8), nn.ReLU())
        self.up3 = nn.ConvTranspose2d(16, 8, 3, 2, padding=1, output_padding=1, groups=2)
        self.head = nn.Conv2d(32, 2, 3, 1, 1)

    def forward(self, x):
        c1 = self.e1(x)
        c2 = self.e2(c1)
        c3 = self.e3(c2)
        c4 = self.e4(c3)
        p4 = self.l4(c4)                                                    # 16x4x4
        p3 = self.l3(c3) + F.interpolate(p4, scale_factor=2, mode="nearest")  # 16x8x8
        p2 = self.l2(c2) + F.interpolate(p3, scale_factor=2, mode="bilinear", align_corners=False)
        u1 = self.up2(p2)                                                   # 8x32x32
        u2 = self.up3(F.interpolate(p3, scale_factor=2, mode="bilinear", align_corners=True))  # 8x32x32
        u3 = F.interpolate(p4, scale_factor=8, mode="nearest")              # 16x32x32
        return torch.sigmoid(self.head(torch.cat([u1, u2, u3], dim=1)))     # 2x32x32


class ScalarAffine(nn.Module):
    """y = scale * x + bias with one learnt scalar each (PP-OCRv4's backbone,
    PPLCNetV3, puts one after its convolutions and its activations)."""

    def __init__(self, scale, bias):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([scale]))
        self.bias = nn.Parameter(torch.tensor([bias]))

    def forward(self, x):
        return self.scale * x + self.bias


def hardswish_ops(x):
    """Hardswish written out as PP-OCRv4's export has it: Add, Clip, Mul, Div."""
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


class LCBlock(nn.Module):
    """A PPLCNetV3-like block: depthwise conv + BN, affine, hardswish, affine;
    optional squeeze-excite (hardsigmoid); pointwise conv + BN, affine,
    hardswish, affine; with `residual`, the input added and a per-channel BN
    after two affines (they compose with it, as the importer must see)."""

    def __init__(self, cin, cout, stride, se=False, residual=False):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.a1, self.b1 = ScalarAffine(1.1, 0.05), ScalarAffine(0.9, -0.02)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, 4, 1), nn.ReLU(), nn.Conv2d(4, cin, 1),
                                nn.Hardsigmoid()) if se else None
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.a2, self.b2 = ScalarAffine(0.95, 0.1), ScalarAffine(1.05, 0.03)
        self.residual = residual
        if residual:
            self.r1, self.r2 = ScalarAffine(0.8, 0.01), ScalarAffine(1.2, -0.05)
            self.bn3 = nn.BatchNorm2d(cout)

    def forward(self, x):
        y = self.b1(hardswish_ops(self.a1(self.bn1(self.dw(x)))))
        if self.se is not None:
            y = y * self.se(y)
        y = self.b2(hardswish_ops(self.a2(self.bn2(self.pw(y)))))
        if self.residual:
            y = self.bn3(self.r2(self.r1(x + y)))
        return y


class LCNetMini(nn.Module):
    """Four LCBlocks after a strided stem, a per-channel BN after the last
    activation (a table per channel), global pool and a linear head."""

    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8))
        self.stem_a = ScalarAffine(1.0, 0.1)
        self.blocks = nn.Sequential(LCBlock(8, 16, 1), LCBlock(16, 24, 2, se=True), LCBlock(24, 24, 1, residual=True),
                                    LCBlock(24, 32, 2))
        self.post_bn = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.blocks(hardswish_ops(self.stem_a(self.stem(x))))
        return self.fc(self.post_bn(x).mean([2, 3]))


class RSELayer(nn.Module):
    """PP-OCRv4's neck layer: a convolution, then a squeeze-excite gate added
    back to its input, y + y * hardsigmoid(...) (the importer folds it to one
    Mul by the gate plus one)."""

    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, 1, k // 2, bias=False)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, max(cout // 4, 2), 1), nn.ReLU(),
                                nn.Conv2d(max(cout // 4, 2), cout, 1), nn.Hardsigmoid())

    def forward(self, x):
        y = self.conv(x)
        return y + y * self.se(y)


class RSEFPN(nn.Module):
    """A small PP-OCRv4 detector neck and head: four strided stages, an RSE
    layer per level to one width, a top-down path (nearest Resize and Add),
    3x3 RSE layers to a quarter of it, every level upsampled to the largest
    and concatenated, a convolution and two ConvTranspose steps to a sigmoid
    map of the input's size."""

    def __init__(self):
        super().__init__()

        def cbh(cin, cout, s):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout), nn.Hardswish())

        self.s2 = nn.Sequential(cbh(3, 8, 2), cbh(8, 8, 2))  # 8 x H/4
        self.s3, self.s4, self.s5 = cbh(8, 12, 2), cbh(12, 16, 2), cbh(16, 24, 2)
        self.ins = nn.ModuleList(RSELayer(c, 16, 1) for c in (8, 12, 16, 24))
        self.inp = nn.ModuleList(RSELayer(16, 4, 3) for _ in range(4))
        self.head = nn.Sequential(nn.Conv2d(16, 4, 3, 1, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.ConvTranspose2d(4, 4, 2, 2), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.ConvTranspose2d(4, 1, 2, 2))

    def forward(self, x):
        c2 = self.s2(x)
        c3 = self.s3(c2)
        c4 = self.s4(c3)
        c5 = self.s5(c4)
        in2, in3, in4, in5 = (m(c) for m, c in zip(self.ins, (c2, c3, c4, c5)))
        out4 = in4 + F.interpolate(in5, scale_factor=2, mode="nearest")
        out3 = in3 + F.interpolate(out4, scale_factor=2, mode="nearest")
        out2 = in2 + F.interpolate(out3, scale_factor=2, mode="nearest")
        p5, p4, p3, p2 = (m(o) for m, o in zip(self.inp[::-1], (in5, out4, out3, out2)))
        p5 = F.interpolate(p5, scale_factor=8, mode="nearest")
        p4 = F.interpolate(p4, scale_factor=4, mode="nearest")
        p3 = F.interpolate(p3, scale_factor=2, mode="nearest")
        return torch.sigmoid(self.head(torch.cat([p5, p4, p3, p2], dim=1)))


def mobilenet_v3_small_half():
    setting, last = tv_mobilenetv3._mobilenet_v3_conf(
        "mobilenet_v3_small", width_mult=0.5, reduced_tail=True)
    return tv_mobilenetv3.MobileNetV3(setting, last, num_classes=NUM_CLASSES)


# name -> (constructor, input size, opset)
MODELS = {
    "mobilenet_v2": (lambda: tv_mobilenetv2.MobileNetV2(num_classes=NUM_CLASSES, width_mult=0.35), 96, 13),
    "mobilenet_v3_small": (mobilenet_v3_small_half, 64, 14),
    "squeezenet_mini": (SqueezeNetMini, 64, 13),
    "resnet_small": (SmallResNet, 64, 13),
    "mnasnet": (lambda: tv_mnasnet.MNASNet(0.25, num_classes=NUM_CLASSES), 64, 13),
    "tiny": (TinyNet, 32, 13),
    "tiny_opset10": (TinyNet, 32, 10),
    "shufflenet_v2": (ShuffleNetV2, 96, 13),
    "slices": (SliceNet, 16, 13),
    "slices_opset11": (SliceNet, 16, 11),
    "activations": (ActNet, 32, 13),
    "shuffle": (ShuffleOnly, 32, 13),
    "unet_small": (UNetSmall, 32, 13),
    "transpose": (TransposeNet, 24, 13),
    "lcnet": (LCNetMini, 32, 13),
    "rsefpn": (RSEFPN, 64, 13),
    "unet_small_dyn": (UNetSmall, 32, 13),  # symbolic H and W (dynamic sizes)
}


# --------------------------------------------------------------------------- helpers

def randomise_batchnorm(model, size, gen):
    """Measure BN statistics on a random batch, then perturb them and draw gamma/beta."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: one batch sets the stats exactly
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, size, size, generator=gen))
    with torch.no_grad():
        for m in bns:
            c = m.num_features
            m.running_mean.add_(0.1 * torch.randn(c, generator=gen))
            m.running_var.mul_(0.75 + 0.5 * torch.rand(c, generator=gen)).add_(1e-3)
            m.weight.copy_(0.5 + torch.rand(c, generator=gen))
            m.bias.copy_(0.2 * torch.randn(c, generator=gen))
    model.eval()


def count_layers(model, size):
    """MACs and parameters of Conv2d / Linear / MatMulHead, as the importer should see."""
    macs = [0]
    params = [0]

    def hook(mod, inp, out):
        if isinstance(mod, nn.ConvTranspose2d):  # core/op.h: the most taps one output reads
            kh, kw = mod.weight.shape[2], mod.weight.shape[3]
            sh, sw = mod.stride
            macs[0] += out.numel() * (mod.in_channels // mod.groups) * (-(-kh // sh)) * (-(-kw // sw))
        elif isinstance(mod, nn.Conv2d):
            k = mod.weight.shape[1] * mod.weight.shape[2] * mod.weight.shape[3]
            macs[0] += out.numel() * k
        elif isinstance(mod, nn.Linear):
            macs[0] += mod.in_features * mod.out_features
        elif isinstance(mod, MatMulHead):
            macs[0] += mod.weight.numel()
        else:
            return
        params[0] += sum(p.numel() for p in mod.parameters(recurse=False))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, MatMulHead))]
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    for h in handles:
        h.remove()
    return macs[0], params[0]


def build(name, out_dir):
    ctor, size, opset = MODELS[name]
    seed = sum(ord(ch) for ch in name.replace("_opset10", "").replace("_opset11", ""))
    seed = sum(ord(ch) for ch in name.replace("_opset10", "").replace("_dyn", ""))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    model = ctor()
    randomise_batchnorm(model, size, gen)

    onnx_path = os.path.join(out_dir, name + ".onnx")
    dummy = torch.randn(1, 3, size, size, generator=gen)
    torch.onnx.export(model, dummy, onnx_path, opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      do_constant_folding=True,
                      dynamic_axes=({"input": {2: "H", 3: "W"}, "output": {2: "H", 3: "W"}}
                                    if name.endswith("_dyn") else None),
                      # PRESERVE keeps BatchNormalization nodes (EVAL would fold them
                      # into the convs at export; the importer must see them raw).
                      training=torch.onnx.TrainingMode.PRESERVE)

    inputs = [torch.randn(1, 3, size, size, generator=gen) for _ in range(CASES)]
    outputs = []
    with torch.no_grad():
        for x in inputs:
            outputs.append(model(x).contiguous())
    blob = bytearray()
    for x, y in zip(inputs, outputs):
        blob += x.numpy().astype("<f4").tobytes()
        blob += y.numpy().astype("<f4").tobytes()
    with open(os.path.join(out_dir, name + ".ref.bin"), "wb") as f:
        f.write(blob)

    macs, params = count_layers(model, size)
    meta = {
        "model": name + ".onnx",
        "data": name + ".ref.bin",
        "layout": "per case: input float32[input_shape] then output float32[output_shape]",
        "cases": CASES,
        "input_shape": list(inputs[0].shape),
        "output_shape": list(outputs[0].shape),
        "opset": opset,
        "conv_linear_macs": macs,
        "conv_linear_params": params,
        # layer counts the imported graph must show (Conv / BatchNorm / Gemm nodes)
        "counts": {
            "Conv": sum(isinstance(m, nn.Conv2d) for m in model.modules()),
            "BatchNorm": sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()),
            "Gemm": sum(isinstance(m, (nn.Linear, MatMulHead)) for m in model.modules()),
        },
        "softmax_output": name.startswith("tiny"),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    with open(os.path.join(out_dir, name + ".ref.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("%-20s %6d bytes onnx, input %dx%d, opset %d, %d MACs, %d params, |y|max %.3g"
          % (name, os.path.getsize(onnx_path), size, size, opset, macs, params,
             max(float(y.abs().max()) for y in outputs)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "onnx"))
    ap.add_argument("names", nargs="*", help="models to build (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or MODELS:
        if name not in MODELS:
            sys.exit("unknown model '%s' (have: %s)" % (name, ", ".join(MODELS)))
        # models with a symbolic input size live apart: the per-model tests
        # of tests/data/onnx run each file at its stored size
        out = os.path.join(args.out, "..", "onnx_dyn") if name.endswith("_dyn") else args.out
        os.makedirs(out, exist_ok=True)
        build(name, out)


if __name__ == "__main__":
    main()
