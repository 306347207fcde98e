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
    discount and ``truncated`` marks it: the learner bootstraps there from the value of the
    observation it was cut at instead of from ``obs[t + 1, n]``. ``final_obs`` holds those
    observations alone, one per truncated step in the order of ``np.nonzero(truncated)`` (time,
    then env): episodes are rarely cut, and a dense ``(T, N, ...)`` array of them would double
    what a segment of frames weighs as it travels.
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
    final_obs: np.ndarray       # (truncated.sum(), *obs_shape), in np.nonzero(truncated) order
    valid: np.ndarray           # (T, N) bool
    log_probs: np.ndarray       # (T, N) float32, of the behaviour policy
    policy_version: np.ndarray  # (T, N) int64
    last_obs: np.ndarray        # (N, *obs_shape)

    def __post_init__(self) -> None:
        if len(self.final_obs) != int(self.truncated.sum()):
            raise ValueError(f"final_obs holds {len(self.final_obs)} observations for "
                             f"{int(self.truncated.sum())} truncated steps")

    def final_values_at(self, mask: np.ndarray) -> np.ndarray:
        """The final observations of the truncated steps that ``mask`` (``(T, N)`` bool) also marks."""
        return self.final_obs[mask[self.truncated]]

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
        sparse = ("last_obs", "final_obs")
        joined = {f.name: np.concatenate([getattr(s, f.name) for s in segments], axis=1)
                  for f in dataclasses.fields(cls) if f.name not in sparse}
        # Each segment's final observations are in its own (time, env) order; side by side, the
        # envs of every segment come before the next time step.
        where = [np.nonzero(s.truncated) for s in segments]
        offsets = np.cumsum([0] + [s.actions.shape[1] for s in segments[:-1]])
        times = np.concatenate([t for t, _ in where])
        envs = np.concatenate([n + offset for (_, n), offset in zip(where, offsets)])
        order = np.lexsort((envs, times))
        final_obs = np.concatenate([s.final_obs for s in segments])[order]
        return cls(**joined, final_obs=final_obs, last_obs=np.concatenate([s.last_obs for s in segments]))
