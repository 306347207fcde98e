"""What an actor does about an environment that fails: count it, judge whether to go on.

An environment that raises in ``step`` or ``reset``, or returns an observation that does not fit
its ``observation_space`` (not numbers, another shape, NaN or infinity, outside an integer Box's
bounds) or a
reward that is not a finite number (NaN, infinity, a string, an array), is rebuilt
by the vector backend and its episode so far is dropped; :class:`EnvFailures` counts the failures
and, once ``limit`` of them fall within ``window_steps`` steps, raises :class:`~gorila.errors.EnvFailedError` naming the
last one, so the actor fails and is restarted like any crashed worker::

    failures = EnvFailures(limit=5, window_steps=1000)
    failures.record("CartPole-v1 env 2: RuntimeError: ...", step=1234)   # raises at the 5th in 1000 steps
    check = EnvCheck("CartPole-v1", env.observation_space, env.action_space)
    message = check.observation(2, obs)          # None when it fits
    batch = check.observations([obs0, obs1])     # the stacked batch, or None when one does not fit
    message = reward_fault("CartPole-v1", 2, reward)                            # None when a finite number
    env.step(check.env_action(a))                # the action index a as the env takes it (Discrete.start)

Training's actors (:mod:`gorila.envs.vector`) and evaluation (:mod:`gorila.envs.evaluation`) both
judge their environments with these, so a fault is the same fault wherever it happens.
"""

from __future__ import annotations

import math
import numbers
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

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
                                 f"the last: {message}", self.count)


class EnvCheck:
    """The checks of one env id's observations and the actions sent to it, as training's vector
    backend and evaluation both make them (one check, so an observation accepted in training is
    accepted in evaluation)::

        check = EnvCheck("CartPole-v1", env.observation_space, env.action_space)

    An observation fits a Box when it holds numbers (bool, integers or floats: not strings, not
    objects), has the Box's shape, holds no NaN or infinity (float Boxes) and, for a Box of
    integers, lies within its bounds (values past them would wrap when stored in its dtype). A
    float Box's bounds are the env's description, not a contract its dynamics keep: Gymnasium's
    LunarLander-v3 reports heights past its Box's 2.5 whenever the lander climbs, with no
    termination there (Gymnasium issues 377 and 752), so finite values past them are no fault.
    Other spaces are not judged. Policies choose action indices ``0..n-1``; a
    ``Discrete(n, start=s)`` env takes ``s..s+n-1``, so :meth:`env_action` adds ``s``. For a ``Box``
    of actions a policy chooses flat float vectors, which :meth:`env_actions` reshapes to the Box's
    shape and clips to its bounds.
    """

    def __init__(self, env_id: str, observation_space: gym.Space, action_space: gym.Space | None = None):
        self.env_id, self.space = env_id, observation_space
        self.box = isinstance(observation_space, gym.spaces.Box)
        self.start = int(action_space.start) if isinstance(action_space, gym.spaces.Discrete) else 0
        self.action_box = action_space if isinstance(action_space, gym.spaces.Box) else None
        if isinstance(observation_space, gym.spaces.Box):  # self.box, narrowing the space's type
            self.dtype, self.shape = observation_space.dtype, observation_space.shape
            self.finite = self.dtype.kind == "f"
            self.low, self.high = observation_space.low, observation_space.high
            # Bounds that are the dtype's own range (Atari's uint8 0..255, MinAtar's bools) hold every
            # value of it: compared only for observations of another dtype.
            info = np.iinfo(self.dtype) if self.dtype.kind in "iu" else None
            self.bounded = info is not None and bool((self.low > info.min).any() or (self.high < info.max).any())

    def observation(self, index: int, obs: object) -> str | None:
        """Why ``obs`` from env ``index`` does not fit the observation space, or None."""
        if not self.box:
            return None
        try:
            array = np.asarray(obs)
        except (TypeError, ValueError):  # ragged nests
            return f"{self.env_id} env {index} returned an observation that is not an array of numbers"
        return self._misfit(array, array.shape, f"{self.env_id} env {index} returned an observation")

    def observations(self, obs_list: Sequence[object]) -> np.ndarray | None:
        """The observations of several envs stacked in the space's dtype, or None when any of them
        does not fit (then :meth:`observation` says which and why)."""
        try:
            batch = np.array(obs_list)
        except (TypeError, ValueError):  # observations of several shapes do not stack
            return None
        if self.box and (batch.ndim == 0 or self._misfit(batch, batch.shape[1:], "") is not None):
            return None
        dtype = self.space.dtype
        return batch if dtype is None else batch.astype(dtype, copy=False)

    def _misfit(self, array: np.ndarray, shape: tuple, what: str) -> str | None:
        """Why ``array`` (one observation of ``shape``, or a batch of them) does not fit, or None."""
        if array.dtype.kind not in "biuf":  # strings, objects, complex: no network reads them
            return f"{what} of {array.dtype} values, not numbers: {_brief(array)}"
        if shape != self.shape:
            return f"{what} of shape {shape}; its observation_space has {self.shape}"
        if self.finite:
            return None if np.isfinite(array).all() else f"{what} of shape {shape} holding NaN or infinity"
        # count_nonzero of one mask: on a step's few values, a third of the time of two .all() calls
        if (self.bounded or array.dtype != self.dtype) and np.count_nonzero(
                (array >= self.low) & (array <= self.high)) != array.size:
            return f"{what} outside its observation_space {self.space}: {_brief(array)}"
        return None

    def env_action(self, action: Any) -> Any:
        """The action a policy chose as the env takes it (see :meth:`env_actions`)."""
        return action + self.start if self.action_box is None else self.env_actions(np.asarray(action)[None])[0]

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """A batch of the actions policies chose as the envs take them: indices plus ``start``, or
        Box vectors in the Box's shape, clipped to its bounds and in its dtype. Clipping (as SB3's
        and CleanRL's PPO do) leaves the policy's sample, and so its Gaussian log-probability, exact:
        the sample is what is stored and learnt from, the env only sees it bounded. Squashing it
        through tanh instead would change the distribution and need a Jacobian correction."""
        if self.action_box is None:
            return actions + self.start if self.start else actions
        box = self.action_box
        shaped = np.asarray(actions).reshape(len(actions), *box.shape)
        return np.clip(shaped, box.low, box.high).astype(box.dtype, copy=False)


def _brief(array: np.ndarray) -> str:
    return np.array2string(np.asarray(array).ravel(), threshold=6, edgeitems=2)


def reward_fault(env_id: str, index: int, reward: object) -> str | None:
    """Why ``reward`` from env ``index`` of ``env_id`` is unusable, or None: a reward is one finite
    number (a Python or numpy scalar, or a 0-d numeric array), not NaN or infinity, not a string
    such as ``"1.0"`` and not an array such as ``[1.0]``."""
    # Checked on every step: a Python float or int is the common case, and math.isfinite its cheapest test.
    if type(reward) is float or type(reward) is int:
        return None if math.isfinite(reward) else f"{env_id} env {index} returned a reward of {reward}"
    number: SupportsFloat
    if isinstance(reward, np.ndarray) and reward.ndim == 0 and reward.dtype.kind in "biuf":
        number = reward.item()
    elif isinstance(reward, (numbers.Real, np.integer, np.floating, np.bool_)):
        number = reward
    else:
        return f"{env_id} env {index} returned a reward that is not a number: {reward!r} ({type(reward).__name__})"
    return None if math.isfinite(float(number)) else f"{env_id} env {index} returned a reward of {number}"
