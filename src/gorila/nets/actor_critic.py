"""Policy and value networks for discrete actions and vector observations (A2C / A3C)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from gorila.nets.flat import FlatParams
from gorila.nets.mlp import mlp


class ActorCritic(nn.Module):
    """A policy network pi(a|s; theta) (logits) and a value network v(s; w)::

        net = ActorCritic(obs_dim=4, n_actions=2, hidden=(64, 64))
        logits, value = net(obs)          # obs (..., 4) -> logits (..., 2), value (...)
        policy_mask, value_mask = net.param_groups(FlatParams(net))
        lr = np.where(policy_mask, lr_policy, lr_value).astype(np.float32)

    With ``shared=False`` (the default) policy and value are two separate MLPs with the
    given hidden layers. With ``shared=True`` one MLP torso of ``hidden`` layers feeds two
    linear heads; the torso is trained by both losses and counts as a **policy** parameter in
    :meth:`param_groups` (it is updated with the policy learning rate).

    Hidden layers use tanh, and the policy's output layer starts at 1% of its default scale
    with zero bias: the initial policy is then close to uniform, which keeps early, noisy
    advantages from collapsing it onto one action (on CartPole this made A2C learn reliably
    where ReLU and the default initialisation stalled on some seeds).
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (64, 64),
                 shared: bool = False):
        super().__init__()
        self.shared = shared
        if shared:
            self.torso = mlp(obs_dim, hidden, activation=nn.Tanh)
            width = hidden[-1] if hidden else obs_dim
            self.policy = nn.Linear(width, n_actions)
            self.value = nn.Linear(width, 1)
        else:
            self.policy = mlp(obs_dim, hidden, n_actions, activation=nn.Tanh)
            self.value = mlp(obs_dim, hidden, 1, activation=nn.Tanh)
        out = self.policy if shared else self.policy[-1]
        with torch.no_grad():
            out.weight.mul_(0.01)
            out.bias.zero_()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (..., obs_dim)`` -> ``(logits (..., n_actions), value (...))``."""
        features = self.torso(obs) if self.shared else obs
        return self.policy(features), self.value(features).squeeze(-1)

    def param_groups(self, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks over ``flat``'s vector: ``(policy_mask, value_mask)``.

        Every entry is in exactly one group; a shared torso belongs to the policy group.
        """
        if flat.module is not self:
            raise ValueError("param_groups needs the FlatParams of this network")
        policy_mask = np.zeros(flat.size, dtype=bool)
        for name, where in flat.slices().items():
            if not name.startswith("value."):
                policy_mask[where] = True
        return policy_mask, ~policy_mask
