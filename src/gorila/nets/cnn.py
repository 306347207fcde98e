"""The convolutional Q-network of Mnih et al. (2015), used unchanged by Gorila DQN."""

from __future__ import annotations

import torch
from torch import nn


class NatureCNN(nn.Module):
    """Stacked 84×84 frames -> one Q-value per action::

        net = NatureCNN(n_actions=6)                     # 1.69 M parameters
        q = net(torch.zeros(32, 4, 84, 84, dtype=torch.uint8))   # (32, 6)

    conv 32 8×8 stride 4 -> conv 64 4×4 stride 2 -> conv 64 3×3 stride 1 -> fc 512 -> n_actions,
    ReLU between layers. Input is uint8 pixels and is scaled by 1/255 here, so replay and the
    wire carry bytes, a quarter of float32.
    """

    def __init__(self, n_actions: int, in_channels: int = 4, image_size: tuple[int, int] = (84, 84)):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_features = self.features(torch.zeros(1, in_channels, *image_size)).shape[1]
        self.head = nn.Sequential(nn.Linear(n_features, 512), nn.ReLU(), nn.Linear(512, n_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs.float() / 255.0))
