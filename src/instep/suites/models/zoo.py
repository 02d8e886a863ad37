"""The L6 models, built in code (no downloads): each a module and a batch maker.

Small on purpose: a CPU compile of forward and backward takes seconds, and on a device
they still exercise matmuls, convolutions, normalisation, attention, embeddings and a
loss. Nothing here measures or compares: see ``benchmark.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


class MLP(nn.Module):
    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, width),
            nn.GELU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.head(x.mean((2, 3)))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class EmbeddingClassifier(nn.Module):
    """Embedding + layernorm + mean pooling + cross-entropy loss (the output is the loss)."""

    def __init__(self, vocab: int = 1000, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 20)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.norm(self.embed(tokens)).mean(1))
        return F.cross_entropy(logits, labels)


@dataclass(frozen=True)
class ModelSpec:
    build: Callable[[], nn.Module]
    batch: Callable[[torch.Generator], list[Any]]
    atol: float = 1e-4
    rtol: float = 1e-4


MODELS: dict[str, ModelSpec] = {
    "mlp": ModelSpec(MLP, lambda g: [torch.randn(32, 64, generator=g)]),
    "cnn": ModelSpec(SmallCNN, lambda g: [torch.randn(8, 3, 32, 32, generator=g)]),
    "transformer_block": ModelSpec(
        TransformerBlock, lambda g: [torch.randn(4, 32, 64, generator=g)]
    ),
    "embedding_layernorm_loss": ModelSpec(
        EmbeddingClassifier,
        lambda g: [
            torch.randint(0, 1000, (16, 24), generator=g),
            torch.randint(0, 20, (16,), generator=g),
        ],
    ),
}
