"""Exploration as a value object: which ε an actor acts with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate


@dataclass(frozen=True)
class ExplorationSchedule:
    """ε for actor ``i`` of ``num_actors`` after ``u`` global updates. Two presets::

        ExplorationSchedule.annealed(start=1.0, end=0.05, over_updates=2000)   # Gorila: by global updates
        ExplorationSchedule.per_actor(num_actors=8, alpha=7.0)                 # Ape-X: a fixed ε per actor
        schedule.epsilon(actor=3, global_updates=500)

    ``annealed`` moves ε linearly from ``start`` to ``end`` over ``over_updates`` server updates
    (the parameter version, so every actor anneals alike however fast it steps). ``per_actor``
    gives actor ``i`` the fixed ``base^(1 + alpha·i/(N−1))`` (Horgan et al. 2018: base 0.4, alpha 7;
    a lone actor gets ``base``).
    """

    start: float = 1.0
    end: float = 0.05
    over_updates: int = 2_000
    alpha: float | None = None  # set: Ape-X's per-actor rates
    base: float = 0.4
    num_actors: int = 1

    def __post_init__(self) -> None:
        validate.number("eps_start", self.start, low=0.0, high=1.0)
        validate.number("eps_end", self.end, low=0.0, high=1.0)
        validate.integer("eps_decay_updates", self.over_updates, low=1)
        if self.alpha is not None:
            validate.number("eps_alpha", self.alpha, low=0.0)
        validate.number("base", self.base, low=0.0, high=1.0)
        validate.integer("actors", self.num_actors, low=1)

    @classmethod
    def annealed(cls, start: float, end: float, over_updates: int) -> ExplorationSchedule:
        return cls(start=start, end=end, over_updates=over_updates)

    @classmethod
    def per_actor(cls, num_actors: int, alpha: float = 7.0, base: float = 0.4) -> ExplorationSchedule:
        return cls(alpha=alpha, base=base, num_actors=num_actors)

    def epsilon(self, actor: int, global_updates: int) -> float:
        if self.alpha is not None:
            if self.num_actors == 1:
                return self.base
            return self.base ** (1 + self.alpha * actor / (self.num_actors - 1))
        frac = min(1.0, max(global_updates, 0) / self.over_updates)
        return self.start + frac * (self.end - self.start)


def epsilon_greedy(greedy: np.ndarray, epsilon: float, n_actions: int, rng: np.random.Generator) -> np.ndarray:
    """``greedy`` with each action replaced, with probability ``epsilon``, by one drawn uniformly
    from ``n_actions``; in place, and returned::

        actions = epsilon_greedy(policy(obs), schedule.epsilon(k, version), env.action_space.n, rng)

    One draw of two uniforms per row decides both whether it explores and which action it takes
    (``floor(u · n_actions)``, below ``n_actions`` as ``u < 1``): it runs once per actor step, where
    ``Generator.integers`` alone cost more than the rest of the exploration on a few envs.
    """
    n = len(greedy)
    u = rng.random(2 * n).tolist()
    # A loop over a step's few rows in Python: numpy's masked, casting copy costs several times
    # more to set up than the loop takes. int() truncates as numpy's cast does.
    for i in range(n):
        if u[i] < epsilon:
            greedy[i] = int(u[n + i] * n_actions)
    return greedy
