"""What an actor does about an environment that fails: count it, judge whether to go on.

An environment that raises in ``step`` or ``reset``, or returns an observation that does not fit
its ``observation_space`` (another shape, NaN or infinity) or a NaN or infinite reward, is rebuilt
by the vector backend and its episode so far is dropped; :class:`EnvFailures` counts the failures
and, once ``limit`` of them fall within ``window_steps`` steps, raises :class:`~gorila.errors.EnvFailedError` naming the
last one, so the actor fails and is restarted like any crashed worker::

    failures = EnvFailures(limit=5, window_steps=1000)
    failures.record("CartPole-v1 env 2: RuntimeError: ...", step=1234)   # raises at the 5th in 1000 steps
    message = observation_fault("CartPole-v1", 2, obs, env.observation_space)   # None when it fits
    message = reward_fault("CartPole-v1", 2, reward)                            # None when finite

Training's actors (:mod:`gorila.envs.vector`) and evaluation (:mod:`gorila.envs.evaluation`) both
judge their environments with these, so a fault is the same fault wherever it happens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.errors import EnvFailedError


@dataclass
class EnvFailures:
    """Failures of one actor's environments (see the module doc)."""

    limit: int = 5
    window_steps: int = 1000
    count: int = 0
    last: str | None = None
    _recent: deque = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        validate.integer("env_failure_limit", self.limit, low=1)
        validate.integer("env_failure_window", self.window_steps, low=1)

    def record(self, message: str, step: int) -> None:
        """Count a failure at backend step ``step``; raise once ``limit`` fall within the window."""
        self.count += 1
        self.last = message
        self._recent.append(step)
        while self._recent and self._recent[0] <= step - self.window_steps:
            self._recent.popleft()
        if len(self._recent) >= self.limit:
            raise EnvFailedError(f"{len(self._recent)} environment failures within {self.window_steps} steps; "
                                 f"the last: {message}")


def observation_fault(env_id: str, index: int, obs: object, space: gym.Space) -> str | None:
    """Why ``obs`` from env ``index`` of ``env_id`` does not fit ``space`` (a Box), or None."""
    if not isinstance(space, gym.spaces.Box):
        return None
    shape = np.shape(obs)
    if shape != space.shape:
        return f"{env_id} env {index} returned an observation of shape {shape}; its observation_space has {space.shape}"
    # dtype.kind, not np.issubdtype: this runs at every reset, and issubdtype costs more than the reset's check
    if space.dtype.kind == "f" and not np.isfinite(obs).all():
        return f"{env_id} env {index} returned an observation of shape {shape} holding NaN or infinity"
    return None


def reward_fault(env_id: str, index: int, reward: object) -> str | None:
    """Why ``reward`` from env ``index`` of ``env_id`` is unusable (NaN or infinite), or None."""
    try:
        # Checked on every step: math.isfinite is the cheapest test of a Python or numpy scalar.
        finite = math.isfinite(reward)  # type: ignore[arg-type]
    except TypeError:  # not a scalar: a one-element array still passes, anything else is a fault
        try:
            values = np.asarray(reward, dtype=np.float64)
        except (TypeError, ValueError):
            values = np.full(2, np.nan)
        if values.size != 1:
            return f"{env_id} env {index} returned a reward that is not a number: {reward!r}"
        finite = bool(np.isfinite(values).all())
    return None if finite else f"{env_id} env {index} returned a reward of {reward}"
