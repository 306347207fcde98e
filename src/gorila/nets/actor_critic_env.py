"""The actor-critic algorithms' networks (A3C, IMPALA, PPO): the actor-critic for an env, the server's
learning rates, a greedy policy.

All module-level and picklable, so a builder can hand them to workers in other processes::

    net = make_network("CartPole-v1", hidden=(64, 64), shared_torso=False, seed=0)   # same seed, same weights
    init = FlatParams(net).get()
    spec = ServerSpec(rule, optimizer="rmsprop", lr=learning_rates(net, lr_policy=3e-3, lr_value=3e-3))
    policy = greedy_policy(net)                             # evaluation: argmax of the logits
    actions = policy(observations)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol, TypeAlias, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from gorila.envs import env_spaces
from gorila.errors import ConfigError
from gorila.nets.actor_critic import ActorCritic, ConvActorCritic
from gorila.nets.flat import FlatParams
from gorila.nets.heads import GaussianHead, head_for
from gorila.nets.minatar import MinAtarActorCritic, is_grid
from gorila.nets.recurrent import RecurrentActorCritic, RecurrentGreedyPolicy, recurrent_around

FeedForwardNet = ActorCritic | ConvActorCritic | MinAtarActorCritic
ActorCriticNet = FeedForwardNet | RecurrentActorCritic


def network_for(observation_space: gym.Space, action_space: gym.Space, hidden: tuple[int, ...],
                shared_torso: bool, algo: str = "a3c", log_std_init: float = 0.0,
                encoder: str = "nature", core: str = "none", core_size: int = 256) -> ActorCriticNet:
    """An :class:`ActorCritic` for vector observations (a Gaussian policy for ``Box`` actions), a
    :class:`MinAtarActorCritic` for MinAtar's boolean grids, a :class:`ConvActorCritic` (shared torso
    on ``encoder``, :mod:`gorila.nets.encoders`) for other ``(channels, height, width)`` frames; with
    the RNG's current weights. With ``core="lstm"``, a
    :class:`~gorila.nets.recurrent.RecurrentActorCritic` on the torso the same observations get (for
    vectors a shared MLP torso of ``hidden``), an LSTM of ``core_size`` before the heads.

    Raises ``ConfigError("env", ...)`` for other observations, for actions neither ``Discrete`` nor
    ``Box``, and for ``Box`` actions with image observations. ``algo`` names the algorithm there.
    ``log_std_init`` starts a Gaussian policy's log standard deviation; a discrete policy refuses any
    but 0 (``ConfigError("log_std_init", ...)``), which it would silently ignore; so do observations
    other than frames any ``encoder`` but the default (``ConfigError("encoder", ...)``).
    """
    shape = observation_space.shape if isinstance(observation_space, gym.spaces.Box) else ()
    rank = len(shape)
    head = head_for(action_space, algo)
    continuous = isinstance(head, GaussianHead)  # Box actions; Discrete ones get a CategoricalHead
    if rank not in (1, 3) or (continuous and rank != 1):
        raise ConfigError("env", f"{algo} takes vector or (channels, height, width) image observations, and Box "
                                 f"actions only with vector observations; got observations {observation_space} "
                                 f"and actions {action_space}")
    if not continuous and log_std_init != 0.0:
        raise ConfigError("log_std_init", f"applies to Box actions only; {action_space} is discrete")
    frames = rank == 3 and not is_grid(observation_space)
    if encoder != "nature" and not frames:
        raise ConfigError("encoder", f"applies to image observations (Atari's frames); {observation_space} has its "
                                     "own network: leave --encoder out")
    size = head.size if isinstance(head, GaussianHead) else head.n
    net: ActorCriticNet
    if rank == 3:
        channels, height, width = shape
        net = (ConvActorCritic(size, channels, (height, width), encoder=encoder) if frames
               else MinAtarActorCritic(size, channels, (height, width)))
    else:
        net = ActorCritic(int(shape[0]), size, hidden, shared=shared_torso or core != "none",
                          continuous=continuous, log_std_init=log_std_init)
    return net if core == "none" else recurrent_around(net, core_size, log_std_init)


def make_network(env_id: str, hidden: tuple[int, ...], shared_torso: bool, seed: int,
                 algo: str = "a3c", log_std_init: float = 0.0, encoder: str = "nature", core: str = "none",
                 core_size: int = 256) -> ActorCriticNet:
    """The network for ``env_id``, initialised from ``seed`` only (the global RNG is left alone).
    ``hidden`` and ``shared_torso`` shape the MLPs of vector observations (images always get a
    convolutional torso shared by both heads: ``encoder``'s, or MinAtar's for boolean grids).
    ``algo`` is the algorithm a refusal names; ``log_std_init`` starts a Gaussian policy's log-std;
    ``core`` and ``core_size`` put a recurrent core before the heads (:func:`network_for`)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return network_for(*env_spaces(env_id), hidden, shared_torso, algo, log_std_init, encoder, core, core_size)


class NetworkShape(Protocol):
    """The settings of an actor-critic algorithm's config that shape its network (A3C's, IMPALA's, PPO's)."""

    @property
    def hidden(self) -> tuple[int, ...]: ...
    @property
    def shared_torso(self) -> bool: ...
    @property
    def log_std_init(self) -> float: ...
    @property
    def encoder(self) -> str: ...


@runtime_checkable
class CoreShape(NetworkShape, Protocol):
    """The settings of an algorithm whose network may have a recurrent core (IMPALA's, PPO's)."""

    @property
    def core(self) -> str: ...
    @property
    def core_size(self) -> int: ...


#: ``(network_fn, policy_fn)`` of an actor-critic algorithm: what its builder's ``evaluation_policy`` returns.
EvaluationPolicy: TypeAlias = ("tuple[Callable[[], ActorCriticNet], "
                               "Callable[[ActorCriticNet], GreedyPolicy | RecurrentGreedyPolicy]]")


def evaluation_policy_for(env_id: str, cfg: NetworkShape | CoreShape, seed: int, algo: str) -> EvaluationPolicy:
    """``(network_fn, policy_fn)`` of an actor-critic algorithm, what its builder's
    ``evaluation_policy`` returns: :func:`make_network` bound to what shapes the network (a few
    numbers, so workers receive them cheaply), and :func:`greedy_policy`. A config with a ``core``
    (IMPALA's, PPO's) shapes its core too."""
    core = (cfg.core, cfg.core_size) if isinstance(cfg, CoreShape) else ("none", 256)
    return (functools.partial(make_network, env_id, cfg.hidden, cfg.shared_torso, seed, algo=algo,
                              log_std_init=cfg.log_std_init, encoder=cfg.encoder, core=core[0], core_size=core[1]),
            greedy_policy)


def learning_rates(net: ActorCriticNet, lr_policy: float, lr_value: float) -> np.ndarray:
    """The server's float32 learning rate of every flat parameter: ``lr_policy`` on the policy
    group (a shared torso included), ``lr_value`` on the value group."""
    policy_mask, _ = net.param_groups(FlatParams(net))
    return np.where(policy_mask, lr_policy, lr_value).astype(np.float32)


class GreedyPolicy:
    """Observations ``(B, *obs_shape)`` -> the most likely action of each (``net.head``'s mode):
    ``(B,)`` int64, the argmax of the logits; ``(B, size)`` float32, a Gaussian's mean (the env
    clips it to its bounds as in training)::

        policy = GreedyPolicy(net)
        FlatParams(net).set(params)    # the policy follows the network's current weights
        actions = policy(obs)
    """

    def __init__(self, net: FeedForwardNet):
        self.net = net

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
        return self.net.head.mode(out).numpy()


def greedy_policy(net: ActorCriticNet) -> GreedyPolicy | RecurrentGreedyPolicy:
    """The deterministic policy used for evaluation (see :class:`GreedyPolicy`; a recurrent
    network's carries each episode's core state: :class:`~gorila.nets.recurrent.RecurrentGreedyPolicy`)."""
    return RecurrentGreedyPolicy(net) if isinstance(net, RecurrentActorCritic) else GreedyPolicy(net)
