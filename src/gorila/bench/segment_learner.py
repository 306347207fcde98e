"""``gorila bench learner --algo impala|ppo``: learner samples/s through the parameter server
(``--server process``) or on parameters it owns (``--server learner``) vs a bare PyTorch loop on
the same batches, in the same process and run."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import itertools
import time
from collections.abc import Callable

import numpy as np
from torch import nn

from gorila.actors.segment_actor import SegmentActor
from gorila.agents.impala.loss import ImpalaLoss
from gorila.agents.ppo.learner import PPOLearner
from gorila.agents.ppo.loss import PPOLoss
from gorila.bench.bare_loop import TORCH_OPTIMIZERS, pushed_rate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.bench.sampling import bench_run_config, learner_table, measured_learner
from gorila.config import RunConfig
from gorila.core import Worker, WorkerFactory
from gorila.driver.plan import Plan
from gorila.learners.segment_learner import SegmentLearner
from gorila.nets.flat import FlatParams
from gorila.params import ParameterServer
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
from gorila.types import Segment

# Distinct segments both loops cycle through: enough that neither trains on one batch only.
SEGMENTS = 16


class SegmentLearnerWorker:
    """The plan's real learner (a :class:`~gorila.learners.segment_learner.SegmentLearner`, IMPALA's or PPO's:
    batches taken from a trajectory queue, the gradient on the pulled parameters, pushed to the
    server) fed by an in-process queue kept full with ``SEGMENTS`` segments its actor collected first
    (its initial policy); and, in the same process, the limit: the same network, the same loss and
    the same batches, stepped by a local torch optimizer::

        worker = SegmentLearnerWorker(0, server, actor=actor_factory, learner=learner_factory,
                                      batch_size=2, pushes_per_batch=1, optimizer="rmsprop", lr=3e-3)
        worker.pipeline_rate(1.0), worker.limit_rate(1.0)     # env steps learnt from per second

    ``actor`` and ``learner`` are the plan's factories; the queue they are given here replaces the
    plan's service (a partial's keywords are overridden by the call's).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, actor: Callable[..., Worker],
                 learner: Callable[..., Worker], batch_size: int, pushes_per_batch: int, optimizer: str, lr: float):
        # room for the two batches _top_up keeps queued; no max lag: nothing is dropped
        self.queue = TrajectoryQueue(0, capacity=2 * batch_size)
        queues = [RemoteQueue(LocalService(self.queue))]
        collector = actor(worker_id, server, queues=queues)
        assert isinstance(collector, SegmentActor)
        self.segments: list[Segment] = [collector.collect() for _ in range(SEGMENTS)]
        collector.close()
        self.worker = learner(worker_id, server, queues=queues)
        self.learner = measured_learner(self.worker, SegmentLearner)
        self.batch_size, self.pushes_per_batch = batch_size, pushes_per_batch
        self.samples_per_batch = sum(s.steps for s in self.segments[:batch_size])
        self.seq = itertools.count()
        self.net: nn.Module = copy.deepcopy(self.learner.net)
        self.flat = FlatParams(self.net)
        self.optimizer = TORCH_OPTIMIZERS[optimizer](self.net.parameters(), lr=lr)
        self.batches = [Segment.concatenate([self.segments[(b + i) % SEGMENTS] for i in range(batch_size)])
                        for b in range(0, SEGMENTS, batch_size)]

    def _top_up(self) -> None:
        """Segments enough in the queue for the next request and the one after (never empty)."""
        while self.queue.size() < 2 * self.batch_size:
            seq = next(self.seq)
            self.queue.add(self.segments[seq % SEGMENTS], "bench", seq)

    def step(self) -> None:
        self._top_up()
        self.worker.step()  # the run's worker: under --server learner it publishes as a run's does

    def report(self) -> dict:
        return self.worker.report()

    def pipeline_rate(self, seconds: float) -> float:
        """Env steps of the batches learnt from per second, the last push's reply included."""
        return pushed_rate(self.learner, self.step, seconds) / self.pushes_per_batch * self.samples_per_batch

    def limit_rate(self, seconds: float) -> float:
        loss = self.learner.loss
        batches, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            batch = self.batches[batches % len(self.batches)]
            if isinstance(self.learner, PPOLearner) and isinstance(loss, PPOLoss):
                self._ppo_epochs(self.learner, loss, batch)
            else:
                assert isinstance(loss, ImpalaLoss)
                loss.gradients(self.net, batch, self.flat)  # leaves the gradient in the parameters' .grad
                self.optimizer.step()
            batches += 1
        return batches * self.samples_per_batch / (time.perf_counter() - t0)

    def _ppo_epochs(self, learner: PPOLearner, loss: PPOLoss, batch: Segment) -> None:
        """What a PPO learner does with a batch, the pushes replaced by local optimizer steps."""
        targets = loss.targets(self.net, batch)
        for _ in range(learner.epochs):
            for idx in np.array_split(learner.rng.permutation(len(targets)), learner.minibatches):
                loss.gradient(self.net, self.flat, targets.select(idx))
                self.optimizer.step()

    def close(self) -> None:
        pass


def run(args: argparse.Namespace, names: list[str]) -> int:
    """The benchmark for ``args.algo`` (impala or ppo) on each runtime of ``names``."""
    from gorila.agents.impala import builder as impala
    from gorila.agents.impala.config import ImpalaConfig
    from gorila.agents.kit import QUEUES
    from gorila.agents.ppo import builder as ppo
    from gorila.agents.ppo.config import PPOConfig
    from gorila.agents.rl_config import RLConfig

    rl = RLConfig(env=args.env, device="cpu", inference="local")
    cfg: ImpalaConfig | PPOConfig
    make_plan: Callable[[RunConfig], Plan]
    if args.algo == "impala":
        cfg = ImpalaConfig(actors=1, batch_size=args.batch_size or 1, encoder=args.encoder)
        make_plan, pushes_per_batch = functools.partial(impala.make_plan, cfg=cfg, rl=rl), 1
    else:
        cfg = PPOConfig(actors=1, batch_size=args.batch_size or 1, encoder=args.encoder)
        make_plan, pushes_per_batch = functools.partial(ppo.make_plan, cfg=cfg, rl=rl), cfg.epochs * cfg.minibatches

    def build(runtime: str) -> tuple[Plan, WorkerFactory]:
        plan = make_plan(bench_run_config(runtime, None, args.seed, args.algo, args.server))
        actor_spec, learner_spec = plan.groups({QUEUES: []})  # each worker binds its own in-process queue
        factory = functools.partial(SegmentLearnerWorker, actor=actor_spec.factory, learner=learner_spec.factory,
                                    batch_size=args.batch_size or 1, pushes_per_batch=pushes_per_batch,
                                    optimizer=cfg.optimizer, lr=cfg.lr)
        return dataclasses.replace(plan, services=()), factory

    size = build("local")[0].initial_params().size
    print(f"gorila bench learner --algo {args.algo}: {args.env}, {size:,} parameters, "
          f"batches of {args.batch_size or 1} segment(s) of {cfg.unroll_length} steps x {cfg.envs_per_actor} envs, "
          f"1 torch thread per process, medians of {args.rounds} alternating rounds, {args.seconds:g} s per figure")
    where = ("applied by the learner, which owns its parameters, and published to 1 shard" if args.server == "learner"
             else "pushed to 1 parameter-server shard")
    print(f"  pipeline: the {args.algo} learner taking batches from a trajectory queue kept full, its gradients "
          f"{where} ({cfg.optimizer}, asynchronous)")
    print(f"  limit:    the same network, loss and batches; backward and a torch {cfg.optimizer} step in the "
          "learner's process")
    out = bench_dir(args.out, "learner")
    rows = learner_table(names, args.address, build, args.seconds, args.rounds, "samples", algo=args.algo,
                         server=args.server)
    write_bench_json(out, "learner", vars(args), rows, parameters=size)
    return 0
