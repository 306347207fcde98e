"""Which environments a worker steps, as a small picklable value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.envs.vector import BACKENDS, EnvRunner, make_env_runner


@dataclass(frozen=True)
class EnvSpec:
    """``num_envs`` copies of ``env_id`` stepped together; a worker builds them where it runs::

        spec = EnvSpec("ALE/Pong-v5", num_envs=8)
        runner = spec.runner(seed=1000 * worker_id)     # env i gets seed + i
    """

    env_id: str
    num_envs: int = 1
    backend: str = "auto"
    terminal_on_life_loss: bool = False

    def __post_init__(self) -> None:
        validate.integer("num_envs", self.num_envs, low=1)
        validate.choice("env_backend", self.backend, BACKENDS)

    def runner(self, seed: int, training: bool = True) -> EnvRunner:
        return make_env_runner(self.env_id, self.num_envs, seed=seed, training=training,
                               terminal_on_life_loss=self.terminal_on_life_loss, backend=self.backend)


def stored_action(space: gym.Space[Any]) -> tuple[tuple[int, ...], type]:
    """How one action of ``space`` is stored in a segment and travels, ``(shape, dtype)``: an int64
    index for ``Discrete`` actions; for ``Box`` actions the flat float32 vector a Gaussian policy
    samples (:class:`~gorila.nets.heads.GaussianHead`), unclipped."""
    if isinstance(space, gym.spaces.Box):
        return (int(np.prod(space.shape, dtype=np.int64)),), np.float32
    return (), np.int64
