"""Partially observed tasks, which a policy without memory cannot solve (``--core lstm`` can).

- ``gorila/StatelessCartPole-v1`` (:class:`StatelessCartPole`): CartPole-v1 whose observation is the
  cart's position and the pole's angle alone, its two velocities hidden, as RL-Zoo's
  ``CartPoleNoVel-v1`` (RecurrentPPO's benchmark) and popgym's position-only CartPole. Same
  dynamics, rewards, 500-step limit and target (475) as CartPole-v1: a policy must infer the
  velocities from the observations it has seen.
- ``gorila/MemoryLength-v0`` (:class:`MemoryLength`): bsuite's memory-length task. The first
  observation shows a cue (one of two), the next ``delay - 1`` show nothing, and the last asks which
  cue it was: the answer is rewarded +1 if right, -1 if wrong. The answer depends on what was seen
  ``delay`` (10) steps earlier, so a policy without memory scores 0 on average, one with memory 1::

      env = gymnasium.make("gorila/MemoryLength-v0")       # obs: (cue 0, cue 1, query), 11 steps
      obs, _ = env.reset(seed=0)                           # e.g. [0, 1, 0]: cue 1
      ...                                                  # 9 steps of [0, 0, 0], reward 0
      obs, reward, terminated, _, _ = env.step(1)          # at [0, 0, 1]: answer 1, reward +1

Both are registered by :mod:`gorila.envs` (where popgym is not needed: its CartPole rescales
the rewards and ends at 200 steps, and its memory tasks give ``Discrete`` observations, which
gorila's networks do not take).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class StatelessCartPole(CartPoleEnv):
    """CartPole with the velocities hidden: observations ``(x, theta)`` (see the module doc)."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return _positions(obs), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        # gymnasium leaves CartPoleEnv.step unannotated
        obs, reward, terminated, truncated, info = super().step(action)  # type: ignore[no-untyped-call]
        return _positions(obs), float(reward), terminated, truncated, info


def _positions(obs: np.ndarray) -> np.ndarray:
    return np.array([obs[0], obs[2]], dtype=np.float32)


class MemoryLength(gym.Env):
    """A cue, ``delay - 1`` empty observations, then the question: which cue was it? (see the module doc).

    Observations are float32 ``(cue 0, cue 1, query)``; actions ``Discrete(2)``, the cue answered.
    Only the answer is rewarded; an episode is ``delay + 1`` steps, and ends with the answer.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, delay: int = 10) -> None:
        if delay < 1:
            raise ValueError(f"delay must be >= 1, got {delay}")
        self.delay = delay
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0
        self._cue = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._cue = int(self.np_random.integers(2))
        obs = np.zeros(3, np.float32)
        obs[self._cue] = 1.0
        return obs, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        answered = self._t == self.delay
        reward = (1.0 if int(action) == self._cue else -1.0) if answered else 0.0
        self._t += 1
        obs = np.zeros(3, np.float32)
        if self._t == self.delay:
            obs[2] = 1.0  # the question
        return obs, reward, answered, False, {}
