"""IMPALA's configuration: one frozen dataclass, validated on construction.

Field names are the CLI flags with underscores (``unroll_length`` is ``--unroll-length``). The
defaults learn CartPole-v1 on a small CPU: two actors of 8 envs, 20-step segments, one learner
taking one segment per gradient, V-trace with rho_bar = c_bar = 1 (the paper's), an entropy bonus of
0.01, RMSProp on the server at 3e-3 for both groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate
from gorila.driver.policy_evaluation import BACK_TO_BACK
from gorila.errors import ConfigError
from gorila.nets.encoders import ENCODER_HELP, ENCODERS
from gorila.nets.recurrent import CORE_HELP, CORES
from gorila.params import OPTIMIZERS

VTRACE = ("on", "off")


@dataclass(frozen=True)
class ImpalaConfig:
    """What IMPALA's actors, queues and learners need::

        cfg = ImpalaConfig(actors=4, unroll_length=20, max_policy_lag=50)
        ImpalaConfig(rho_bar=0.5, c_bar=1.0)   # ConfigError: c_bar: must be <= rho_bar (0.5), got 1.0
    """

    EVAL_EPSILON: ClassVar[float] = 0.0  # a policy-gradient method is judged by its greedy policy
    EVAL_EVERY_S: ClassVar[float] = BACK_TO_BACK  # its evaluation cadence on Ray

    actors: int = field(default=2, metadata={
        "help": "actors, each stepping its own environments with its own policy copy"})
    envs_per_actor: int = field(default=8, metadata={"help": "vectorised environments each actor steps"})
    learners: int = field(default=1, metadata={"help": "learners; each takes from its own trajectory queue"})
    unroll_length: int = field(default=20, metadata={
        "help": "steps per segment (the unit actors emit and learners take)"})
    batch_size: int = field(default=1, metadata={"help": "segments per gradient"})
    # Short: a learner slower than its actors learns from segments as old as the queue is long (16
    # held Breakout's policy lag near 20 versions and needed twice the frames; docs/benchmarks.md).
    queue_capacity: int = field(default=2, metadata={
        "help": "segments a trajectory queue holds; a full queue holds its actors back"})
    max_policy_lag: int | None = field(default=None, metadata={
        "help": "drop segments acted more than this many versions before the learner's, counted as "
                "trajectories_dropped_stale (default: keep all)"})
    actor_refresh: int = field(default=1, metadata={
        "help": "segments an actor acts between pulls of the parameters (a large value holds the policy lag high)"})
    gamma: float = field(default=0.99, metadata={"help": "discount factor, in (0, 1]"})
    entropy_coef: float = field(default=0.01, metadata={"help": "weight of the entropy bonus (>= 0)"})
    value_coef: float = field(default=0.5, metadata={
        "help": "weight of the value regression to the V-trace targets (> 0)"})
    vtrace: str = field(default="on", metadata={
        "help": "on: V-trace's importance-weighted targets; off: the data taken as on-policy (n-step targets)",
        "choices": VTRACE})
    rho_bar: float = field(default=1.0, metadata={
        "help": "clip of the importance weights in the value targets (>= c_bar)"})
    c_bar: float = field(default=1.0, metadata={"help": "clip of the traces (> 0, <= rho_bar)"})
    pg_rho_bar: float = field(default=1.0, metadata={
        "help": "clip of the importance weights of the policy-gradient advantages (> 0)"})
    optimizer: str = "rmsprop"  # no flag of its own: --optimizer (RunConfig) overrides it
    lr: float = field(default=3e-3, metadata={"help": "server learning rate"})
    hidden: tuple[int, ...] = field(default=(64, 64), metadata={
        "help": "hidden layer widths of the policy and value MLPs (or of the shared torso)"})
    shared_torso: bool = field(default=False, metadata={
        "help": "one torso with a policy head and a value head instead of two networks (vector observations; frames "
                "always share the Nature-CNN torso)"})
    encoder: str = field(default="nature", metadata={"help": ENCODER_HELP, "choices": ENCODERS})
    core: str = field(default="none", metadata={"help": CORE_HELP, "choices": CORES})
    core_size: int = field(default=256, metadata={"help": "width of the LSTM core's state (--core lstm)"})
    log_std_init: float = field(default=0.0, metadata={
        "help": "Box actions: the Gaussian's log standard deviation before training (0: a standard deviation of 1; "
                "RL-Zoo's MuJoCo settings start at -2)"})
    max_grad_norm: float | None = field(default=None, metadata={
        "help": "clip each pushed gradient to this L2 norm, > 0 (default: no clipping)"})

    def __post_init__(self) -> None:
        validate.integer("actors", self.actors, low=1, high=1024)
        validate.integer("envs_per_actor", self.envs_per_actor, low=1)
        validate.integer("learners", self.learners, low=1, high=1024)
        validate.integer("unroll_length", self.unroll_length, low=1)
        validate.integer("batch_size", self.batch_size, low=1)
        validate.integer("queue_capacity", self.queue_capacity, low=1)
        if self.max_policy_lag is not None:
            validate.integer("max_policy_lag", self.max_policy_lag, low=0)
        validate.integer("actor_refresh", self.actor_refresh, low=1)
        validate.number("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        validate.number("entropy_coef", self.entropy_coef, low=0.0)
        validate.number("value_coef", self.value_coef, low=0.0, low_open=True)
        validate.choice("vtrace", self.vtrace, VTRACE)
        for name in ("rho_bar", "c_bar", "pg_rho_bar"):
            validate.number(name, getattr(self, name), low=0.0, low_open=True)
        if self.c_bar > self.rho_bar:
            raise ConfigError("c_bar", f"must be <= rho_bar ({self.rho_bar}), got {self.c_bar}")
        validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        validate.number("lr", self.lr, low=0.0, low_open=True)
        validate.widths("hidden", self.hidden)
        validate.boolean("shared_torso", self.shared_torso)
        validate.number("log_std_init", self.log_std_init, low=-20.0, high=2.0)
        validate.choice("encoder", self.encoder, ENCODERS)
        validate.choice("core", self.core, CORES)
        validate.integer("core_size", self.core_size, low=1, high=65536)
        if self.max_grad_norm is not None:
            validate.number("max_grad_norm", self.max_grad_norm, low=0.0, low_open=True)
