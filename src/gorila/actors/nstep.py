"""n-step returns, built where the experience is made (at the actor, as in Ape-X)."""

from __future__ import annotations

from collections import defaultdict, deque
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
        rows = nstep.add(runner.step(actions))    # Transitions ready now (None while windows fill)

    Row ``t`` holds ``R = r_t + γ r_{t+1} + … + γ^{m−1} r_{t+m−1}``, the observation ``s_{t+m}`` to
    bootstrap from, ``steps = m`` and ``discount = γ^m``, so that the TD target is
    ``R + discount · Q(s_{t+m})``. ``m = n`` unless the episode ended inside the window: then the
    window stops at the end, ``m`` counts the steps left, and a termination makes ``discount`` 0
    while a truncation (a time limit) keeps ``γ^m`` and bootstraps from the observation it was cut
    at. An episode's end flushes its pending rows at once, in order; each environment's rows leave
    in time order, so a replay stream sees its steps in sequence. A row keeps the
    ``policy_version`` of the action it starts with. ``n = 1`` gives one-step rows.
    """

    def __init__(self, n: int, gamma: float):
        validate.integer("n_step", n, low=1)
        validate.number("gamma", gamma, low=0.0, high=1.0)
        self.n, self.gamma = n, gamma
        self._windows: defaultdict[int, deque] = defaultdict(deque)  # one per environment

    def add(self, t: Transitions) -> Transitions | None:
        rows: list[tuple] = []
        for i, env in enumerate(t.env_index):
            window = self._windows[int(env)]
            version = -1 if t.policy_version is None else int(t.policy_version[i])
            window.append((t.obs[i], t.action[i], t.reward[i], t.next_obs[i], bool(t.terminated[i]),
                           bool(t.truncated[i]), int(env), version))
            if window[-1][4] or window[-1][5]:
                while window:
                    rows.append(self._row(window))
                    window.popleft()
            elif len(window) == self.n:
                rows.append(self._row(window))
                window.popleft()
        if not rows:
            return None
        obs, action, reward, next_obs, terminated, truncated, env_index, version, discount, steps = zip(*rows)
        return Transitions(np.stack(obs), np.array(action), np.array(reward, np.float32), np.stack(next_obs),
                           np.array(terminated), np.array(truncated), np.array(env_index, np.int64),
                           policy_version=np.array(version, np.int64), discount=np.array(discount, np.float32),
                           steps=np.array(steps, np.int64))

    def drop(self, env: int) -> None:
        """Forget environment ``env``'s pending steps (its episode was cut short by a failure)."""
        self._windows.pop(env, None)

    def _row(self, window: deque) -> tuple:
        """The n-step row of the window's first step, over every step the window holds."""
        ret = 0.0
        for k, step in enumerate(window):
            ret += self.gamma ** k * float(step[2])
        first, last = window[0], window[-1]
        m = len(window)
        discount = 0.0 if last[4] else self.gamma ** m
        return (first[0], first[1], ret, last[3], last[4], last[5], first[6], first[7], discount, m)
