"""A3C's configuration: one frozen dataclass, validated on construction.

Field names are the CLI flags with underscores (``unroll_length`` is ``--unroll-length``).
The defaults learn CartPole-v1 quickly on a small CPU: 8 environments per worker, 8-step
rollouts (n-step targets), gamma 0.99, an entropy bonus of 0.01 as in the A3C paper
(Mnih et al., 2016), two tanh layers of 64 units, the plain A3C target (``target_tau = 1``),
RMSProp on the server at 3e-3 for both groups, and no gradient clipping (RMSProp already
normalises each parameter's step; clipping the whole vector let the value gradient shrink
the policy's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate
from gorila.driver.policy_evaluation import BACK_TO_BACK
from gorila.nets.encoders import ENCODER_HELP, ENCODERS
from gorila.params import OPTIMIZERS


@dataclass(frozen=True)
class A3CConfig:
    """What one A3C worker and the server's per-group learning rates need::

        cfg = A3CConfig(unroll_length=20, lr_value=5e-3)
        A3CConfig(unroll_length=0)   # each rollout runs until every env's episode has ended
        A3CConfig(unroll_length=-1)  # ConfigError: unroll_length: must be >= 0, got -1
    """

    EVAL_EPSILON: ClassVar[float] = 0.0  # a policy-gradient method is judged by its greedy policy
    EVAL_EVERY_S: ClassVar[float] = BACK_TO_BACK  # its evaluation cadence on Ray

    workers: int = field(default=2, metadata={"help": "A3C workers, each with its own environments"})
    envs_per_actor: int = field(default=8, metadata={"help": "vectorised environments each worker steps",
                                                     "was": ("envs_per_worker",)})
    unroll_length: int = field(default=8, metadata={
        "help": "steps per rollout, the n of the n-step target; 0 rolls out until every env's episode has ended",
        "was": ("rollout_steps",)})
    gamma: float = field(default=0.99, metadata={"help": "discount factor, in (0, 1]"})
    gae_lambda: float = field(default=1.0, metadata={
        "help": "lambda of the lambda-return target (generalised advantage estimation), in [0, 1]; "
                "1 is the plain n-step target"})
    entropy_coef: float = field(default=0.01, metadata={"help": "weight of the entropy bonus (>= 0)"})
    optimizer: str = "rmsprop"  # no flag of its own: --optimizer (RunConfig) overrides it
    lr_policy: float = field(default=3e-3, metadata={
        "help": "server learning rate of the policy parameters (and of a shared torso)"})
    lr_value: float = field(default=3e-3, metadata={"help": "server learning rate of the value parameters"})
    target_tau: float = field(default=1.0, metadata={
        "help": "soft update of the worker's target value network, in (0, 1]; 1 copies the pulled one"})
    hidden: tuple[int, ...] = field(default=(64, 64), metadata={
        "help": "hidden layer widths of the policy and value MLPs (or of the shared torso)"})
    shared_torso: bool = field(default=False, metadata={
        "help": "one torso with a policy head and a value head instead of two networks (vector observations; "
                "images always get a convolutional torso shared by both heads, the Nature CNN or the MinAtar "
                "network)"})
    encoder: str = field(default="nature", metadata={"help": ENCODER_HELP, "choices": ENCODERS})
    log_std_init: float = field(default=0.0, metadata={
        "help": "Box actions: the Gaussian's log standard deviation before training (0: a standard deviation of 1; "
                "RL-Zoo's MuJoCo settings start at -2)"})
    max_grad_norm: float | None = field(default=None, metadata={
        "help": "clip each pushed gradient to this L2 norm, > 0 (default: no clipping)"})
    straggler: float = field(default=1.0, metadata={
        "help": "worker 0's gradients take this many times as long (an injected straggler, >= 1; compare a run "
                "with gorila simulate --slow-worker)"})

    def __post_init__(self) -> None:
        validate.integer("workers", self.workers, low=1, high=1024)
        validate.integer("envs_per_actor", self.envs_per_actor, low=1)
        validate.integer("unroll_length", self.unroll_length, low=0)
        validate.number("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        validate.number("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        validate.number("entropy_coef", self.entropy_coef, low=0.0)
        validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        validate.number("lr_policy", self.lr_policy, low=0.0, low_open=True)
        validate.number("lr_value", self.lr_value, low=0.0, low_open=True)
        validate.number("target_tau", self.target_tau, low=0.0, high=1.0, low_open=True)
        validate.widths("hidden", self.hidden)
        validate.boolean("shared_torso", self.shared_torso)
        validate.number("log_std_init", self.log_std_init, low=-20.0, high=2.0)
        validate.choice("encoder", self.encoder, ENCODERS)
        if self.max_grad_norm is not None:
            validate.number("max_grad_norm", self.max_grad_norm, low=0.0, low_open=True)
        validate.number("straggler", self.straggler, low=1.0)
