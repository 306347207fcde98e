"""Proportional prioritized sampling (Schaul et al. 2016) over a replay's slots, separate from storage.

A slot with priority ``p`` is drawn with probability ``P(i) = p_i^α / Σ_k p_k^α``; its importance
weight is ``w_i = (N · P(i))^-β``, divided by the largest possible weight ``(N · P_min)^-β`` so every
weight is at most 1, as the paper's reference implementations do. Sums and minima live in two
array-backed binary trees whose updates and descents run level by level on whole batches (numpy,
no Python loop per item)::

    sampler = PrioritizedSampler(capacity=1024, alpha=0.6)
    sampler.update(indices, priorities)                        # new slots, or TD errors after a step
    indices, weights = sampler.sample(32, beta=0.4, rng=np.random.default_rng(0))
    sampler.update(evicted, np.zeros(len(evicted)))            # priority 0: never drawn again
"""

from __future__ import annotations

import numpy as np

from gorila import validate


class _Tree:
    """A complete binary tree over ``capacity`` leaves (rounded up to a power of two) in one array:
    node ``k``'s children are ``2k`` and ``2k + 1``; leaves are ``[size, 2·size)``."""

    def __init__(self, capacity: int, combine: np.ufunc, empty: float):
        self.size = 1 << max(capacity - 1, 0).bit_length()
        self.depth = self.size.bit_length() - 1
        self.combine, self.empty = combine, empty
        self.nodes = np.full(2 * self.size, empty, np.float64)

    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Leaves ``indices`` (distinct) take ``values``; their ancestors are recomputed level by level.
        Siblings share a parent, which is then written twice with the same value: cheaper than
        deduplicating every level."""
        nodes = indices + self.size
        self.nodes[nodes] = values
        for _ in range(self.depth):
            nodes >>= 1
            self.nodes[nodes] = self.combine(self.nodes[2 * nodes], self.nodes[2 * nodes + 1])

    @property
    def root(self) -> float:
        return float(self.nodes[1])


class PrioritizedSampler:
    """Proportional prioritized sampling over ``capacity`` slots (see the module doc).

    Slots start with priority 0 (never drawn). Priorities must be finite and >= 0; a slot is
    *present* while its priority is above 0, and ``len(sampler)`` counts them (``N`` in the weights).
    """

    def __init__(self, capacity: int, alpha: float = 0.6):
        validate.integer("replay_capacity", capacity, low=1)
        validate.number("alpha", alpha, low=0.0)
        self.capacity, self.alpha = capacity, alpha
        self._sum = _Tree(capacity, np.add, 0.0)
        self._min = _Tree(capacity, np.minimum, np.inf)
        self._present = np.zeros(capacity, bool)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def total(self) -> float:
        """The sum of every present slot's ``p^α``."""
        return self._sum.root

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priority of each slot in ``indices``; 0 removes a slot from sampling."""
        indices = np.asarray(indices, np.int64)
        priorities = np.asarray(priorities, np.float64)
        if indices.shape != priorities.shape or indices.ndim != 1:
            raise ValueError(f"indices {indices.shape} and priorities {priorities.shape} must be equal 1-D arrays")
        if len(indices) == 0:
            return
        if indices.min() < 0 or indices.max() >= self.capacity:
            raise IndexError(f"slot indices must be in [0, {self.capacity}), got {indices.min()}..{indices.max()}")
        if not np.all(np.isfinite(priorities)) or priorities.min() < 0:
            raise ValueError("priorities must be finite and >= 0")
        # The last of a repeated index wins, in both trees and in the presence mask alike.
        last = len(indices) - 1 - np.unique(indices[::-1], return_index=True)[1]
        indices, priorities = indices[last], priorities[last]
        scaled = priorities ** self.alpha
        scaled[priorities == 0] = 0.0  # 0 ** 0 is 1: an absent slot stays absent even with alpha 0
        present = priorities > 0
        self._count += int(present.sum()) - int(self._present[indices].sum())
        self._present[indices] = present
        self._sum.set(indices, scaled)
        self._min.set(indices, np.where(priorities > 0, scaled, np.inf))

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every slot's ``p^α`` (0 where absent): the trees are rebuilt from it."""
        return {"scaled": self._sum.nodes[self._sum.size:self._sum.size + self.capacity].copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        scaled = np.asarray(state["scaled"], np.float64)
        if scaled.shape != (self.capacity,):
            raise ValueError(f"sampler state has {scaled.shape[0]} slots, this sampler {self.capacity}")
        indices = np.arange(self.capacity)
        self._present[:] = scaled > 0
        self._count = int(self._present.sum())
        self._sum.set(indices, scaled)
        self._min.set(indices, np.where(scaled > 0, scaled, np.inf))

    def priorities(self, indices: np.ndarray) -> np.ndarray:
        """``p^α`` of each slot (0 where absent)."""
        return self._sum.nodes[np.asarray(indices, np.int64) + self._sum.size].copy()

    def sample(self, batch_size: int, beta: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``batch_size`` slot indices drawn ∝ ``p^α`` (stratified: one draw from each of
        ``batch_size`` equal slices of the total mass), and their normalised IS weights (float32)."""
        validate.integer("batch_size", batch_size, low=1)
        validate.number("beta", beta, low=0.0, high=1.0)
        total = self.total
        if total <= 0:
            raise ValueError("cannot sample: no slot has a priority above 0")
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        indices = self._find(np.minimum(targets, np.nextafter(total, 0)))
        absent = ~self._present[indices]  # float round-off can end a descent on an empty leaf
        if absent.any():
            indices[absent] = self._find(rng.random(int(absent.sum())) * total * (1 - 1e-9))
        probability = self.priorities(indices) / total
        n = len(self)
        weights = (n * probability) ** -beta
        weights /= (n * self._min.root / total) ** -beta  # the largest weight any present slot can have
        return indices, weights.astype(np.float32)

    def _find(self, targets: np.ndarray) -> np.ndarray:
        """The leaf whose prefix-sum interval holds each target: one vectorised step per level."""
        nodes = np.ones(len(targets), np.int64)
        targets = targets.copy()
        tree = self._sum.nodes
        while nodes[0] < self._sum.size:
            left = tree[2 * nodes]
            right = targets >= left
            targets -= left * right
            nodes = 2 * nodes + right
        return np.minimum(nodes - self._sum.size, self.capacity - 1)
