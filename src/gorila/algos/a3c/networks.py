"""A3C's networks: the actor-critic for an env, the server's learning rates, a greedy policy.

All module-level and picklable, so a builder can hand them to workers in other processes::

    net = make_network("CartPole-v1", cfg, seed=0)          # the same weights for the same seed
    init = FlatParams(net).get()
    spec = ServerSpec(rule, optimizer=cfg.optimizer, lr=learning_rates(net, cfg))
    policy = greedy_policy(net)                             # evaluation: argmax of the logits
    actions = policy(observations)
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from gorila.algos.a3c.config import A3CConfig
from gorila.envs import make_env
from gorila.errors import ConfigError
from gorila.nets.actor_critic import ActorCritic
from gorila.nets.flat import FlatParams


def network_for(observation_space: gym.Space, action_space: gym.Space, cfg: A3CConfig) -> ActorCritic:
    """An :class:`ActorCritic` for these spaces, with the RNG's current weights.

    Raises ``ConfigError("env", ...)`` unless the observations are 1-D boxes and the actions
    discrete.
    """
    vector_obs = isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1
    if not (vector_obs and isinstance(action_space, gym.spaces.Discrete)):
        raise ConfigError("env", "a3c supports discrete actions and vector observations; got "
                                 f"observations {observation_space} and actions {action_space}")
    return ActorCritic(int(observation_space.shape[0]), int(action_space.n), cfg.hidden,
                       shared=cfg.shared_torso)


def make_network(env_id: str, cfg: A3CConfig, seed: int) -> ActorCritic:
    """The network for ``env_id``, initialised from ``seed`` only (the global RNG is left alone)."""
    env = make_env(env_id, seed=seed, training=False)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return network_for(env.observation_space, env.action_space, cfg)
    finally:
        env.close()


def learning_rates(net: ActorCritic, cfg: A3CConfig) -> np.ndarray:
    """The server's float32 learning rate of every flat parameter: ``lr_policy`` on the policy
    group (a shared torso included), ``lr_value`` on the value group."""
    policy_mask, _ = net.param_groups(FlatParams(net))
    return np.where(policy_mask, cfg.lr_policy, cfg.lr_value).astype(np.float32)


class GreedyPolicy:
    """Observations ``(B, obs_dim)`` -> the argmax action of each, ``(B,)`` int64::

        policy = GreedyPolicy(net)
        FlatParams(net).set(params)    # the policy follows the network's current weights
        actions = policy(obs)
    """

    def __init__(self, net: ActorCritic):
        self.net = net

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
        return logits.argmax(-1).numpy()


def greedy_policy(net: ActorCritic) -> GreedyPolicy:
    """The deterministic policy used for evaluation (see :class:`GreedyPolicy`)."""
    return GreedyPolicy(net)
