"""PPO's configuration: one frozen dataclass, validated on construction.

Field names are the CLI flags with underscores. The defaults follow RL-Zoo's CartPole PPO in
spirit: 16 envs stepping 16-step segments (256 steps a batch), GAE(0.8), gamma 0.98, 10 epochs of 2
minibatches, clip 0.2, no entropy bonus, Adam on the server at 1e-3, gradients clipped to 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate
from gorila.driver.policy_evaluation import BACK_TO_BACK
from gorila.nets.encoders import ENCODER_HELP, ENCODERS
from gorila.nets.recurrent import CORE_HELP, CORES
from gorila.params import OPTIMIZERS

LR_DECAYS = ("none", "linear")


@dataclass(frozen=True)
class PPOConfig:
    """What PPO's actors, queues and learners need::

        cfg = PPOConfig(actors=4, epochs=4, minibatches=4)
        PPOConfig(clip=0)   # ConfigError: clip: must be > 0, got 0
    """

    EVAL_EPSILON: ClassVar[float] = 0.0  # a policy-gradient method is judged by its greedy policy
    EVAL_EVERY_S: ClassVar[float] = BACK_TO_BACK  # its evaluation cadence on Ray

    actors: int = field(default=2, metadata={
        "help": "actors, each stepping its own environments with its own policy copy"})
    envs_per_actor: int = field(default=8, metadata={"help": "vectorised environments each actor steps"})
    learners: int = field(default=1, metadata={"help": "learners; each takes from its own trajectory queue"})
    unroll_length: int = field(default=16, metadata={"help": "steps per segment (each actor's rollout)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "segments per batch (default: the actors per learner, one rollout each)"})
    epochs: int = field(default=10, metadata={"help": "passes over each batch"})
    minibatches: int = field(default=2, metadata={"help": "minibatches per pass, each one gradient pushed"})
    queue_capacity: int = field(default=16, metadata={
        "help": "segments a trajectory queue holds; a full queue holds its actors back"})
    max_policy_lag: int | None = field(default=None, metadata={
        "help": "drop segments acted more than this many versions before the learner's (default: keep all)"})
    gamma: float = field(default=0.98, metadata={"help": "discount factor, in (0, 1]"})
    gae_lambda: float = field(default=0.8, metadata={"help": "GAE's lambda, in [0, 1] (--mode sync)"})
    clip: float = field(default=0.2, metadata={"help": "clip of the probability ratio (> 0)"})
    value_clip: float | None = field(default=None, metadata={"help": "clip of the value change (default: none)"})
    value_coef: float = field(default=0.5, metadata={"help": "weight of the value loss (> 0)"})
    entropy_coef: float = field(default=0.0, metadata={"help": "weight of the entropy bonus (>= 0)"})
    normalize_advantages: bool = field(default=True, metadata={
        "help": "scale each batch's advantages to mean 0, std 1"})
    rho_bar: float = field(default=1.0, metadata={
        "help": "APPO (--mode async): clip of V-trace's importance weights and traces (> 0)"})
    optimizer: str = "adam"  # no flag of its own: --optimizer (RunConfig) overrides it
    lr: float = field(default=1e-3, metadata={"help": "server learning rate"})
    lr_decay: str = field(default="none", metadata={
        "help": "linear: the server's learning rate falls linearly to 0 over the run's --total-steps (as RL-Zoo's and "
                "CleanRL's PPO); none: constant", "choices": LR_DECAYS})
    hidden: tuple[int, ...] = field(default=(64, 64), metadata={
        "help": "hidden layer widths of the policy and value MLPs (or of the shared torso)"})
    shared_torso: bool = field(default=False, metadata={
        "help": "one torso with a policy head and a value head instead of two networks (vector observations)"})
    encoder: str = field(default="nature", metadata={"help": ENCODER_HELP, "choices": ENCODERS})
    core: str = field(default="none", metadata={"help": CORE_HELP, "choices": CORES})
    core_size: int = field(default=256, metadata={"help": "width of the LSTM core's state (--core lstm)"})
    log_std_init: float = field(default=0.0, metadata={
        "help": "Box actions: the Gaussian's log standard deviation before training (0: a standard deviation of 1; "
                "RL-Zoo's MuJoCo settings start at -2)"})
    max_grad_norm: float | None = field(default=0.5, metadata={
        "help": "clip each pushed gradient to this L2 norm, > 0"})

    def __post_init__(self) -> None:
        for name in ("actors", "learners"):
            validate.integer(name, getattr(self, name), low=1, high=1024)
        for name in ("envs_per_actor", "unroll_length", "epochs", "minibatches", "queue_capacity"):
            validate.integer(name, getattr(self, name), low=1)
        if self.batch_size is not None:
            validate.integer("batch_size", self.batch_size, low=1)
        if self.max_policy_lag is not None:
            validate.integer("max_policy_lag", self.max_policy_lag, low=0)
        validate.number("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        validate.number("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        validate.number("clip", self.clip, low=0.0, low_open=True)
        if self.value_clip is not None:
            validate.number("value_clip", self.value_clip, low=0.0, low_open=True)
        validate.number("value_coef", self.value_coef, low=0.0, low_open=True)
        validate.number("entropy_coef", self.entropy_coef, low=0.0)
        validate.boolean("normalize_advantages", self.normalize_advantages)
        validate.number("rho_bar", self.rho_bar, low=0.0, low_open=True)
        validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        validate.number("lr", self.lr, low=0.0, low_open=True)
        validate.choice("lr_decay", self.lr_decay, LR_DECAYS)
        validate.widths("hidden", self.hidden)
        validate.boolean("shared_torso", self.shared_torso)
        validate.number("log_std_init", self.log_std_init, low=-20.0, high=2.0)
        validate.choice("encoder", self.encoder, ENCODERS)
        validate.choice("core", self.core, CORES)
        validate.integer("core_size", self.core_size, low=1, high=65536)
        if self.max_grad_norm is not None:
            validate.number("max_grad_norm", self.max_grad_norm, low=0.0, low_open=True)
