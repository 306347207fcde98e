"""The convolutional Q-network of Mnih et al. (2015), used unchanged by Gorila DQN."""

from __future__ import annotations

import torch
from torch import nn

from gorila.nets.mlp import mlp


class NatureCNN(nn.Module):
    """Stacked 84×84 frames -> one Q-value per action::

        net = NatureCNN(n_actions=6)                     # 1.69 M parameters
        q = net(torch.zeros(32, 4, 84, 84, dtype=torch.uint8))   # (32, 6)

    conv 32 8×8 stride 4 -> conv 64 4×4 stride 2 -> conv 64 3×3 stride 1 -> fc 512 -> n_actions,
    ReLU between layers. Input is uint8 pixels and is scaled by 1/255 here, so replay and the
    wire carry bytes, a quarter of float32. With ``dueling`` (Wang et al. 2016) the convolutions
    feed two 512-unit streams, a state value and action advantages: ``Q = V + A − mean(A)``.
    """

    def __init__(self, n_actions: int, in_channels: int = 4, image_size: tuple[int, int] = (84, 84),
                 dueling: bool = False):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_features = self.features(torch.zeros(1, in_channels, *image_size)).shape[1]
        self.head = (DuelingHead(n_features, (512,), n_actions) if dueling
                     else nn.Sequential(nn.Linear(n_features, 512), nn.ReLU(), nn.Linear(512, n_actions)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs.float() / 255.0))


class DuelingHead(nn.Module):
    """Features -> Q-values through a value stream and an advantage stream (Wang et al. 2016)::

        head = DuelingHead(in_dim=3136, hidden=(512,), n_actions=6)
        q = head(features)     # V(s) + A(s, a) - mean_a A(s, a)

    Subtracting the mean advantage makes V and A identifiable without changing the greedy action.
    """

    def __init__(self, in_dim: int, hidden: tuple[int, ...], n_actions: int):
        super().__init__()
        self.value = mlp(in_dim, hidden, 1)
        self.advantage = mlp(in_dim, hidden, n_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(dim=1, keepdim=True)
