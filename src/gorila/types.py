"""The data every layer passes, at the bottom of the package: it imports nothing of gorila.

- :class:`Transitions`: rows of real env steps, as actors hand them out and replay stores them.
- :class:`Episode`: a finished episode's score and length.
- :class:`Segment`: ``--unroll-length`` steps of an actor's envs, as IMPALA's and PPO's learners take them.
- :class:`Batch`: a minibatch sampled from replay.

Envs, actors, replay, trajectory queues and learners all import these from here, so none of them
depends on another's module for its data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


@dataclass(frozen=True)
class Transitions:
    """One row per environment that took a real step; ``env_index`` says which. ``len`` counts rows.

    An actor tags each row with the ``policy_version`` (the server version of the parameters that
    chose its action; None where no policy was involved). Rows bound for replay also carry
    ``discount`` and ``steps`` (see :class:`gorila.actors.nstep.NStep`): the TD target of row ``i`` is
    ``reward[i] + discount[i] · Q(next_obs[i])``, ``next_obs`` being ``steps[i]`` steps after ``obs``.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray       # float32, the training reward (sign-clipped for Atari training)
    next_obs: np.ndarray
    terminated: np.ndarray   # bool
    truncated: np.ndarray    # bool
    env_index: np.ndarray    # int64
    policy_version: np.ndarray | None = None  # int64 per row
    discount: np.ndarray | None = None        # float32 per row
    steps: np.ndarray | None = None           # int64 per row

    def __len__(self) -> int:
        return len(self.env_index)

    @classmethod
    def concatenate(cls, parts: list[Transitions]) -> Transitions:
        """The rows of ``parts`` in order."""
        # arg-type: mypy cannot tell the required columns (never None) from the optional ones
        return cls(*(None if getattr(parts[0], f.name) is None else np.concatenate([getattr(t, f.name) for t in parts])  # type: ignore[arg-type]
                     for f in dataclasses.fields(cls)))


class Episode(NamedTuple):
    """A finished episode: undiscounted return of the unclipped rewards, and its length in steps."""

    score: float
    length: int
    env_index: int


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

    A recurrent policy's segment (``--core lstm``) also carries ``core_state``, the core state each
    env carried into the segment's first step, and ``starts[t, n]``, true where ``obs[t, n]`` begins
    an episode (its state is zeroed before that step): the learner unrolls the network from
    ``core_state`` over the segment with those resets and computes what the actor computed. Both are
    None for a feed-forward policy.
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
    core_state: np.ndarray | None = None  # (N, *state_shape) float32, recurrent policies only
    starts: np.ndarray | None = None      # (T, N) bool, recurrent policies only

    def __post_init__(self) -> None:
        if len(self.final_obs) != int(self.truncated.sum()):
            raise ValueError(f"final_obs holds {len(self.final_obs)} observations for "
                             f"{int(self.truncated.sum())} truncated steps")

    def final_values_at(self, mask: np.ndarray) -> np.ndarray:
        """The final observations of the truncated steps that ``mask`` (``(T, N)`` bool) also marks."""
        chosen: np.ndarray = self.final_obs[mask[self.truncated]]
        return chosen

    @property
    def steps(self) -> int:
        """Real env steps in the segment."""
        return int(self.valid.sum())

    @property
    def oldest_version(self) -> int:
        return int(self.policy_version[self.valid].min()) if self.valid.any() else int(self.policy_version.min())

    @classmethod
    def concatenate(cls, segments: list[Segment]) -> Segment:
        """The segments' envs side by side (all of one length ``T``); one segment is itself (a
        segment is never changed once made)."""
        if len(segments) == 1:
            return segments[0]
        if len({s.actions.shape[0] for s in segments}) != 1:
            raise ValueError("segments of different lengths cannot be batched")
        sparse = ("last_obs", "final_obs", "core_state")
        joined: dict[str, Any] = {f.name: None if getattr(segments[0], f.name) is None
                  else np.concatenate([getattr(s, f.name) for s in segments], axis=1)
                  for f in dataclasses.fields(cls) if f.name not in sparse}
        # Each segment's final observations are in its own (time, env) order; side by side, the
        # envs of every segment come before the next time step.
        where = [np.nonzero(s.truncated) for s in segments]
        offsets = np.cumsum([0] + [s.actions.shape[1] for s in segments[:-1]])
        times = np.concatenate([t for t, _ in where])
        envs = np.concatenate([n + offset for (_, n), offset in zip(where, offsets)])
        order = np.lexsort((envs, times))
        final_obs = np.concatenate([s.final_obs for s in segments])[order]
        core_state = (None if segments[0].core_state is None
                      else np.concatenate([s.core_state for s in segments]))
        return cls(**joined, final_obs=final_obs, last_obs=np.concatenate([s.last_obs for s in segments]),
                   core_state=core_state)


class Batch(NamedTuple):
    """A sampled minibatch. The TD target of row ``i`` is ``reward[i] + discount[i] · Q(next_obs[i])``
    (``discount`` is 0 where the episode terminated). ``indices`` name the rows in their storage (to
    send priorities back), ``weights`` are importance weights (1 under uniform sampling),
    ``policy_version`` is the parameter version that acted."""

    obs: np.ndarray
    action: np.ndarray          # int64
    reward: np.ndarray          # float32
    next_obs: np.ndarray
    discount: np.ndarray        # float32
    indices: np.ndarray         # int64
    weights: np.ndarray         # float32
    policy_version: np.ndarray  # int64
