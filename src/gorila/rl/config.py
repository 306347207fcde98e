"""Budget, evaluation and checkpoint settings shared by the RL algorithms (``dqn``, ``a3c``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym

from gorila import validate
from gorila.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    """When to stop, how to evaluate, when to checkpoint::

        train = TrainConfig(total_steps=200_000, eval_episodes=10)
        train.target_for("CartPole-v1")   # 475.0, the env's reward threshold
    """

    total_steps: int = field(default=1_000_000, metadata={"help": "stop after this many env steps"})
    time_limit_s: float | None = field(default=None, metadata={"help": "stop after this many seconds"})
    target_return: float | None = field(default=None, metadata={
        "help": "evaluation mean that counts as solved (default: the env's reward threshold)"})
    stop_at_target: bool = field(default=True, metadata={"help": "stop at the first evaluation reaching the target"})
    eval_episodes: int = field(default=10, metadata={"help": "episodes per evaluation"})
    eval_epsilon: float | None = field(default=None, metadata={
        "help": "exploration rate during evaluation (default: 0.05 for dqn, as in the DQN papers; 0 for a3c)"})
    eval_noop_max: int = field(default=30, metadata={"help": "evaluation episodes start after 0..N no-op actions"})
    eval_every_s: float = field(default=1.0, metadata={"help": "at most one evaluation per this many seconds"})
    checkpoint_every_s: float = field(default=60.0, metadata={"help": "seconds between checkpoints"})
    resume: Path | None = field(default=None, metadata={"help": "continue the run in this directory",
                                                         "metavar": "RUN_DIR"})
    device: str = field(default="auto", metadata={"help": "learner device", "choices": DEVICES})
    call_timeout_s: float = field(default=600.0, metadata={"help": "longest wait for any worker call"})

    def __post_init__(self) -> None:
        validate.integer("total_steps", self.total_steps, low=1)
        if self.time_limit_s is not None:
            validate.number("time_limit_s", self.time_limit_s, low=0.0, low_open=True)
        if self.target_return is not None:
            validate.number("target_return", self.target_return)
        validate.integer("eval_episodes", self.eval_episodes, low=1)
        if self.eval_epsilon is not None:
            validate.number("eval_epsilon", self.eval_epsilon, low=0.0, high=1.0)
        validate.integer("eval_noop_max", self.eval_noop_max, low=0)
        validate.number("eval_every_s", self.eval_every_s, low=0.0)
        validate.number("checkpoint_every_s", self.checkpoint_every_s, low=0.0, low_open=True)
        validate.choice("device", self.device, DEVICES)
        validate.number("call_timeout_s", self.call_timeout_s, low=0.0, low_open=True)

    def target_for(self, env_id: str) -> float | None:
        if self.target_return is not None:
            return self.target_return
        try:
            return gym.spec(env_id).reward_threshold
        except gym.error.Error:
            return None


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` without one is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda was asked for but torch sees no GPU")
    return device
