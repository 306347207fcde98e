"""Replay as a service: one shard of a global replay that actors add to and learners sample from.

A runtime hosts each :class:`ReplayShard` as a service (``Plan.services``); actors and learners
reach it through a typed :class:`~gorila.replay.client.RemoteReplay`::

    replay = RemoteReplay(endpoint)
    replay.add(transitions, writer="actor0-3f2a", seq=0).result(timeout_s)   # rows stored
    batch = replay.sample(32).result(timeout_s)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gorila.envs.vector import Transitions
from gorila.replay.memory import check_replay_memory, make_storage
from gorila.replay.storage import Batch


class ReplayShard:
    """One replay shard: a ring storage, uniform sampling, and at-most-once adds::

        shard = ReplayShard(0, capacity=50_000, obs_shape=(4,), obs_dtype=np.float32, num_streams=2, seed=0)
        shard.add(transitions, writer="actor-3f2a", seq=0)     # -> rows stored
        shard.add(transitions, writer="actor-3f2a", seq=0)     # -> 0: a redelivery
        shard.ready(step=0, min_size=1000)   # False until it holds 1000 transitions
        batch = shard.sample(32)             # a Batch of numpy arrays

    A writer numbers its batches 0, 1, 2, ...; a batch whose number is not above the last one
    stored from that writer is a redelivery (a retried call) and is dropped, so every transition
    enters at most once. A transition's ``env_index`` is its stream (one per actor environment,
    numbered across the shard's actors), so stacked Atari frames are stored once. The storage's
    size is checked against this machine's free memory when the shard is built.
    """

    def __init__(self, shard_id: int, capacity: int, obs_shape: tuple[int, ...], obs_dtype, *,
                 num_streams: int = 1, seed: int = 0):
        check_replay_memory(capacity, obs_shape, obs_dtype)
        self.shard_id = shard_id
        self.storage = make_storage(capacity, tuple(obs_shape), obs_dtype, num_streams=num_streams)
        self.rng = np.random.default_rng([seed, shard_id])
        self.last_seq: dict[str, int] = {}
        self.open_at: int | None = None
        self.latest_refused = -1
        self.added = 0
        self.duplicates = 0
        self.sampled = 0

    def add(self, transitions: Transitions, writer: str, seq: int) -> int:
        """Store the rows (in order within each stream); returns how many were stored."""
        if seq <= self.last_seq.get(writer, -1):
            self.duplicates += 1
            return 0
        self.last_seq[writer] = seq
        t = transitions
        self.storage.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
        self.added += len(t)
        return len(t)

    def sample(self, batch_size: int) -> Batch:
        """``batch_size`` transitions drawn uniformly with replacement (``ValueError`` while empty)."""
        batch = self.storage.sample(batch_size, self.rng)
        self.sampled += batch_size
        return batch

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Uniform sampling draws every stored transition alike: priorities change nothing here."""

    def size(self) -> int:
        return len(self.storage)

    def ready(self, step: int, min_size: int) -> bool:
        """Whether learners may sample at their step ``step``: the same answer to every learner.

        The first call that finds ``min_size`` transitions fixes the opening step, never at or
        below a step already refused; from then on the answer is ``step >= open_at``. Learners
        that step in lockstep (one push per step under a synchronous rule) therefore start
        pushing at the same step, whichever of them asked first.
        """
        if self.open_at is None:
            if len(self.storage) < min_size:
                self.latest_refused = max(self.latest_refused, step)
                return False
            self.open_at = max(step, self.latest_refused + 1)
        return step >= self.open_at

    def stats(self) -> dict[str, Any]:
        return {"shard": self.shard_id, "size": len(self.storage), "added": self.added,
                "duplicates": self.duplicates, "sampled": self.sampled}


@dataclass(frozen=True)
class ShardedReplaySpec:
    """A global replay of ``num_shards`` shards fed by ``actors`` actors (small and picklable)::

        spec = ShardedReplaySpec(num_shards=2, actors=4, envs_per_actor=8, capacity=50_000,
                                 obs_shape=(4,), obs_dtype=np.float32, seed=0)
        runtime.start_services(spec.build, spec.num_shards, name="replay")
        shard, slot = spec.route(actor=3)          # (1, 1)

    Replay is sharded by actor group (as in Menger): actors ``s, s + S, s + 2S, ...`` write to
    shard ``s`` only, each environment of each as its own stream. ``capacity`` is per shard.
    """

    num_shards: int
    actors: int
    envs_per_actor: int
    capacity: int
    obs_shape: tuple[int, ...]
    obs_dtype: Any
    seed: int = 0

    def route(self, actor: int) -> tuple[int, int]:
        """``(shard, slot)``: actor ``actor`` writes to ``shard``, as that shard's ``slot``-th actor."""
        return actor % self.num_shards, actor // self.num_shards

    def build(self, shard_id: int) -> ReplayShard:
        routed = sum(self.route(k)[0] == shard_id for k in range(self.actors))
        return ReplayShard(shard_id, self.capacity, self.obs_shape, self.obs_dtype,
                           num_streams=routed * self.envs_per_actor, seed=self.seed)
