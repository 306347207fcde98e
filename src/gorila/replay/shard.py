"""Replay as a service: one shard of a global replay that actors add to and learners sample from.

A runtime hosts each :class:`ReplayShard` as a service (``Plan.services``); actors and learners
reach it through a typed :class:`~gorila.replay.client.RemoteReplay`::

    replay = RemoteReplay(endpoint)
    replay.add(transitions, writer="actor0-3f2a", seq=0).result(timeout_s)   # rows stored
    batch = replay.sample(32).result(timeout_s)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from gorila import validate
from gorila.checkpoint import Field, check_meta, load_checkpoint, save_checkpoint
from gorila.errors import CheckpointError
from gorila.replay.memory import check_replay_memory, make_storage
from gorila.replay.priority import PrioritizedSampler
from gorila.replay.rate_limit import RateLimiter
from gorila.types import Batch, Transitions

#: ``--replay-placement``: ``node`` (shard s and its actors on node s) or ``spread`` (where Ray likes).
REPLAY_PLACEMENTS = ("node", "spread")
# Priorities are kept above 0: a slot with priority 0 would never be drawn again.
PRIORITY_FLOOR = 1e-6
#: The fields of a replay checkpoint's meta that a restored shard takes up; a checkpoint whose
#: fields are not so is skipped for the one before.
_META = {"added": Field("count"), "sampled": Field("count"), "duplicates": Field("count"),
         "max_priority": Field("seconds"), "last_seq": Field("mapping"), "open_at": Field("count", nullable=True)}


@dataclass(frozen=True)
class Prioritization:
    """Proportional prioritized replay's settings (Schaul et al. 2016) as one value::

        Prioritization(alpha=0.6, beta=0.4, anneal_inserts=1_000_000)

    Slots are drawn ∝ ``priority^alpha``; the importance-sampling exponent starts at ``beta`` and
    rises linearly to 1 as the shard receives ``anneal_inserts`` rows (its share of the run's env
    steps), so the bias correction is complete by the end of the run.
    """

    alpha: float = 0.6
    beta: float = 0.4
    anneal_inserts: int = 1_000_000

    def __post_init__(self) -> None:
        validate.number("priority_alpha", self.alpha, low=0.0)
        validate.number("priority_beta", self.beta, low=0.0, high=1.0)
        validate.integer("anneal_inserts", self.anneal_inserts, low=1)

    def beta_after(self, inserts: int) -> float:
        return self.beta + (1.0 - self.beta) * min(1.0, inserts / self.anneal_inserts)


class ReplayShard:
    """One replay shard: storage, a sampler, a rate limiter, and at-most-once adds::

        shard = ReplayShard(0, capacity=50_000, obs_shape=(4,), obs_dtype=np.float32, num_streams=2,
                            prioritization=Prioritization(), limiter=RateLimiter.min_size(1000))
        shard.add(rows, writer="actor-3f2a", seq=0, priorities=p)  # -> rows stored (None: wait, then retry)
        shard.add(rows, writer="actor-3f2a", seq=0)                # -> 0: a redelivery
        batch = shard.sample(32)                                   # a Batch, or None: wait, then retry
        shard.update_priorities(batch.indices, abs_td_errors)

    A writer numbers its batches 0, 1, 2, ...; a batch whose number is not above the last one
    stored from that writer is a redelivery (a retried call) and is dropped, so every row enters at
    most once. A row's ``env_index`` is its stream (one per actor environment, numbered across the
    shard's actors), so stacked Atari frames are stored once. Without ``prioritization`` sampling
    is uniform and priorities are not needed; with it, a new row enters with the priority its actor
    computed (or the highest seen so far when none is given). ``Batch.indices`` are keys that
    name a row *and its generation*: priorities sent back for a row evicted since are ignored.
    The storage's size is checked against this machine's free memory when the shard is built.
    With ``checkpoints`` a shard saves itself there on :meth:`save` and, when built again (a
    resumed run, or a process restarted after a crash), starts from the newest good checkpoint.
    """

    def __init__(self, shard_id: int, capacity: int, obs_shape: tuple[int, ...], obs_dtype: DTypeLike, *,
                 num_streams: int = 1, seed: int = 0, prioritization: Prioritization | None = None,
                 limiter: RateLimiter = RateLimiter(), checkpoints: Path | None = None):
        check_replay_memory(capacity, obs_shape, obs_dtype)
        self.shard_id = shard_id
        self.storage = make_storage(capacity, tuple(obs_shape), obs_dtype, num_streams=num_streams)
        self.slots = self.storage.num_slots
        self.prioritization, self.limiter = prioritization, limiter
        self.sampler = None if prioritization is None else PrioritizedSampler(self.slots, prioritization.alpha)
        self.generation = np.zeros(self.slots, np.int64)  # bumped whenever a slot's row changes
        self.max_priority = 1.0
        self.rng = np.random.default_rng([seed, shard_id])
        self.last_seq: dict[str, int] = {}
        self.open_at: int | None = None
        self.latest_refused = -1
        self.started: set[int] = set()  # learners let in (see ready)
        self.added = self.duplicates = self.sampled = 0
        self.bytes_added = self.bytes_sampled = 0  # the traffic of this shard's adds and samples
        self.refused_adds = self.refused_samples = self.stale_priorities = 0
        self.checkpoints = None if checkpoints is None else Path(checkpoints) / f"replay-shard{shard_id}"
        self.restored = self.checkpoints is not None and self._restore(self.checkpoints)
        self.restored_size = len(self.storage)

    def add(self, transitions: Transitions, writer: str, seq: int, priorities: np.ndarray | None = None) -> int | None:
        """Store the rows (in order within each stream); returns how many were stored, or None when
        the rate limiter asks the writer to wait (the batch is not stored: send it again later)."""
        if seq <= self.last_seq.get(writer, -1):
            self.duplicates += 1
            return 0
        if not self.limiter.can_insert(self.added, self.sampled, len(transitions)):
            self.refused_adds += 1
            return None
        self.last_seq[writer] = seq
        written, lost = self.storage.add(transitions)
        kept = written >= 0
        self.generation[written[kept]] += 1
        self.generation[lost] += 1
        if self.sampler is not None:
            if priorities is None:
                priorities = np.full(len(transitions), self.max_priority)
            priorities = np.asarray(priorities, np.float64)[kept]
            self.max_priority = max(self.max_priority, float(priorities.max(initial=0.0)))
            self.sampler.update(written[kept], np.maximum(priorities, PRIORITY_FLOOR))
            self.sampler.update(lost, np.zeros(len(lost)))
        self.added += len(transitions)
        # vars(), not dataclasses.astuple: astuple deep-copies every array of the batch
        self.bytes_added += sum(a.nbytes for a in vars(transitions).values() if isinstance(a, np.ndarray))
        return len(transitions)

    def sample(self, batch_size: int) -> Batch | None:
        """``batch_size`` rows (uniformly, or ∝ priority with importance weights), or None while the
        rate limiter holds sampling back (too few rows yet, or sampling ahead of inserting)."""
        if not self.limiter.can_sample(self.added, self.sampled, batch_size):
            self.refused_samples += 1
            return None
        if self.sampler is None:
            batch = self.storage.sample(batch_size, self.rng)
        else:
            beta = self._beta()
            indices, weights = self.sampler.sample(batch_size, beta, self.rng)
            batch = self.storage.gather(indices, weights)
        self.sampled += batch_size
        self.bytes_sampled += sum(a.nbytes for a in batch)
        return batch._replace(indices=self.generation[batch.indices] * self.slots + batch.indices)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities (e.g. ``|TD error|``) for sampled rows; rows evicted since are skipped.
        A uniform shard samples regardless of priority and ignores them."""
        if self.sampler is None:
            return
        keys = np.asarray(keys, np.int64)
        generation, slots = np.divmod(keys, self.slots)
        current = self.generation[slots] == generation
        self.stale_priorities += int((~current).sum())
        priorities = np.maximum(np.asarray(priorities, np.float64)[current], PRIORITY_FLOOR)
        if len(priorities):
            self.max_priority = max(self.max_priority, float(priorities.max()))
        self.sampler.update(slots[current], priorities)

    def size(self) -> int:
        return len(self.storage)

    def ready(self, learner: int, step: int, min_size: int) -> bool:
        """Whether learner ``learner`` may sample at its step ``step``: the same answer to every learner.

        The first call that finds ``min_size`` rows fixes the opening step, never at or below a
        step already refused; from then on the answer is ``step >= open_at``. Learners that step
        in lockstep (one push per step under a synchronous rule) therefore start pushing at the
        same step, whichever of them asked first. A learner let in once is let in at any step:
        restarted after a crash, it counts its steps from 0 again and picks up at once rather than
        stepping idly up to the opening step.
        """
        if learner in self.started:
            return True
        if self.open_at is None:
            if len(self.storage) < min_size:
                self.latest_refused = max(self.latest_refused, step)
                return False
            self.open_at = max(step, self.latest_refused + 1)
        if step < self.open_at:
            return False
        self.started.add(learner)
        return True

    def save(self) -> str:
        """Write a checkpoint of everything this shard holds (into ``checkpoints``); its path."""
        if self.checkpoints is None:
            raise CheckpointError(f"replay shard {self.shard_id} was built without a checkpoint directory")
        arrays = {f"storage.{k}": v for k, v in self.storage.state_dict().items()}
        arrays["generation"] = self.generation
        if self.sampler is not None:
            arrays.update({f"sampler.{k}": v for k, v in self.sampler.state_dict().items()})
        meta = {"added": self.added, "sampled": self.sampled, "duplicates": self.duplicates,
                "max_priority": self.max_priority, "last_seq": self.last_seq, "open_at": self.open_at,
                "started": sorted(self.started)}
        return str(save_checkpoint(self.checkpoints, arrays, meta))

    def _restore(self, checkpoints: Path) -> bool:
        """Load the newest good checkpoint there, if there is one."""
        try:
            arrays, meta = load_checkpoint(checkpoints, check=lambda arrays, meta: check_meta(meta, _META))
        except CheckpointError:
            return False
        self.storage.load_state_dict({k[len("storage."):]: v for k, v in arrays.items() if k.startswith("storage.")})
        np.copyto(self.generation, arrays["generation"])
        if self.sampler is not None:
            self.sampler.load_state_dict({k[len("sampler."):]: v for k, v in arrays.items()
                                          if k.startswith("sampler.")})
        self.added, self.sampled, self.duplicates = meta["added"], meta["sampled"], meta["duplicates"]
        self.max_priority, self.last_seq, self.open_at = meta["max_priority"], dict(meta["last_seq"]), meta["open_at"]
        self.started = set(meta.get("started", ()))  # absent from checkpoints written before it was kept
        return True

    def _beta(self) -> float:
        """The importance-sampling exponent after the inserts so far (1: no prioritization)."""
        return 1.0 if self.prioritization is None else self.prioritization.beta_after(self.added)

    def stats(self) -> dict[str, Any]:
        """Counters (in rows), and the priorities' state when prioritized. ``pid`` tells a restarted
        shard apart; ``restored`` says whether it came back from a checkpoint."""
        out: dict[str, Any] = {"shard": self.shard_id, "pid": os.getpid(), "restored": self.restored,
               "restored_size": self.restored_size, "size": len(self.storage),
               "added": self.added, "bytes_added": self.bytes_added, "bytes_sampled": self.bytes_sampled,
               "duplicates": self.duplicates, "sampled": self.sampled, "refused_adds": self.refused_adds,
               "refused_samples": self.refused_samples}
        if self.sampler is not None:
            out.update(priority_max=self.max_priority, stale_priorities=self.stale_priorities,
                       beta=self._beta())
        return out
@dataclass(frozen=True)
class ShardedReplaySpec:
    """A global replay of ``num_shards`` shards fed by ``actors`` actors (small and picklable)::

        spec = ShardedReplaySpec(num_shards=2, actors=4, envs_per_actor=8, capacity=50_000,
                                 obs_shape=(4,), obs_dtype=np.float32, seed=0)
        runtime.start_services(spec.build, spec.num_shards, name="replay")
        shard, slot = spec.route(actor=3)          # (1, 1)

    Replay is sharded by actor group (as in Menger): actors ``s, s + S, s + 2S, ...`` write to
    shard ``s`` only, each environment of each as its own stream. ``capacity`` is per shard, and so
    are ``prioritization`` and ``limiter`` (each shard limits its own inserts and samples).
    How the union is sampled: learners take their requests from the shards in turn, so each shard
    gives the same share of rows. Shards get the same number of actors (±1), so they fill at about
    the same rate and hold about the same number of rows; a row is then drawn about as often as
    from one replay holding them all (uniformly: exactly so once the shards are full, with equal
    capacities). Prioritized, each shard draws in proportion to its own priorities and weights by
    its own importance weights, so the union's bias correction holds shard by shard. Placed by node
    (``--replay-placement node``), shard ``s`` and its actors share node ``s``: rows never leave
    it until a learner samples them.
    """

    num_shards: int
    actors: int
    envs_per_actor: int
    capacity: int
    obs_shape: tuple[int, ...]
    obs_dtype: Any
    seed: int = 0
    prioritization: Prioritization | None = None
    limiter: RateLimiter = RateLimiter()
    checkpoints: Path | None = None  # where shards save and restore themselves (None: not at all)

    def route(self, actor: int) -> tuple[int, int]:
        """``(shard, slot)``: actor ``actor`` writes to ``shard``, as that shard's ``slot``-th actor."""
        return actor % self.num_shards, actor // self.num_shards

    def shard_of(self, actor: int) -> int:
        """The shard actor ``actor`` writes to: placed by node, the actor runs on that shard's node."""
        return self.route(actor)[0]

    def node_of_shard(self, shard: int) -> int:
        """Placed by node, shard ``s`` runs on node ``s`` (modulo the nodes)."""
        return shard

    def build(self, shard_id: int) -> ReplayShard:
        routed = sum(self.route(k)[0] == shard_id for k in range(self.actors))
        return ReplayShard(shard_id, self.capacity, self.obs_shape, self.obs_dtype,
                           num_streams=routed * self.envs_per_actor, seed=self.seed,
                           prioritization=self.prioritization, limiter=self.limiter, checkpoints=self.checkpoints)
