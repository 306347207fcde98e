"""Multi-layer perceptrons for vector observations."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int | None = None,
        activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """``in_dim -> hidden[0] -> ... -> hidden[-1] (-> out_dim)``; an activation after every hidden layer.

    ``mlp(4, (64, 64), 2)`` is a CartPole Q-network; ``mlp(8, (128,))`` a torso whose output
    has ``128`` features.
    """
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        layers += [nn.Linear(width, h), activation()]
        width = h
    if out_dim is not None:
        layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)
