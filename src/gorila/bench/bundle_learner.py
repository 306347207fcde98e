"""``gorila bench learner --algo dqn``: the learner of Gorila DQN's bundle, its updates/s through the
parameter server (``--server process``) or on parameters it owns (``--server learner``), vs a bare
PyTorch loop on the same network, loss and minibatches; with ``--device cuda``, on the GPU, with
and without copying the next minibatch ahead (``--device-copy``)."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from gorila.agents.dqn.bundle import Bundle
from gorila.bench.bare_loop import BareQLoop, pushed_rate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.bench.sampling import bench_run_config, bundle_factory, learner_table, measured_learner
from gorila.core import WorkerFactory
from gorila.driver.plan import Plan
from gorila.learners.q_learner import QLearner
from gorila.params import ParameterServer
from gorila.params.owned import PublishingWorker
from gorila.types import Batch

# Distinct minibatches the limit cycles through: enough that it does not train on one batch only.
LIMIT_BATCHES = 16


class LearnerWorker:
    """The learner half of a real :class:`~gorila.agents.dqn.bundle.Bundle` (``Bundle.learn``: a
    minibatch from its replay, the double-Q gradient on the client's parameters, pushed to the
    server without waiting for the reply, or, under ``--server learner``, applied where it is
    computed and published to the store), its replay first filled by ``fill`` transitions of its
    actor (ε = 1: random play); and, in the same process, the limit (:class:`BareQLoop`) on
    minibatches of the same replay::

        worker = LearnerWorker(0, server, bundle=bundle_factory(plan), fill=5_000, optimizer="adam", lr=1e-3)
        worker.pipeline_rate(1.0), worker.limit_rate(1.0)     # updates per second
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, bundle: WorkerFactory, fill: int,
                 optimizer: str, lr: float):
        # --server learner wraps the bundle in a PublishingWorker: its pushes are applied and published in-process
        self.worker = bundle(worker_id, server)
        self.bundle = measured_learner(self.worker, Bundle)
        self.bundle.act(-(-fill // self.bundle.envs_per_actor))
        batches: list[Batch] = [self.bundle.sample_batch() for _ in range(LIMIT_BATCHES)]
        assert isinstance(self.bundle.learner, QLearner)
        self.limit = BareQLoop(self.bundle.learner, batches, optimizer, lr)

    def step(self) -> None:
        self.bundle.learn()
        if isinstance(self.worker, PublishingWorker):  # each learn taken as a step's end: the strictest publication
            self.worker.published_after(True)

    def report(self) -> dict[str, Any]:
        return self.worker.report()

    def pipeline_rate(self, seconds: float) -> float:
        """Pushed updates per second, the last push's reply included."""
        return pushed_rate(self.bundle, self.step, seconds)

    def limit_rate(self, seconds: float) -> float:
        return self.limit.rate(seconds)

    def close(self) -> None:
        self.bundle.close()


def run(args: argparse.Namespace, names: list[str]) -> int:
    """The benchmark of DQN's bundle learner on each runtime of ``names``."""
    from gorila.agents.dqn.builder import make_plan
    from gorila.agents.dqn.config import DQNConfig
    from gorila.agents.rl_config import DEVICE_COPIES, RLConfig

    if args.device == "cuda" and names != ["local"]:
        names = ["local"]  # a Ray learner would need the cluster to place it on a GPU: measured in-process only
        print("gorila bench learner: --device cuda is measured on --runtime local")
    batch_size = args.batch_size or DQNConfig.batch_size
    cfg = DQNConfig(batch_size=batch_size, actors=1, replay_capacity=max(args.fill, DQNConfig.replay_capacity))
    copies = [None] if args.device == "cpu" else DEVICE_COPIES if args.device_copy == "both" else [args.device_copy]

    def build(copy: str | None, runtime: str) -> tuple[Plan, WorkerFactory]:
        plan = make_plan(bench_run_config(runtime, None, args.seed, "dqn", args.server), cfg,
                         RLConfig(env=args.env, device=args.device, device_copy=copy or "sync", inference="local"))
        return plan, functools.partial(LearnerWorker, bundle=bundle_factory(plan), fill=args.fill,
                                       optimizer=plan.spec.optimizer, lr=cfg.lr)

    plan = build(copies[0], "local")[0]
    size, optimizer = plan.initial_params().size, plan.spec.optimizer
    print(f"gorila bench learner --algo dqn: {args.env}, {size:,} parameters ({size * 4 / 1e6:.2f} MB), batch "
          f"{batch_size}, learner on {args.device}, 1 torch thread per process, medians of {args.rounds} "
          f"alternating rounds, {args.seconds:g} s per figure")
    where = (f"applied by the bundle, which owns its parameters and its {optimizer} (lr {cfg.lr:g}, numpy or torch "
             "on the flat vector), and published to 1 shard after each update" if args.server == "learner" else
             f"pushed to 1 parameter-server shard ({optimizer}, lr {cfg.lr:g}, asynchronous; the reply, with the new "
             "parameters, is collected at the next push)")
    print(f"  pipeline: Bundle.learn: a minibatch sampled from a replay of {args.fill:,} transitions of random play "
          f"-> QLearner {cfg.target}-Q gradient ({cfg.loss}, clip {cfg.max_grad_norm}) on the parameters copied "
          f"into its network -> {where}")
    print(f"  limit:    the same network, loss and batch size on {LIMIT_BATCHES} minibatches of that replay already "
          f"in the learner's memory; zero_grad, backward, clip, torch {optimizer} step (lr {cfg.lr:g}) in the "
          "learner's process")
    if args.device == "cuda":
        print("  device copy: async = the next minibatch into pinned host memory and onto the GPU on a side stream "
              "while this one trains; sync = each array copied from pageable memory when the loss reads it")
    out = bench_dir(args.out, "learner")
    rows = []
    for copy in copies:
        if copy is not None:
            print(f"  --device-copy {copy}:")
        rows += learner_table(names, args.address, functools.partial(build, copy), args.seconds, args.rounds, "updates",
                              algo="dqn", server=args.server, device=args.device, device_copy=copy)
    write_bench_json(out, "learner", vars(args), rows, parameters=size)
    return 0
