"""A tiny deterministic environment whose observation says exactly which step produced it."""

from __future__ import annotations

import threading
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


class FlakyEnv(CountingEnv):
    """A :class:`CountingEnv` that goes wrong at every ``fail_every``-th step taken by any FlakyEnv
    of its process, the way an emulator fails now and then::

        env = FlakyEnv(fail_every=7, how="raise")        # some FlakyEnv's 7th, 14th, ... step raises
        env = FlakyEnv(fail_every=7, how="nan_obs")      # returns [nan] there instead
        env = FlakyEnv(fail_every=7, how="nan_reward")   # returns a reward of nan there

    The steps are counted over the process (``FlakyEnv.steps_in_process``; a test sets it back to
    0), not per copy, so that a copy rebuilt after a failure is not spared: the faults keep coming
    at the same rate whatever is rebuilt. Registered as ``gorila/Flaky-v0``, so that anything that
    builds envs by id (evaluation included) can be given one.
    """

    steps_in_process = 0

    def __init__(self, episode_length: int = 5, fail_every: int = 7, how: str = "raise"):
        super().__init__(episode_length=episode_length)
        if how not in ("raise", "nan_obs", "nan_reward"):
            raise ValueError(f"how must be raise, nan_obs or nan_reward, got {how!r}")
        self.fail_every, self.how = fail_every, how

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        FlakyEnv.steps_in_process += 1
        if FlakyEnv.steps_in_process % self.fail_every == 0:
            if self.how == "raise":
                raise RuntimeError(f"emulator lost at step {FlakyEnv.steps_in_process}")
            if self.how == "nan_obs":
                obs = np.array([np.nan], np.float32)
            else:
                reward = float("nan")
        return obs, reward, terminated, truncated, info


class HangingEnv(CountingEnv):
    """A :class:`CountingEnv` whose process's ``hang_at``-th step (counted over every HangingEnv
    of the process, as :class:`FlakyEnv` counts) never returns, the way a hung emulator stalls::

        env = HangingEnv(hang_at=20)     # the process's 20th step blocks for good

    Once per process: a copy rebuilt in the same process goes on, a new process hangs again at its
    own ``hang_at``-th step. Registered as ``gorila/Hang-v0``, so that anything that builds envs by
    id (an evaluator included) can be given one.
    """

    steps_in_process = 0

    def __init__(self, episode_length: int = 5, hang_at: int = 20):
        super().__init__(episode_length=episode_length)
        self.hang_at = hang_at

    def step(self, action):
        HangingEnv.steps_in_process += 1
        if HangingEnv.steps_in_process == self.hang_at:
            threading.Event().wait()  # never set: only a watchdog gets past this
        return super().step(action)
