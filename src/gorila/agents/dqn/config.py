"""Configuration of Gorila DQN; field names are the CLI flags.

The config is read once, by the builder, which turns it into value objects and explicit
arguments (:class:`~gorila.actors.ExplorationSchedule`, :class:`~gorila.learners.target.TargetUpdate`);
no component receives it whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate
from gorila.actors.exploration import ExplorationSchedule
from gorila.errors import ConfigError
from gorila.learners.target import TargetUpdate
from gorila.losses.kinds import LOSS_KINDS, TARGET_KINDS
from gorila.replay.shard import REPLAY_PLACEMENTS
from gorila.validate import MAX_PROCESSES

REPLAY_MODES = ("local", "global")


@dataclass(frozen=True)
class DQNConfig:
    """Gorila DQN. Bundled mode (``replay=local``): each bundle is an Actor, its own replay and a
    Learner in one worker, talking to others only through the parameter server. Global mode
    (``replay=global``): Actors write to ``replay_shards`` replay shards that every Learner samples."""

    # The server optimizer; --optimizer overrides it. Gorila's AdaGrad (at 3e-2) let CartPole's
    # Q-values climb past 1/(1 - gamma) and diverge after the target was reached (bundle_q_mean),
    # while Adam at 1e-3 reached it in as many env steps with its values held below that bound.
    optimizer: ClassVar[str] = "adam"
    EVAL_EPSILON: ClassVar[float] = 0.05  # the DQN papers evaluate ε-greedily with 0.05; --eval-epsilon overrides it

    actors: int = field(default=2, metadata={"help": "actors (bundles in local-replay mode)"})
    learners: int | None = field(default=None, metadata={
        "help": "learners (default: = actors with local replay, 1 with global replay)"})
    replay: str = field(default="local", metadata={"help": "local: bundles; global: a sharded replay service",
                                                   "choices": REPLAY_MODES})
    replay_shards: int = field(default=1, metadata={"help": "replay shards (global replay)"})
    replay_capacity: int = field(default=50_000, metadata={"help": "transitions per replay (shard)"})
    replay_placement: str = field(default="spread", metadata={
        "help": "global replay: node: replay shard s on node s, written only by the actors placed there; "
                "spread: wherever Ray places them", "choices": REPLAY_PLACEMENTS})
    envs_per_actor: int = field(default=1, metadata={"help": "vectorised envs per actor"})
    batch_size: int = field(default=64, metadata={"help": "minibatch size"})
    learning_starts: int = field(default=1000, metadata={"help": "transitions in replay before learning"})
    train_every: int = field(default=1, metadata={"help": "actor steps per learner gradient (bundled mode)"})
    gamma: float = field(default=0.99, metadata={"help": "discount"})
    n_step: int = field(default=1, metadata={"help": "n of the n-step returns built at the actor"})
    loss: str = field(default="huber", metadata={"help": "TD loss", "choices": LOSS_KINDS})
    target: str = field(default="double", metadata={
        "help": "bootstrap target: double (double Q-learning, the textbook's asynchronous learner) or max "
                "(the Nature DQN target, which Gorila used)", "choices": TARGET_KINDS})
    # Each hard refresh lets the values grow by about one more step of return. On CartPole hard:100
    # reached the target sooner, but the values went on past 1/(1 - gamma) and diverged (after the
    # target, or before it at lr 5e-4); hard:1000 (under AdaGrad) had not reached it by 60 k env steps.
    target_update: TargetUpdate = field(default=TargetUpdate.hard(200), metadata={
        "help": "hard:N (copy server params every N global updates) or soft:TAU", "metavar": "hard:N|soft:TAU"})
    eps_start: float = field(default=1.0, metadata={"help": "initial exploration rate"})
    eps_end: float = field(default=0.05, metadata={"help": "final exploration rate"})
    eps_decay_updates: int = field(default=2_000, metadata={"help": "global updates to anneal epsilon over"})
    eps_alpha: float | None = field(default=None, metadata={
        "help": "per-actor epsilon as in Ape-X: eps_i = 0.4^(1 + alpha*i/(N-1)), e.g. 7 "
                "(default: off, epsilon annealed by global updates)", "was": ("apex_alpha",)})
    actor_refresh: int | None = field(default=None, metadata={
        "help": "actor steps between parameter refreshes (default: 10 with local replay; 2 with global replay, "
                "where each refresh also sends one batch to replay, so it sets env steps per learner gradient)"})
    outlier_k: float | None = field(default=None, metadata={
        "help": "skip pushes whose loss exceeds the running mean + k*std of recent losses (default: off)"})
    lr: float = field(default=1e-3, metadata={
        "help": "server learning rate (suits adam on small MLPs; Atari wants ~1e-4)"})
    hidden: tuple[int, ...] = field(default=(64, 64), metadata={"help": "MLP hidden sizes (vector observations)"})
    max_grad_norm: float | None = field(default=10.0, metadata={"help": "clip each pushed gradient to this norm"})
    checkpoint_replay: bool = field(default=False, metadata={
        "help": "the replay is saved with every checkpoint and comes back from it: global replay shards save "
                "themselves (on --resume, or when a crashed shard is restarted); on --runtime local every "
                "checkpoint also holds the workers (bundles' replays, envs mid-episode, RNGs), so that "
                "--resume goes on exactly as the run would have"})

    def __post_init__(self) -> None:
        validate.integer("actors", self.actors, low=1, high=MAX_PROCESSES)
        validate.choice("replay", self.replay, REPLAY_MODES)
        if self.learners is not None:
            validate.integer("learners", self.learners, low=1, high=MAX_PROCESSES)
            if self.replay == "local" and self.learners != self.actors:
                raise ConfigError("learners", f"with --replay local each bundle has one actor and one learner, "
                                              f"so --learners must equal --actors ({self.actors})")
        validate.integer("replay_shards", self.replay_shards, low=1, high=MAX_PROCESSES)
        if self.replay == "global" and self.replay_shards > self.actors:
            raise ConfigError("replay_shards", f"each shard is fed by its own actors, so at most --actors "
                                               f"({self.actors}) shards; got {self.replay_shards}")
        validate.integer("replay_capacity", self.replay_capacity, low=1)
        validate.choice("replay_placement", self.replay_placement, REPLAY_PLACEMENTS)
        if self.replay == "local" and self.replay_placement != "spread":
            raise ConfigError("replay_placement", "places actors and replay shards of --replay global; bundles "
                                                  "keep their own replay")
        validate.integer("envs_per_actor", self.envs_per_actor, low=1)
        validate.integer("batch_size", self.batch_size, low=1)
        validate.integer("learning_starts", self.learning_starts, low=0)
        if self.learning_starts > self.replay_capacity:
            raise ConfigError("learning_starts", f"must be <= replay_capacity ({self.replay_capacity})")
        validate.integer("train_every", self.train_every, low=1)
        validate.number("gamma", self.gamma, low=0.0, high=1.0)
        validate.integer("n_step", self.n_step, low=1)
        validate.choice("loss", self.loss, LOSS_KINDS)
        validate.choice("target", self.target, TARGET_KINDS)
        if isinstance(self.target_update, str):  # the CLI's spelling, or config.json's
            object.__setattr__(self, "target_update", TargetUpdate.parse(self.target_update))
        if not isinstance(self.target_update, TargetUpdate):
            raise ConfigError("target_update",
                              f"must be hard:N or soft:TAU, got {validate.excerpt(self.target_update)}")
        self.exploration()  # eps_start, eps_end, eps_decay_updates and eps_alpha are checked here
        if self.actor_refresh is None:
            # Resolved here so every consumer and config.json see the number. With global replay the
            # driver steps actors and learners alike, so this fixes env steps per gradient:
            # 2 x 2 actors per gradient solved CartPole where 10 x 2 plateaued near 300.
            object.__setattr__(self, "actor_refresh", 10 if self.replay == "local" else 2)
        validate.integer("actor_refresh", self.actor_refresh, low=1)
        if self.outlier_k is not None:
            validate.number("outlier_k", self.outlier_k, low=0.0, low_open=True)
        validate.number("lr", self.lr, low=0.0, low_open=True)
        validate.widths("hidden", self.hidden)
        if self.max_grad_norm is not None:
            validate.number("max_grad_norm", self.max_grad_norm, low=0.0, low_open=True)

    @property
    def num_learners(self) -> int:
        return self.learners if self.learners is not None else (self.actors if self.replay == "local" else 1)

    def exploration(self) -> ExplorationSchedule:
        """Ape-X's per-actor ε with ``eps_alpha``, else ε annealed by global updates."""
        if self.eps_alpha is not None:
            return ExplorationSchedule.per_actor(self.actors, alpha=self.eps_alpha)
        return ExplorationSchedule.annealed(self.eps_start, self.eps_end, self.eps_decay_updates)
