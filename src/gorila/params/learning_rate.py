"""A server optimizer's learning rate: one scalar, a float32 vector (one rate per parameter), or a
:class:`LinearDecay`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate


@dataclass(frozen=True)
class LinearDecay:
    """A learning rate that falls linearly from ``lr`` at the first step to 0 after ``steps``
    optimizer steps, and stays 0 after them; the step count is the optimizer's own, saved and
    restored with its state, so a resumed run goes on down the same line::

        opt = make_optimizer("adam", size, LinearDecay(1e-3, steps=10_000))
        LinearDecay(1e-3, 10_000).at(5_000)        # 5e-4
    """

    lr: float
    steps: int

    def __post_init__(self) -> None:
        validate.number("lr", self.lr, low=0.0, low_open=True)
        validate.integer("lr_decay_steps", self.steps, low=1)

    def at(self, step: int) -> float:
        """The rate of step ``step`` (0 for the first)."""
        return self.lr * max(0.0, 1.0 - step / self.steps)


LearningRate = float | np.ndarray | LinearDecay
