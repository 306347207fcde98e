"""A fixed-length segment of experience: ``T`` steps of ``N`` environments acted by one policy copy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Segment:
    """``--unroll-length`` steps of an actor's envs, as a learner consumes them (IMPALA, PPO)::

        segment = actor.collect()                          # obs (T, N, ...), actions (T, N), ...
        batch = Segment.concatenate([s1, s2])              # envs side by side: (T, N1 + N2, ...)
        lag = learner_version - segment.policy_version.min()

    ``discounts[t, n]`` is gamma * (1 - terminated); a step where the episode was truncated keeps its
    discount and ``truncated`` marks it: the learner bootstraps there from the value of
    ``final_obs[t, n]`` (the observation it was cut at) instead of from ``obs[t + 1, n]``.
    ``valid[t, n]`` is false where env ``n`` took no real step (it spent the step resetting, or it
    failed): such a slot joins no loss term. ``log_probs`` are the behaviour policy's
    ``log mu(a_t|x_t)``; ``policy_version`` the server version of the parameters that chose each
    action. ``last_obs`` is the observation after the final step, the bootstrap of the segment.
    """

    obs: np.ndarray             # (T, N, *obs_shape)
    actions: np.ndarray         # (T, N) int64
    rewards: np.ndarray         # (T, N) float32
    discounts: np.ndarray       # (T, N) float32
    truncated: np.ndarray       # (T, N) bool
    final_obs: np.ndarray       # (T, N, *obs_shape), read where truncated
    valid: np.ndarray           # (T, N) bool
    log_probs: np.ndarray       # (T, N) float32, of the behaviour policy
    policy_version: np.ndarray  # (T, N) int64
    last_obs: np.ndarray        # (N, *obs_shape)

    @property
    def steps(self) -> int:
        """Real env steps in the segment."""
        return int(self.valid.sum())

    @property
    def oldest_version(self) -> int:
        return int(self.policy_version[self.valid].min()) if self.valid.any() else int(self.policy_version.min())

    @classmethod
    def concatenate(cls, segments: list[Segment]) -> Segment:
        """The segments' envs side by side (all of one length ``T``)."""
        if len({s.actions.shape[0] for s in segments}) != 1:
            raise ValueError("segments of different lengths cannot be batched")
        return cls(**{f.name: np.concatenate([getattr(s, f.name) for s in segments],
                                             axis=0 if f.name == "last_obs" else 1)
                      for f in dataclasses.fields(cls)})
