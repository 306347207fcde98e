"""``gorila bench learner --algo apex``: Ape-X's replay learner, its updates/s through the parameter
server (``--server process``) or on parameters it owns (``--server learner``), vs a bare PyTorch
loop on the same dueling network, n-step double-Q loss and importance-weighted minibatches."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gorila.actors.replay_actor import ReplayActor
from gorila.bench.bare_loop import BareQLoop, pushed_rate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.bench.sampling import bench_run_config, learner_table, measured_learner
from gorila.core import Worker, WorkerFactory
from gorila.driver.plan import Plan
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.params import ParameterServer
from gorila.replay import RemoteReplay
from gorila.replay.shard import ReplayShard
from gorila.runtime.local import LocalService
from gorila.types import Batch

# Minibatches both loops cycle through (at least): enough that neither trains on one batch only.
LIMIT_BATCHES = 16


class ReplayFeed:
    """A replay shard as the learner under measure sees it: every sample request answered at once
    with the next of ``replies`` (rows a real shard sampled beforehand, importance weights
    included), as a run's shard answers from its own process while the learner trains; the
    priorities sent back are counted, not applied (a run's shard applies them in its process).
    Reached through ``RemoteReplay(LocalService(feed))``."""

    def __init__(self, replies: list[Batch]):
        self.replies = replies
        self.sampled = self.priority_updates = 0

    def ready(self, learner: int, step: int, min_size: int) -> bool:
        return True

    def sample(self, batch_size: int) -> Batch:
        reply = self.replies[self.sampled % len(self.replies)]
        assert len(reply.reward) == batch_size, "the feed serves replies of the learner's request size"
        self.sampled += 1
        return reply

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.priority_updates += 1


def minibatches(reply: Batch, prefetch: int) -> list[Batch]:
    """The ``prefetch`` minibatches a replay learner makes of one reply (every ``prefetch``-th row)."""
    return [Batch(*(field[k::prefetch] for field in reply)) for k in range(prefetch)]


class ApexLearnerWorker:
    """The plan's real :class:`~gorila.learners.replay_learner.ReplayLearner` (minibatches from
    its replay request, prefetched, the double-Q gradient on the pulled parameters, pushed; under
    ``--server learner`` applied where computed and published to the store; priorities sent back)
    fed by a :class:`ReplayFeed` of replies that a real prioritized shard, filled by the plan's
    actor with ``fill`` rows (its initial network, its ε), sampled first; and, in the same process,
    the limit (:class:`~gorila.bench.bare_loop.BareQLoop`) on the minibatches of those replies::

        worker = ApexLearnerWorker(0, server, actor=actor_factory, learner=learner_factory, replay=routing.build,
                                   fill=5_000, request_rows=64 * 16, prefetch=16, optimizer="adam", lr=1e-3)
        worker.pipeline_rate(1.0), worker.limit_rate(1.0)     # updates per second

    ``actor`` and ``learner`` are the plan's factories; the replay clients given here replace the
    plan's (a partial's keywords are overridden by the call's).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, actor: Callable[..., Worker],
                 learner: Callable[..., Worker], replay: Callable[[int], ReplayShard],
                 fill: int, request_rows: int, prefetch: int, optimizer: str, lr: float):
        shard = replay(0)
        collector = actor(worker_id, server, replay=[RemoteReplay(LocalService(shard))])
        assert isinstance(collector, ReplayActor)
        while shard.size() < fill:
            collector.step()
        collector.actor.close()
        replies = [reply for _ in range(math.ceil(LIMIT_BATCHES / prefetch))
                   if (reply := shard.sample(request_rows)) is not None]
        assert replies, "a shard holding its learning_starts rows lets them be sampled"
        self.feed = ReplayFeed(replies)
        # --server learner wraps the learner in a PublishingWorker: its pushes are applied and published in-process
        self.worker = learner(worker_id, server, replay=[RemoteReplay(LocalService(self.feed))])
        self.learner = measured_learner(self.worker, ReplayLearner)
        q = self.learner.learner
        assert isinstance(q, QLearner)
        self.limit = BareQLoop(q, [m for reply in replies for m in minibatches(reply, prefetch)], optimizer, lr)

    def step(self) -> bool:
        return bool(self.worker.step())  # the run's worker: under --server learner it publishes as a run's does

    def report(self) -> dict[str, Any]:
        return {**self.worker.report(), "priority_updates": self.feed.priority_updates}

    def pipeline_rate(self, seconds: float) -> float:
        """Pushed updates per second, the last push's reply included."""
        return pushed_rate(self.learner, self.step, seconds)

    def limit_rate(self, seconds: float) -> float:
        return self.limit.rate(seconds)

    def close(self) -> None:
        pass


def run(args: argparse.Namespace, names: list[str]) -> int:
    """The benchmark of Ape-X's learner on each runtime of ``names``."""
    from gorila.agents.apex.builder import make_plan
    from gorila.agents.apex.config import ApexConfig
    from gorila.agents.rl_config import RLConfig

    # Ape-X's published setting and its presets: a dueling network; one actor fills one shard,
    # sampled without a rate limiter (the feed answers the learner at once).
    cfg = ApexConfig(actors=1, replay_shards=1, learners=1, batch_size=args.batch_size or ApexConfig.batch_size,
                     learning_starts=args.fill, replay_capacity=max(args.fill, ApexConfig.replay_capacity),
                     samples_per_insert=None, dueling=True)

    def build(runtime: str) -> tuple[Plan, WorkerFactory]:
        plan = make_plan(bench_run_config(runtime, None, args.seed, "apex", args.server), cfg,
                         RLConfig(env=args.env, device="cpu", inference="local"))
        actor_spec, learner_spec = plan.groups({"replay": []})  # each worker binds its own in-process replay
        (replay,) = plan.services
        factory = functools.partial(ApexLearnerWorker, actor=actor_spec.factory, learner=learner_spec.factory,
                                    replay=replay.factory, fill=args.fill, request_rows=cfg.batch_size * cfg.prefetch,
                                    prefetch=cfg.prefetch, optimizer=plan.spec.optimizer, lr=cfg.lr)
        return dataclasses.replace(plan, services=()), factory

    plan = build("local")[0]
    size, optimizer = plan.initial_params().size, plan.spec.optimizer
    print(f"gorila bench learner --algo apex: {args.env}, {size:,} parameters ({size * 4 / 1e6:.2f} MB), batch "
          f"{cfg.batch_size}, {cfg.prefetch} minibatches a replay request, 1 torch thread per process, medians of "
          f"{args.rounds} alternating rounds, {args.seconds:g} s per figure")
    where = (f"applied by the learner, which owns its parameters and its {optimizer} (lr {cfg.lr:g}, numpy or torch "
             "on the flat vector), and published to 1 shard after each update" if args.server == "learner" else
             f"pushed to 1 parameter-server shard ({optimizer}, lr {cfg.lr:g}, asynchronous)")
    print(f"  pipeline: ReplayLearner: replies of {cfg.batch_size * cfg.prefetch} rows that a prioritized shard "
          f"(alpha {cfg.priority_alpha:g}, beta {cfg.priority_beta:g}) filled with {args.fill:,} rows by the actor "
          f"sampled beforehand, served at once -> QLearner on a dueling network, {cfg.n_step}-step {cfg.target}-Q "
          f"gradient ({cfg.loss}, importance-weighted, clip {cfg.max_grad_norm}) on the parameters copied into it -> "
          f"{where}; new priorities sent back once a request's minibatches are used")
    print(f"  limit:    the same network, loss and minibatches, already in the learner's memory; zero_grad, backward, "
          f"clip, torch {optimizer} step (lr {cfg.lr:g}) in the learner's process; no priorities sent")
    out = bench_dir(args.out, "learner")
    rows = learner_table(names, args.address, build, args.seconds, args.rounds, "updates", algo="apex",
                         server=args.server)
    write_bench_json(out, "learner", vars(args), rows, parameters=size)
    return 0
