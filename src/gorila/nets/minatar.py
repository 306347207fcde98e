"""The MinAtar network of Young & Tian (2019): one small convolution over the 10×10 boolean grid.

Chosen for MinAtar observations (:func:`is_grid`: ``(channels, height, width)`` booleans) as the
Nature CNN is for Atari's stacked uint8 frames, by :func:`gorila.nets.q.make_q_network` and
:func:`gorila.nets.actor_critic_env.network_for`; the inference server builds it through the same
``network_fn``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.nets.actor_critic import value_head_groups
from gorila.nets.cnn import DuelingHead
from gorila.nets.flat import FlatParams
from gorila.nets.heads import CategoricalHead
from gorila.nets.numpy_conv import NumpyMinAtarNet

FILTERS = 16
HIDDEN = 128


def is_grid(space: gym.Space) -> bool:
    """Whether observations are MinAtar's kind: a ``(channels, height, width)`` grid of booleans."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.dtype == np.bool_


def _torso(in_channels: int, image_size: tuple[int, int]) -> tuple[nn.Sequential, int]:
    """conv 16 3×3 stride 1 → ReLU → flatten; and the number of features it gives (16·8·8 on 10×10)."""
    features = nn.Sequential(nn.Conv2d(in_channels, FILTERS, kernel_size=3, stride=1), nn.ReLU(), nn.Flatten())
    height, width = image_size
    return features, FILTERS * (height - 2) * (width - 2)


class MinAtarQNetwork(nn.Module):
    """Boolean grids ``(B, C, 10, 10)`` -> one Q-value per action::

        net = MinAtarQNetwork(n_actions=3, in_channels=4)              # Breakout
        q = net(torch.zeros(32, 4, 10, 10, dtype=torch.bool))         # (32, 3)
        net = MinAtarQNetwork(6, 6, dueling=True)                     # Ape-X: value and advantage streams

    conv 16 3×3 stride 1 → ReLU → fc 128 → ReLU → n_actions (Young & Tian's DQN). The input is cast
    to float here, so the wire carries a byte per cell and replay a bit. With ``dueling`` the convolution
    feeds two 128-unit streams, as the Nature CNN's feeds two 512-unit ones.
    """

    def __init__(self, n_actions: int, in_channels: int, image_size: tuple[int, int] = (10, 10),
                 dueling: bool = False):
        super().__init__()
        height, width = image_size
        self.image_size = (height, width)
        self.features, n_features = _torso(in_channels, image_size)
        self.head = (DuelingHead(n_features, (HIDDEN,), n_actions) if dueling
                     else nn.Sequential(nn.Linear(n_features, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, n_actions)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs.float()))


class MinAtarActorCritic(nn.Module):
    """The MinAtar torso shared by a policy head and a value head (A3C on MinAtar grids)::

        net = MinAtarActorCritic(n_actions=3, in_channels=4)
        logits, value = net(obs)          # obs (..., 4, 10, 10) bool or float -> (..., 3), (...)

    As in :class:`~gorila.nets.actor_critic.ConvActorCritic`, the torso counts as a **policy**
    parameter in :meth:`param_groups`, and the policy head starts at 1% of its default scale, so
    the first policy is close to uniform.
    """

    def __init__(self, n_actions: int, in_channels: int, image_size: tuple[int, int] = (10, 10)):
        super().__init__()
        height, width = image_size
        self.image_size = (height, width)
        features, n_features = _torso(in_channels, image_size)
        self.torso = nn.Sequential(features, nn.Linear(n_features, HIDDEN), nn.ReLU())
        self.head = CategoricalHead(n_actions)
        self.policy = nn.Linear(HIDDEN, n_actions)
        self.value = nn.Linear(HIDDEN, 1)
        with torch.no_grad():
            self.policy.weight.mul_(0.01)
            self.policy.bias.zero_()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (..., C, H, W)`` -> ``(logits (..., n_actions), value (...))``: any leading axes."""
        lead = obs.shape[:-3]
        features = self.torso(obs.reshape(-1, *obs.shape[-3:]).float())
        return self.policy(features).reshape(*lead, -1), self.value(features).reshape(lead)

    def param_groups(self, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
        """``(policy_mask, value_mask)`` over ``flat``'s vector: the value head, and the rest."""
        return value_head_groups(self, flat)


def numpy_minatar(net: nn.Module) -> NumpyMinAtarNet | None:
    """The network's policy (an actor-critic's logits) or Q-values as an unset
    :class:`~gorila.nets.numpy_conv.NumpyMinAtarNet` that takes its whole flat vector; None for a
    network that is not MinAtar's, or a dueling one::

        policy = numpy_minatar(MinAtarActorCritic(3, 4))     # conv -> 128 -> 3 logits; the value head unread
        policy.set(FlatParams(net).get()); policy.greedy(obs)

    The layers it plays must be the vector's first entries (FlatParams' order, the parameters' own):
    checked here, so a network laid out otherwise gets None rather than a copy reading the wrong entries."""
    features: nn.Module
    hidden: nn.Module
    out: nn.Module
    if isinstance(net, MinAtarActorCritic):
        features, hidden, out = net.torso[0], net.torso[1], net.policy
    elif isinstance(net, MinAtarQNetwork) and isinstance(net.head, nn.Sequential):
        features, hidden, out = net.features, net.head[0], net.head[2]
    else:
        return None
    conv = features[0] if isinstance(features, nn.Sequential) else None
    if not (isinstance(conv, nn.Conv2d) and isinstance(hidden, nn.Linear) and isinstance(out, nn.Linear)):
        return None
    played = [conv.weight, conv.bias, hidden.weight, hidden.bias, out.weight, out.bias]
    params = [p for p in net.parameters() if p.requires_grad]  # FlatParams' order
    if any(a is not b for a, b in zip(played, params)):
        return None
    return NumpyMinAtarNet(conv.in_channels, (hidden.out_features, out.out_features), net.image_size,
                           filters=conv.out_channels, total=sum(p.numel() for p in params))
