"""A tiny deterministic environment whose observation says exactly which step produced it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Observation = the step index within the episode; every episode lasts ``episode_length`` steps::

        env = CountingEnv(episode_length=3)
        obs, _ = env.reset()            # [0.]
        obs, r, term, trunc, _ = env.step(0)   # [1.], 1.0, False, False
        env.step(0); env.step(0)        # the third step returns [3.] with term=True

    Tests use it to check which steps reached a consumer: a transition ``(obs=[k], next_obs=[k+1])``
    can only come from step ``k`` of an episode. With ``truncate=True`` the last step reports
    ``truncated`` instead of ``terminated`` (a time limit, where the bootstrap must not be cut).
    ``reward`` is paid on every step, so returns are ``reward * episode_length``.
    """

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 5, reward: float = 1.0, truncate: bool = False,
                 n_actions: int = 2):
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}")
        self.episode_length = episode_length
        self.reward = float(reward)
        self.truncate = truncate
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        end = self._t >= self.episode_length
        terminated, truncated = (False, end) if self.truncate else (end, False)
        return self._obs(), self.reward, terminated, truncated, {}

    def get_action_meanings(self) -> list[str]:
        """Action 0 does nothing, as in Atari, so evaluation's no-op starts apply."""
        return ["NOOP"] + [f"ACT{i}" for i in range(1, self.action_space.n)]

    def _obs(self) -> np.ndarray:
        return np.array([self._t], dtype=np.float32)
