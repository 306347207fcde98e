"""A tiny deterministic environment whose observation says exactly which step produced it."""

from __future__ import annotations

import threading
import time
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
    ``reward`` is paid on every step, so returns are ``reward * episode_length``. ``step_s`` makes
    every step take that long (``gorila/Slow-v0``: 0.2 s), as a slow simulator's steps do. With
    ``action_start`` the actions are ``Discrete(n_actions, start=action_start)``, and an action
    outside them raises (``actions_taken`` lists those taken); with ``close_raises``, ``close()`` raises.
    """

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 5, reward: float = 1.0, truncate: bool = False,
                 n_actions: int = 2, step_s: float = 0.0, action_start: int = 0, close_raises: bool = False) -> None:
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}")
        self.episode_length = episode_length
        self.reward = float(reward)
        self.truncate = truncate
        self.step_s, self.close_raises = step_s, close_raises
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        self.action_space: gym.spaces.Discrete = gym.spaces.Discrete(n_actions, start=action_start)
        self.actions_taken: list[int] = []
        self._t = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.step_s:
            time.sleep(self.step_s)  # the env's own pace, not a wait for anything
        if self.action_space.start and not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self.actions_taken.append(int(action))
        self._t += 1
        end = self._t >= self.episode_length
        terminated, truncated = (False, end) if self.truncate else (end, False)
        return self._obs(), self.reward, terminated, truncated, {}

    def close(self) -> None:
        if self.close_raises:
            raise RuntimeError("emulator lost while closing")

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
        env = FlakyEnv(fail_every=7, how="str_obs")      # ["7"]: an observation of strings
        env = FlakyEnv(fail_every=7, how="array_reward") # [1.0]: a reward that is an array
        env = FlakyEnv(fail_every=7, how="str_reward")   # "1.0": a reward that is a string
        env = FlakyEnv(fail_every=7, how="out_of_box")   # [-1.]: below the Box's low of 0 (finite: no fault)

    The steps are counted over the process (``FlakyEnv.steps_in_process``; a test sets it back to
    0), not per copy, so that a copy rebuilt after a failure is not spared: the faults keep coming
    at the same rate whatever is rebuilt. Registered as ``gorila/Flaky-v0``, so that anything that
    builds envs by id (evaluation included) can be given one.
    """

    steps_in_process = 0
    HOWS = ("raise", "nan_obs", "nan_reward", "str_obs", "array_reward", "str_reward", "out_of_box")

    def __init__(self, episode_length: int = 5, fail_every: int = 7, how: str = "raise") -> None:
        super().__init__(episode_length=episode_length)
        if how not in self.HOWS:
            raise ValueError(f"how must be one of {', '.join(self.HOWS)}, got {how!r}")
        self.fail_every, self.how = fail_every, how

    def step(self, action: int) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:  # Any: its bad rewards
        obs, reward, terminated, truncated, info = super().step(action)
        FlakyEnv.steps_in_process += 1
        if FlakyEnv.steps_in_process % self.fail_every == 0:
            if self.how == "raise":
                raise RuntimeError(f"emulator lost at step {FlakyEnv.steps_in_process}")
            # Any: each fault is a value of whatever type breaks an env's contract
            bad: dict[str, tuple[str, Any]] = {
                "nan_obs": ("obs", np.array([np.nan], np.float32)), "nan_reward": ("reward", float("nan")),
                "str_obs": ("obs", obs.astype(str)), "array_reward": ("reward", np.array([reward])),
                "str_reward": ("reward", str(reward)), "out_of_box": ("obs", np.array([-1.0], np.float32))}
            which, value = bad[self.how]
            obs, reward = (value, reward) if which == "obs" else (obs, value)
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

    def __init__(self, episode_length: int = 5, hang_at: int = 20) -> None:
        super().__init__(episode_length=episode_length)
        self.hang_at = hang_at

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        HangingEnv.steps_in_process += 1
        if HangingEnv.steps_in_process == self.hang_at:
            threading.Event().wait()  # never set: only a watchdog gets past this
        return super().step(action)


class SlowingEnv(CountingEnv):
    """A :class:`CountingEnv` that is fast for its process's first ``fast_steps`` steps (counted over
    every SlowingEnv of the process) and takes ``step_s`` a step after them, the way a learner's
    updates become costly once its warm-up ends::

        env = SlowingEnv(fast_steps=2_000, step_s=0.1)   # the process's 2,001st step takes 0.1 s

    Registered as ``gorila/Slowing-v0``: a pace measured on the fast steps says nothing of the slow ones.
    """

    steps_in_process = 0

    def __init__(self, episode_length: int = 5, fast_steps: int = 2_000, step_s: float = 0.1) -> None:
        super().__init__(episode_length=episode_length)
        self.fast_steps, self.slow_step_s = fast_steps, step_s

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        SlowingEnv.steps_in_process += 1
        if SlowingEnv.steps_in_process > self.fast_steps:
            time.sleep(self.slow_step_s)  # the env's own pace, not a wait for anything
        return super().step(action)
