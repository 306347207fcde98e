"""Gorila DQN's network: the MLP or the Nature CNN Q-network for an env, from a seed."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from gorila.envs import env_spaces
from gorila.errors import ConfigError
from gorila.nets.heads import ALGOS_FOR_BOX
from gorila.nets.q import make_q_network


def build_q_network(env_id: str, hidden: tuple[int, ...], seed: int, dueling: bool = False) -> nn.Module:
    """The Q-network for ``env_id`` (MLP or Nature CNN), initialised from ``seed``: every process
    that calls this gets the same architecture, and the driver takes initial parameters from it."""
    observation_space, action_space = env_spaces(env_id)
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError("env", f"dqn and apex need Discrete actions; {env_id} has {action_space} "
                                 f"(Box actions are taken by {', '.join(ALGOS_FOR_BOX)})")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_q_network(observation_space, int(action_space.n), hidden, dueling)
