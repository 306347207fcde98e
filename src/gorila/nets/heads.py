"""Action distributions of the actor-critics behind one interface, so losses and actors never ask
which kind of actions an env has::

    head = head_for(env.action_space)           # CategoricalHead (Discrete) or GaussianHead (Box)
    out, value = net(obs)                        # out: the head's parameters, (..., head.width)
    actions, log_probs = head.sample(out, generator)
    head.log_prob(out, actions); head.entropy(out); head.mode(out)
    log_pi, entropy = head.log_prob_and_entropy(out, actions)     # what a loss needs, in one pass

A head is a small frozen value (picklable, kept on its network as ``net.head``). Its actions are
what a policy chooses, stored in segments and rollouts: an int64 index ``0..n-1`` (Discrete), or a
flat float32 vector of the Box's size, *unclipped* (Box). What the env receives is made of them by
:meth:`gorila.envs.faults.EnvCheck.env_actions` (the start added, or the Box's shape and bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from gorila.errors import ConfigError

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class ActionHead(Protocol):
    """What the losses, actors and policies ask of an action distribution (see the module doc).
    ``width`` is the size of the network's policy output it reads; ``action_shape`` and
    ``action_dtype`` one action as stored. Read-only, as the frozen heads hold them."""

    @property
    def width(self) -> int: ...
    @property
    def action_shape(self) -> tuple[int, ...]: ...
    @property
    def action_dtype(self) -> type: ...

    def log_prob(self, out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor: ...
    def entropy(self, out: torch.Tensor) -> torch.Tensor: ...
    def log_prob_and_entropy(self, out: torch.Tensor,
                             actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...
    def sample(self, out: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]: ...
    def mode(self, out: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class CategoricalHead:
    """pi(a|s) = softmax(logits) over ``n`` actions; the network's policy output is the logits.
    Sampling draws from the logits' softmax with ``torch.multinomial`` and reads the chosen
    log-probabilities from the same ``log_softmax``: no ``torch.distributions`` object per step."""

    n: int

    action_shape = ()
    action_dtype = np.int64

    @property
    def width(self) -> int:
        return self.n

    def log_prob(self, out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(out, -1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, out: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log_softmax(out, -1)
        return -(log_probs.exp() * log_probs).sum(-1)

    def log_prob_and_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both from one ``log_softmax``: one node less in the loss's graph, and the gradients
        rounded as a loss that computed it once always had them."""
        log_probs = torch.log_softmax(out, -1)
        log_pi = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return log_pi, -(log_probs.exp() * log_probs).sum(-1)

    def sample(self, out: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = torch.log_softmax(out.float(), -1)
        chosen = torch.multinomial(log_probs.exp(), 1, generator=generator)
        return chosen.squeeze(-1), log_probs.gather(-1, chosen).squeeze(-1)

    def mode(self, out: torch.Tensor) -> torch.Tensor:
        return out.argmax(-1)


@dataclass(frozen=True)
class GaussianHead:
    """A diagonal Gaussian over ``size`` action dimensions; the network's policy output is the mean
    followed by the log standard deviation, ``(..., 2 * size)`` (an :class:`~gorila.nets.actor_critic.ActorCritic`
    appends its state-independent ``log_std`` parameter to the mean). ``log_prob`` and ``entropy``
    sum over the dimensions. Samples are not clipped: their log-probability is exact, and the env
    gets them clipped to its bounds (:meth:`~gorila.envs.faults.EnvCheck.env_actions`)."""

    size: int

    action_dtype = np.float32

    @property
    def width(self) -> int:
        return 2 * self.size

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (self.size,)

    def _split(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return out[..., :self.size], out[..., self.size:]

    def log_prob(self, out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        mean, log_std = self._split(out)
        z = (actions.to(mean.dtype) - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)

    def entropy(self, out: torch.Tensor) -> torch.Tensor:
        _, log_std = self._split(out)
        return (log_std + 0.5 + _HALF_LOG_2PI).sum(-1)

    def log_prob_and_entropy(self, out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_prob(out, actions), self.entropy(out)

    def sample(self, out: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self._split(out.float())
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        actions = mean + torch.exp(log_std) * noise
        # log N(a; mean, std) with a = mean + std * noise: the standardised value is the noise itself
        return actions, (-0.5 * noise.pow(2) - log_std - _HALF_LOG_2PI).sum(-1)

    def mode(self, out: torch.Tensor) -> torch.Tensor:
        return self._split(out)[0]


ALGOS_FOR_BOX = ("a3c", "impala", "ppo")


def head_for(action_space: gym.Space[Any], algo: str = "a3c") -> CategoricalHead | GaussianHead:
    """The head of an env's actions: categorical for ``Discrete``, Gaussian for ``Box`` (any shape,
    bounded or not, flattened); any other space is refused with ``ConfigError("env")`` naming it."""
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalHead(int(action_space.n))
    if isinstance(action_space, gym.spaces.Box):
        return GaussianHead(int(np.prod(action_space.shape, dtype=np.int64)))
    raise ConfigError("env", f"{algo} takes Discrete or Box actions; got {action_space}")
