"""Configuration of Ape-X (Horgan et al. 2018); field names are the CLI flags.

Read once, by the builder, which turns it into value objects (``ExplorationSchedule``,
``NStepReturns``, ``Prioritization``, ``RateLimiter``, ``TargetUpdate``) and explicit arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate
from gorila.errors import ConfigError
from gorila.learners.target import TargetUpdate
from gorila.losses.kinds import LOSS_KINDS, TARGET_KINDS
from gorila.replay.shard import REPLAY_PLACEMENTS
from gorila.validate import MAX_PROCESSES


@dataclass(frozen=True)
class ApexConfig:
    """Actors (each with a fixed ε_i = eps_base^(1 + eps_alpha·i/(N−1)), its own network copy and
    vector envs, n-step rows with initial priorities) → prioritized replay shards with a rate
    limiter → learners that prefetch from every shard, weight by importance and send priorities
    back, pushing gradients to the parameter server under any update rule."""

    optimizer: ClassVar[str] = "adam"  # --optimizer overrides it
    EVAL_EPSILON: ClassVar[float] = 0.05  # DQN-family agents are evaluated ε-greedily with 0.05

    actors: int = field(default=2, metadata={"help": "actors, each with its own fixed exploration rate"})
    envs_per_actor: int = field(default=8, metadata={"help": "vectorised envs per actor (one forward pass per step)"})
    learners: int = field(default=1, metadata={"help": "learners (each samples every replay shard)"})
    replay_shards: int = field(default=1, metadata={"help": "replay shards; actor k writes to shard k mod shards"})
    replay_capacity: int = field(default=100_000, metadata={"help": "rows per replay shard"})
    learning_starts: int = field(default=1_000, metadata={"help": "rows in replay (all shards) before sampling"})
    samples_per_insert: float | None = field(default=None, metadata={
        "help": "rate limiter: keep sampled rows per inserted row near this (default: no limit once "
                "learning starts)"})
    batch_size: int = field(default=64, metadata={"help": "minibatch size"})
    prefetch: int = field(default=16, metadata={
        "help": "minibatches per replay request (the next request is in flight while they are used)"})
    n_step: int = field(default=3, metadata={"help": "n of the n-step returns built at the actors"})
    gamma: float = field(default=0.99, metadata={"help": "discount"})
    priority_alpha: float = field(default=0.6, metadata={"help": "prioritization exponent (0: uniform)"})
    priority_beta: float = field(default=0.4, metadata={
        "help": "importance-sampling exponent at the start, annealed to 1 over --total-steps"})
    eps_base: float = field(default=0.4, metadata={"help": "per-actor exploration: eps_i = base^(1 + alpha*i/(N-1))"})
    eps_alpha: float = field(default=7.0, metadata={"help": "per-actor exploration exponent"})
    actor_refresh: int = field(default=50, metadata={"help": "actor steps between parameter pulls"})
    add_every: int = field(default=4, metadata={"help": "actor steps per replay add (rows are sent in batches)"})
    target: str = field(default="double", metadata={
        "help": "bootstrap target: double (double Q-learning) or max (the Nature DQN target)", "choices": TARGET_KINDS})
    target_update: TargetUpdate = field(default=TargetUpdate.hard(100), metadata={
        "help": "hard:N (copy server params every N global updates) or soft:TAU", "metavar": "hard:N|soft:TAU"})
    dueling: bool = field(default=False, metadata={"help": "dueling network head (value and advantage streams)"})
    loss: str = field(default="huber", metadata={"help": "TD loss", "choices": LOSS_KINDS})
    lr: float = field(default=1e-3, metadata={
        "help": "server learning rate (Atari wants ~1e-4 to 2.5e-4)"})
    max_grad_norm: float | None = field(default=40.0, metadata={"help": "clip each pushed gradient to this norm"})
    hidden: tuple[int, ...] = field(default=(64, 64), metadata={"help": "MLP hidden sizes (vector observations)"})
    replay_placement: str = field(default="spread", metadata={
        "help": "node: replay shard s on node s (mod nodes), written only by the actors placed on its node; "
                "spread: wherever Ray places them", "choices": REPLAY_PLACEMENTS})
    checkpoint_replay: bool = field(default=False, metadata={
        "help": "replay shards save themselves with every checkpoint and come back from it (on --resume, or "
                "when a crashed shard is restarted)"})

    def __post_init__(self) -> None:
        for name in ("actors", "learners", "replay_shards"):
            validate.integer(name, getattr(self, name), low=1, high=MAX_PROCESSES)
        for name in ("envs_per_actor", "replay_capacity", "batch_size", "prefetch", "n_step", "actor_refresh",
                     "add_every"):
            validate.integer(name, getattr(self, name), low=1)
        validate.integer("learning_starts", self.learning_starts, low=1)
        if self.replay_shards > self.actors:
            raise ConfigError("replay_shards", f"each shard is fed by its own actors, so at most --actors "
                                               f"({self.actors}) shards; got {self.replay_shards}")
        if self.learning_starts > self.replay_capacity * self.replay_shards:
            raise ConfigError("learning_starts", f"must be <= the replay's capacity "
                                                 f"({self.replay_capacity * self.replay_shards} rows over all shards)")
        if self.samples_per_insert is not None:
            validate.number("samples_per_insert", self.samples_per_insert, low=0.0, low_open=True)
        validate.number("gamma", self.gamma, low=0.0, high=1.0)
        validate.number("priority_alpha", self.priority_alpha, low=0.0)
        validate.number("priority_beta", self.priority_beta, low=0.0, high=1.0)
        validate.number("eps_base", self.eps_base, low=0.0, high=1.0)
        validate.number("eps_alpha", self.eps_alpha, low=0.0)
        validate.choice("target", self.target, TARGET_KINDS)
        validate.choice("loss", self.loss, LOSS_KINDS)
        validate.choice("replay_placement", self.replay_placement, REPLAY_PLACEMENTS)
        if isinstance(self.target_update, str):  # the CLI's spelling, or config.json's
            object.__setattr__(self, "target_update", TargetUpdate.parse(self.target_update))
        if not isinstance(self.target_update, TargetUpdate):
            raise ConfigError("target_update",
                              f"must be hard:N or soft:TAU, got {validate.excerpt(self.target_update)}")
        validate.number("lr", self.lr, low=0.0, low_open=True)
        if self.max_grad_norm is not None:
            validate.number("max_grad_norm", self.max_grad_norm, low=0.0, low_open=True)
        validate.widths("hidden", self.hidden)
