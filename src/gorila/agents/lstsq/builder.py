"""Build the lstsq plan: MapReduce gradient descent on synthetic least squares, judged by its exact loss.

The run stops once the suboptimality ``L(w) - L*`` has shrunk by ``tol`` relative to ``w = 0``.
Under the synchronous rule with SGD the run is exactly full-batch gradient descent, so the driver's
chunks are cut to end at the very update that reaches the target.
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

import numpy as np

from gorila.agents.lstsq.config import LstsqConfig
from gorila.agents.lstsq.learner import LstsqWorker
from gorila.config import RunConfig
from gorila.core import Runtime, ShardGroup, WorkerGroup
from gorila.driver.plan import Budget, Plan, Score, WorkerSpec
from gorila.envs.least_squares import LeastSquares, Moments


class LossEvaluation:
    """lstsq's :class:`~gorila.driver.plan.Evaluation`: after every chunk, the exact loss of the
    server's parameters, from the data's moments (no pass over the rows)::

        evaluation = LossEvaluation(problem.moments(), tol=1e-4)
        evaluation.target       # the suboptimality that counts as reached
    """

    columns = ("suboptimality", "loss", "distance", "version")
    restarts = 0  # it judges in the driver's process: nothing of its own to restart

    def __init__(self, moments: Moments, tol: float):
        self.moments = moments
        self.w_star = moments.optimum()
        self.best = moments.loss(self.w_star)
        self.initial = moments.loss(np.zeros_like(self.w_star))
        self.target = tol * (self.initial - self.best)
        self.shards: ShardGroup | None = None
        self.last: dict[str, float] = {}

    def start(self, runtime: Runtime, shards: ShardGroup, groups: dict[str, WorkerGroup],
              stall_s: float | None = None) -> None:
        self.shards = shards

    def before_chunk(self, now: dict[str, float]) -> None:
        """Nothing to start: judging is a pull and a few small products, done after each chunk."""

    def after_chunk(self) -> Score:
        assert self.shards is not None  # the driver starts an evaluation before its first chunk
        w, versions = self.shards.pull()
        loss = self.moments.loss(w)
        self.last = {"suboptimality": loss - self.best, "loss": loss,
                     "distance": float(np.linalg.norm(w - self.w_star)), "version": min(versions)}
        return Score(loss - self.best, loss - self.best <= self.target, row=dict(self.last))

    def awaited(self) -> list:
        """None: the judging happens after each chunk, in the driver."""
        return []

    def finish(self, within_s: float | None = None) -> None:
        """The latest chunk was judged already."""

    def summary(self) -> dict[str, Any]:
        return {"initial_loss": self.initial, "optimal_loss": self.best, "final_loss": self.last.get("loss"),
                "final_distance": self.last.get("distance"), "target_suboptimality": self.target}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore: the loss is computed afresh from the parameters."""


def make_plan(run: RunConfig, cfg: LstsqConfig) -> Plan:
    """``--workers`` map-reduce workers, each with its share of the rows."""
    problem = LeastSquares(cfg.n, cfg.d, cfg.noise, cfg.condition, seed=run.seed)
    problem.check_size()  # rows that cannot fit, or a set-up of hours, are refused before anything starts
    problem.partition(cfg.workers)  # too many workers for the rows is refused before anything starts
    rule = run.rule(num_workers=cfg.workers)
    optimizer = run.optimizer or cfg.optimizer
    moments = problem.moments()
    exact_stop = (moments.iterations_to(cfg.tol, cfg.step_size, cfg.iterations)
                  if rule.barrier and optimizer == "sgd" else None)
    steps_per_update = rule.aggregate / cfg.workers  # every worker step is one push

    def chunk_steps(updates: int) -> int:
        horizon = exact_stop if exact_stop and updates < exact_stop else cfg.iterations
        todo = max(1, min(cfg.log_every, horizon - updates))
        return max(1, round(todo * steps_per_update))

    worker = functools.partial(LstsqWorker, problem=problem, num_workers=cfg.workers, straggler=cfg.straggler)
    return Plan(algo="lstsq", label="synthetic", initial_params=lambda: np.zeros(cfg.d, np.float32),
                spec=run.server_spec(rule, cfg.optimizer, cfg.step_size),
                groups=lambda services: [WorkerSpec("worker", worker, cfg.workers)],
                evaluation=LossEvaluation(moments, cfg.tol), budget=Budget(cfg.iterations, "updates"),
                processes=cfg.workers, chunk_steps=chunk_steps, config={**asdict(cfg), "lr": cfg.step_size},
                # a worker holds its rows, made again from the seed, and a step count: the shards' state
                # resumes the run, and checkpoints stay the size of the parameters, not of the data
                snapshot=False)
