"""Configuration of the least-squares workload."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from gorila import validate


@dataclass(frozen=True)
class LstsqConfig:
    """Synthetic least squares ``min_w (1/2n) ||Xw - y||^2``.

    Rows are ``x ~ N(0, diag(s^2))`` with scales spreading the Hessian's eigenvalues over
    ``[1/condition, 1]``, ``y = x . w_true + noise * N(0, 1)``. ``lr=None`` picks
    ``1 / (1 + sqrt(d/n))^2``, just under ``1/lambda_max`` for such data.
    The run stops when the suboptimality ``L(w) - L*`` has shrunk by ``tol`` relative to the
    start, or after ``iterations`` server updates.
    """

    optimizer: ClassVar[str] = "sgd"  # --optimizer overrides it

    workers: int = field(default=2, metadata={"help": "map-reduce workers, each with its share of the rows"})
    n: int = field(default=100_000, metadata={"help": "rows of synthetic data"})
    d: int = field(default=100, metadata={"help": "features (= parameters)"})
    noise: float = field(default=0.1, metadata={"help": "std of the label noise"})
    condition: float = field(default=10.0, metadata={"help": "condition number of the feature covariance"})
    lr: float | None = field(default=None, metadata={"help": "server learning rate (default: 1/(1+sqrt(d/n))^2)"})
    iterations: int = field(default=1000, metadata={"help": "at most this many server updates"})
    tol: float = field(default=1e-4, metadata={"help": "stop when the suboptimality has shrunk by this factor"})
    log_every: int = field(default=10, metadata={"help": "server updates between logged rounds"})
    straggler: float = field(default=1.0, metadata={
        "help": "worker 0's gradients take this many times as long (an injected straggler, >= 1; compare with "
                "gorila simulate --slow-worker)"})

    def __post_init__(self) -> None:
        validate.integer("workers", self.workers, low=1, high=1024)
        validate.integer("n", self.n, low=1)
        validate.integer("d", self.d, low=1)
        validate.number("noise", self.noise, low=0.0)
        validate.number("condition", self.condition, low=1.0)
        if self.lr is not None:
            validate.number("lr", self.lr, low=0.0, low_open=True)
        validate.integer("iterations", self.iterations, low=1)
        validate.number("tol", self.tol, low=0.0, high=1.0, low_open=True)
        validate.integer("log_every", self.log_every, low=1)
        validate.number("straggler", self.straggler, low=1.0)

    @property
    def step_size(self) -> float:
        return self.lr if self.lr is not None else 1.0 / (1.0 + math.sqrt(self.d / self.n)) ** 2
