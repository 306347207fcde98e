"""n-step returns, built where the experience is made (at the actor, as in Ape-X)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate
from gorila.envs.vector import Transitions


@dataclass(frozen=True)
class NStepReturns:
    """How rows for replay are built: ``n``-step returns discounted by ``gamma``::

        returns = NStepReturns(n=3, gamma=0.99)
        nstep = returns.builder()           # one per actor, in its own process
    """

    n: int = 1
    gamma: float = 0.99

    def __post_init__(self) -> None:
        validate.integer("n_step", self.n, low=1)
        validate.number("gamma", self.gamma, low=0.0, high=1.0)

    def builder(self) -> NStep:
        return NStep(self.n, self.gamma)


class NStep:
    """Turns each environment's one-step transitions into n-step ones::

        nstep = NStep(n=3, gamma=0.99)
        rows = nstep.add(runner.step(actions), policy_version=v)   # Transitions ready now (None while windows fill)

    Row ``t`` holds ``R = r_t + γ r_{t+1} + … + γ^{m−1} r_{t+m−1}``, the observation ``s_{t+m}`` to
    bootstrap from, ``steps = m`` and ``discount = γ^m``, so that the TD target is
    ``R + discount · Q(s_{t+m})``. ``m = n`` unless the episode ended inside the window: then the
    window stops at the end, ``m`` counts the steps left, and a termination makes ``discount`` 0
    while a truncation (a time limit) keeps ``γ^m`` and bootstraps from the observation it was cut
    at. An episode's end flushes its pending rows at once, in order; each environment's rows leave
    in time order, so a replay stream sees its steps in sequence. A row keeps the
    ``policy_version`` of the action it starts with. ``n = 1`` gives one-step rows.

    Each ``add`` holds at most one step per environment, in increasing ``env_index`` (as an
    :class:`~gorila.envs.vector.EnvRunner` steps them). The pending steps live in arrays, a ring of
    ``n`` slots per environment, so that a step of all envs costs a few array operations rather
    than a Python loop over them.
    """

    def __init__(self, n: int, gamma: float):
        validate.integer("n_step", n, low=1)
        validate.number("gamma", gamma, low=0.0, high=1.0)
        self.n, self.gamma = n, gamma
        # Python's own powers, so that returns and discounts round as a scalar loop over a window would.
        self._powers = np.array([gamma ** k for k in range(n + 1)], np.float64)
        self._count = np.zeros(0, np.int64)  # pending steps of each env
        self._head = np.zeros(0, np.int64)   # the ring slot of each env's oldest pending step
        self._ring: dict[str, np.ndarray] = {}

    def add(self, t: Transitions, policy_version: int | None = None) -> Transitions | None:
        """The rows ``t`` completes. Every step of ``t`` was acted on by ``policy_version``, or by
        ``t.policy_version`` row by row when it is None (-1 where neither says)."""
        env = t.env_index
        if len(env) == 0:
            return None
        if len(env) > 1 and bool((env[1:] <= env[:-1]).any()):
            raise ValueError("NStep.add takes at most one step per environment, in increasing env_index")
        versions = (np.full(len(env), policy_version, np.int64) if policy_version is not None
                    else np.full(len(env), -1, np.int64) if t.policy_version is None else t.policy_version)
        if self.n == 1:  # every step is a whole window: its row leaves at once
            return Transitions(t.obs, t.action, t.reward, t.next_obs, t.terminated, t.truncated,
                               env.astype(np.int64, copy=False), policy_version=versions,
                               discount=np.where(t.terminated, 0.0, self._powers[1]).astype(np.float32),
                               steps=np.ones(len(env), np.int64))
        self._fit(t, int(env[-1]) + 1)
        head, count = self._head[env], self._count[env]
        slot = (head + count) % self.n
        for name, values in (("obs", t.obs), ("action", t.action), ("reward", t.reward), ("version", versions)):
            self._ring[name][env, slot] = values
        count = count + 1
        ended = t.terminated | t.truncated
        full = ~ended & (count == self.n)
        leaving = np.where(ended, count, full)  # an end flushes the window, a full one lets its oldest go
        self._count[env] = np.where(ended, 0, count - full)
        self._head[env] = np.where(ended, 0, (head + full) % self.n)
        total = int(leaving.sum())
        if total == 0:
            return None
        step = np.repeat(np.arange(len(env)), leaving)  # the step of t that completes each row
        offset = np.arange(total) - np.repeat(np.cumsum(leaving) - leaving, leaving)  # its place in the window
        row_env, first = env[step], head[step] + offset
        span = count[step] - offset
        ret = np.zeros(total, np.float64)
        for k in range(self.n):  # the window's rewards in time order, as a scalar sum would add them
            reward = self._ring["reward"][row_env, (first + k) % self.n]
            ret += np.where(k < span, self._powers[k] * reward, 0.0)
        first %= self.n
        terminated = t.terminated[step]
        return Transitions(self._ring["obs"][row_env, first], self._ring["action"][row_env, first],
                           ret.astype(np.float32), t.next_obs[step], terminated, t.truncated[step],
                           row_env.astype(np.int64, copy=False),
                           policy_version=self._ring["version"][row_env, first],
                           discount=np.where(terminated, 0.0, self._powers[span]).astype(np.float32),
                           steps=span)

    def drop(self, env: int) -> None:
        """Forget environment ``env``'s pending steps (its episode was cut short by a failure)."""
        if env < len(self._count):
            self._count[env] = 0

    def _fit(self, t: Transitions, envs: int) -> None:
        """Rings for at least ``envs`` environments, shaped after ``t``'s steps."""
        if envs <= len(self._count):
            return
        grow = envs - len(self._count)
        self._count = np.concatenate([self._count, np.zeros(grow, np.int64)])
        self._head = np.concatenate([self._head, np.zeros(grow, np.int64)])
        like = {"obs": t.obs, "action": t.action, "reward": np.zeros(0, np.float64), "version": np.zeros(0, np.int64)}
        for name, values in like.items():
            added = np.zeros((grow, self.n, *values.shape[1:]), values.dtype)
            self._ring[name] = added if name not in self._ring else np.concatenate([self._ring[name], added])
