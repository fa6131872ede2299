"""PyTorch's own definitions of the engine's models, block for block the same
(kuangliu/pytorch-cifar ResNet18 and MobileNetV2, Flotilla's small CNN, its
small ViT, the RoBERTa-style Transformer encoder of
engine/src/models/transformer_encoder.cpp),
so that benchmarks compare the same arithmetic."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self, channels=1, height=28, width=28, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * (height // 4) * (width // 4), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class BasicBlock(nn.Module):
    def __init__(self, inp, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or inp != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, channels=3, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, inp = [], 64
        for i, planes in enumerate([64, 128, 256, 512]):
            for j in range(2):
                layers.append(BasicBlock(inp, planes, 2 if i > 0 and j == 0 else 1))
                inp = planes
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(512, classes)

    def forward(self, x):
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


class InvertedResidual(nn.Module):
    """engine/src/models/mobilenet_v2.cpp: expand, depthwise, project; a
    shortcut (1x1 conv + BN where the width changes) at stride 1 only."""

    def __init__(self, inp, out, expansion, stride):
        super().__init__()
        planes = expansion * inp
        self.stride = stride
        self.expand = nn.Conv2d(inp, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.depthwise = nn.Conv2d(planes, planes, 3, stride, 1, groups=planes, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.project = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential()
        if stride == 1 and inp != out:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, out, 1, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        out = F.relu(self.bn1(self.expand(x)))
        out = F.relu(self.bn2(self.depthwise(out)))
        out = self.bn3(self.project(out))
        return out if self.stride != 1 else out + self.shortcut(x)


class MobileNetV2(nn.Module):
    """The CIFAR variant (stride 1 stem and first two stages), as the engine's."""

    STAGES = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
              (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, channels=3, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        layers, inp = [], 32
        for expansion, out, count, stride in self.STAGES:
            for i in range(count):
                layers.append(InvertedResidual(inp, out, expansion, stride if i == 0 else 1))
                inp = out
        self.layers = nn.Sequential(*layers)
        self.conv2 = nn.Conv2d(320, 1280, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(1280)
        self.linear = nn.Linear(1280, classes)

    def forward(self, x):
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        out = F.relu(self.bn2(self.conv2(out)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


class VitBlock(nn.Module):
    """engine/src/models/vit.cpp: pre-norm, x + attention(LN(x)), x + MLP(LN(x))."""

    def __init__(self, dim, heads, mlp_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.attention = SelfAttention(dim, heads)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, dim)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Vit(nn.Module):
    """The engine's ViT (its small defaults: patch 4, dim 128, depth 6, heads 4,
    mlp 256): strided-conv patches, class token, learned positions, head on the
    class token's LayerNorm."""

    def __init__(self, channels=3, height=32, width=32, classes=10, patch=4, dim=128, depth=6,
                 heads=4, mlp_dim=256):
        super().__init__()
        self.project = nn.Conv2d(channels, dim, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.position = nn.Parameter(torch.randn(1, 1 + (height // patch) * (width // patch), dim) * 0.02)
        self.blocks = nn.Sequential(*[VitBlock(dim, heads, mlp_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.project(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], 1) + self.position
        return self.fc(self.norm(self.blocks(x)[:, 0]))


class SelfAttention(nn.Module):
    """engine/src/models/attention.cpp: one qkv projection, matmul attention."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        head_dim = dim // self.heads
        qkv = self.qkv(x).view(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q = qkv[0] * (1.0 / math.sqrt(head_dim))
        weights = torch.softmax(q @ qkv[1].transpose(-2, -1), -1)
        context = weights @ qkv[2]
        return self.out(context.transpose(1, 2).reshape(batch, length, dim))


class TokenEmbedding(nn.Module):
    def __init__(self, vocab, hidden, max_positions):
        super().__init__()
        self.token = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(1, hidden)  # RoBERTa keeps one token type
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, ids):
        positions = torch.arange(2, 2 + ids.shape[1])  # RoBERTa counts positions from 2
        return self.norm(self.token(ids) + self.position(positions) + self.token_type.weight[0])


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-5)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))


class ClassificationHead(nn.Module):
    def __init__(self, hidden, classes):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.out(torch.tanh(self.dense(x[:, 0])))


def transformer_encoder(vocab, hidden, layers, heads, ffn, max_positions, classes):
    """The engine's block list: embedding, `layers` encoder layers, head."""
    return nn.Sequential(TokenEmbedding(vocab, hidden, max_positions),
                         *[EncoderLayer(hidden, heads, ffn) for _ in range(layers)],
                         ClassificationHead(hidden, classes))


def build(name, shape, classes, transformer=None):
    if name == "small_cnn":
        return SmallCNN(shape[0], shape[1], shape[2], classes)
    if name == "resnet18":
        return ResNet18(shape[0], classes)
    if name == "mobilenet_v2":
        return MobileNetV2(shape[0], classes)
    if name == "vit":
        return Vit(shape[0], shape[1], shape[2], classes)
    if name == "transformer_encoder":
        t = transformer
        return transformer_encoder(t["vocab"], t["hidden"], t["layers"], t["heads"], t["ffn"],
                                   t["max_positions"], classes)
    raise ValueError(f"no peer model for {name}")


# The engine's models are block lists (engine/src/models/*.cpp) that a pipeline
# cuts at block boundaries; these wrap the modules of a model built above into
# the same blocks, sharing its parameters, so that running them in order is the
# model's forward.
#   small_cnn: conv1 (conv, ReLU, pool), conv2 (same), fc1 (flatten, linear, ReLU), fc2
#   resnet18:  stem (conv, BN, ReLU), 8 BasicBlocks, head (pool, flatten, linear)
class ConvPool(nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        return F.max_pool2d(F.relu(self.conv(x)), 2)


class Dense(nn.Module):
    def __init__(self, fc):
        super().__init__()
        self.fc = fc

    def forward(self, x):
        return F.relu(self.fc(x.flatten(1)))


class ConvBnRelu(nn.Module):
    def __init__(self, conv, bn):
        super().__init__()
        self.conv, self.bn = conv, bn

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class PoolClassifier(nn.Module):
    def __init__(self, fc):
        super().__init__()
        self.fc = fc

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def blocks(model):
    """The engine's block list of a model from build(), as an nn.Sequential."""
    if isinstance(model, SmallCNN):
        return nn.Sequential(ConvPool(model.conv1), ConvPool(model.conv2), Dense(model.fc1), model.fc2)
    if isinstance(model, ResNet18):
        return nn.Sequential(ConvBnRelu(model.conv1, model.bn1), *model.layers,
                             PoolClassifier(model.linear))
    raise ValueError(f"no block list for {type(model).__name__}")
