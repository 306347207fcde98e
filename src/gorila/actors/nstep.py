"""n-step returns, built where the experience is made (at the actor, as in Ape-X)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate
from gorila.types import Transitions


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
        self._steps = np.arange(n)           # a window's steps, oldest first
        self._ring: dict[str, np.ndarray] = {}  # env e's slots are rows e·n .. e·n + n − 1
        self._ordered: np.ndarray | None = None  # a read-only env_index found in order
        self._shared = SharedColumns()

    def add(self, t: Transitions, policy_version: int | None = None) -> Transitions | None:
        """The rows ``t`` completes. Every step of ``t`` was acted on by ``policy_version``, or by
        ``t.policy_version`` row by row when it is None (-1 where neither says)."""
        env = t.env_index
        if len(env) == 0:
            return None
        # A read-only env_index (the runner's rows of a step in which every env stepped) can never
        # change: once found in order, it is not checked again.
        if env is not self._ordered:
            if len(env) > 1 and bool((env[1:] <= env[:-1]).any()):
                raise ValueError("NStep.add takes at most one step per environment, in increasing env_index")
            if not env.flags.writeable:
                self._ordered = env
        versions = (self._shared.full("version", len(env), policy_version, np.int64) if policy_version is not None
                    else self._shared.full("version", len(env), -1, np.int64) if t.policy_version is None
                    else np.asarray(t.policy_version, np.int64))
        if self.n == 1:  # every step is a whole window: its row leaves at once, sharing t's arrays
            discount = self._shared.full("discount", len(env), self._powers[1], np.float32)
            if t.terminated.any():
                discount = np.where(t.terminated, np.float32(0.0), discount)
            return Transitions(t.obs, t.action, t.reward.astype(np.float32, copy=False), t.next_obs, t.terminated,
                               t.truncated, env.astype(np.int64, copy=False), policy_version=versions,
                               discount=discount, steps=self._shared.full("steps", len(env), 1, np.int64))
        self._fit(t, int(env[-1]) + 1)
        n, ring = self.n, self._ring
        head, count = self._head[env], self._count[env] + 1  # pending steps, this one included
        at = env * n + (head + count - 1) % n  # each step's place: env e's ring is rows e·n .. e·n + n − 1
        for name, values in (("obs", t.obs), ("action", t.action), ("reward", t.reward), ("version", versions)):
            ring[name][at] = values
        ended = t.terminated | t.truncated
        if not ended.any():  # most steps: each full window lets its oldest step go as a whole n-step row
            full = count == n
            self._count[env] = count - full
            self._head[env] = (head + full) % n
            step = np.flatnonzero(full)
            if len(step) == 0:
                return None
            rows = len(step)
            window = (env[step] * n)[:, None] + (head[step, None] + self._steps) % n
            # The discounted rewards added in time order (cumsum is sequential), as a scalar loop would.
            ret = np.cumsum(self._powers[:n] * ring["reward"][window], axis=1)[:, -1]
            return self._rows(t, step, window[:, 0], ret, np.full(rows, n), np.zeros(rows, bool))
        # An end flushes its window: every pending step leaves, the oldest first.
        full = ~ended & (count == n)
        leaving = np.where(ended, count, full)
        self._count[env] = np.where(ended, 0, count - full)
        self._head[env] = np.where(ended, 0, (head + full) % n)
        step = np.repeat(np.arange(len(env)), leaving)  # the step of t that completes each row
        offset = np.arange(len(step)) - np.repeat(np.cumsum(leaving) - leaving, leaving)  # its place in the window
        span = count[step] - offset
        window = (env[step] * n)[:, None] + (head[step, None] + offset[:, None] + self._steps) % n
        terms = np.where(self._steps < span[:, None], self._powers[:n] * ring["reward"][window], 0.0)
        return self._rows(t, step, window[:, 0], np.cumsum(terms, axis=1)[:, -1], span, t.terminated[step])

    def _rows(self, t: Transitions, step: np.ndarray, first: np.ndarray, ret: np.ndarray, span: np.ndarray,
              terminated: np.ndarray) -> Transitions:
        """The rows completed by the steps ``step`` of ``t``, starting at ring rows ``first``."""
        ring = self._ring
        return Transitions(ring["obs"][first], ring["action"][first], ret.astype(np.float32), t.next_obs[step],
                           terminated, t.truncated[step], t.env_index[step].astype(np.int64, copy=False),
                           policy_version=ring["version"][first],
                           discount=np.where(terminated, 0.0, self._powers[span]).astype(np.float32), steps=span)

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
            added = np.zeros((grow * self.n, *values.shape[1:]), values.dtype)
            self._ring[name] = added if name not in self._ring else np.concatenate([self._ring[name], added])


class SharedColumns:
    """Columns of one value repeated, built when their length or value changes and otherwise
    handed out again, read-only, to every batch of rows that needs them (a step's rows carry the
    same policy version, discount and step count, step after step)::

        shared = SharedColumns()
        versions = shared.full("version", 8, 12, np.int64)   # the same array while 8 rows of version 12 come
    """

    def __init__(self) -> None:
        self._columns: dict[str, tuple[tuple[int, float], np.ndarray]] = {}

    def full(self, name: str, count: int, value: float, dtype: type) -> np.ndarray:
        key, column = self._columns.get(name, (None, None))
        if key != (count, value) or column is None:
            column = np.full(count, value, dtype)
            column.flags.writeable = False
            self._columns[name] = ((count, value), column)
        return column

