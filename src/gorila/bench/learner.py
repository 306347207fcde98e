"""``gorila bench learner``: DQN learner updates/s through the parameter server vs a bare PyTorch loop
(``--algo impala|ppo``: learner samples/s, see :mod:`gorila.bench.segment_learner`); with
``--device cuda``, on the GPU, with and without copying the next minibatch ahead (``--device-copy``)."""

from __future__ import annotations

import copy
import functools
import time

import torch
from torch import nn

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.bench.sampling import (add_common_flags, bench_run_config, bundle_factory, check_common_flags,
                                   learner_table)
from gorila.cliargs import command_parser
from gorila.errors import ConfigError
from gorila.core import WorkerFactory
from gorila.learners.bundle import Bundle
from gorila.learners.device_copy import DEVICE_FIELDS
from gorila.nets.inputs import module_device
from gorila.losses.dqn import dqn_loss
from gorila.params import ParameterServer
from gorila.replay import Batch

# Distinct minibatches the limit cycles through: enough that it does not train on one batch only.
LIMIT_BATCHES = 16


class LearnerWorker:
    """The learner half of a real :class:`~gorila.learners.bundle.Bundle` (``Bundle.learn``:
    minibatches sampled from its replay on the prefetch thread, the double-Q gradient on the
    client's parameters, pushed without waiting for the reply, which brings fresh parameters by
    the next push), its replay first filled by ``fill`` transitions of its actor (ε = 1: random
    play); and, in the same process, the limit: the same network and loss trained by a local
    Adagrad step on minibatches already in the learner device's memory."""

    def __init__(self, worker_id: int, server: ParameterServer, *, bundle: WorkerFactory, fill: int):
        self.bundle: Bundle = bundle(worker_id, server)
        self.bundle.act(-(-fill // self.bundle.envs_per_actor))
        learner = self.bundle.learner
        self.device = module_device(learner.online)
        self.batches = [on_device(self.bundle.sample_batch(), self.device) for _ in range(LIMIT_BATCHES)]
        self.net = copy.deepcopy(learner.online)
        self.target = copy.deepcopy(learner.online)
        self.optimizer = torch.optim.Adagrad(self.net.parameters(), lr=0.01)

    def step(self) -> None:
        self.bundle.learn()

    def report(self) -> dict:
        return {"updates_pushed": self.bundle.pushes, "version": self.bundle.client.version}

    def pipeline_rate(self, seconds: float) -> float:
        """Pushed updates per second, the last push's reply included."""
        start, t0 = self.bundle.pushes, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.bundle.learn()
        self.bundle.client.complete()
        return (self.bundle.pushes - start) / (time.perf_counter() - t0)


    def limit_rate(self, seconds: float) -> float:
        learner = self.bundle.learner
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.optimizer.zero_grad()
            loss, _ = dqn_loss(self.net, self.target, self.batches[steps % LIMIT_BATCHES], learner.loss,
                               learner.target_kind)
            loss.backward()
            if learner.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(self.net.parameters(), learner.max_grad_norm)
            self.optimizer.step()
            steps += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the steps launched are counted once they have run
        return steps / (time.perf_counter() - t0)

    def close(self) -> None:
        self.bundle.close()


def on_device(batch: Batch, device: torch.device) -> Batch:
    """``batch`` with the arrays the loss reads as tensors on ``device``."""
    return batch._replace(**{name: torch.as_tensor(getattr(batch, name), device=device) for name in DEVICE_FIELDS})


def main(argv: list[str]) -> int:
    from gorila.algos.dqn.builder import make_plan
    from gorila.algos.dqn.config import DQNConfig
    from gorila.algos.rl_config import DEVICE_COPIES, RLConfig

    parser = command_parser("gorila bench learner", __doc__)
    parser.add_argument("--algo", default="dqn", choices=("dqn", "impala", "ppo"),
                        help="whose learner: dqn (updates/s) or impala / ppo (env steps learnt from per second)")
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id (ALE/Pong-v5: the Nature CNN)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"minibatch size (dqn) or segments per batch (impala, ppo) "
                             f"(default: {DQNConfig.batch_size} for dqn, 1 for impala and ppo)")
    parser.add_argument("--fill", type=int, default=5_000, help="dqn: transitions of random play in the replay")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="dqn: the learner's device")
    parser.add_argument("--server", default="process", choices=("process", "learner"),
                        help="impala, ppo: where the learner's updates are applied: process (pushed to a shard) or "
                             "learner (the learner owns its parameters and publishes them to the shard)")
    parser.add_argument("--device-copy", default="both", choices=(*DEVICE_COPIES, "both"),
                        help="dqn on cuda: the next minibatch copied ahead (async), when used (sync), or both in turn")
    add_common_flags(parser, seconds=10.0)
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    if args.batch_size is not None:
        validate.integer("batch_size", args.batch_size, low=1)
    if args.server != "process" and args.algo == "dqn":
        raise ConfigError("server", "learner is measured for --algo impala and ppo")
    if args.algo != "dqn":
        from gorila.bench import segment_learner

        return segment_learner.run(args, names)
    validate.integer("fill", args.fill, low=1)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda needs a GPU that torch can see; this machine has none")
    if args.device == "cuda" and names != ["local"]:
        names = ["local"]  # a Ray learner would need the cluster to place it on a GPU: measured in-process only
        print("gorila bench learner: --device cuda is measured on --runtime local")
    args.batch_size = args.batch_size or DQNConfig.batch_size
    cfg = DQNConfig(batch_size=args.batch_size, actors=1, replay_capacity=max(args.fill, DQNConfig.replay_capacity))
    copies = [None] if args.device == "cpu" else DEVICE_COPIES if args.device_copy == "both" else [args.device_copy]
    plans = {copy: make_plan(bench_run_config("local", None, args.seed), cfg,
                             RLConfig(env=args.env, device=args.device, device_copy=copy or "sync", inference="local"))
             for copy in copies}
    plan = next(iter(plans.values()))
    size = plan.initial_params().size
    print(f"gorila bench learner: {args.env}, {size:,} parameters ({size * 4 / 1e6:.2f} MB), batch "
          f"{cfg.batch_size}, learner on {args.device}, 1 torch thread per process, medians of {args.rounds} "
          f"alternating rounds, {args.seconds:g} s per figure")
    print(f"  pipeline: Bundle.learn: minibatches prefetched from a replay of {args.fill:,} transitions -> QLearner "
          f"{cfg.target}-Q gradient ({cfg.loss}, clip {cfg.max_grad_norm}) -> push to 1 parameter-server shard "
          f"(adagrad, asynchronous; the reply, with the new parameters, is collected at the next push)")
    print("  limit:    the same network, batch size and loss; zero_grad, backward, clip, torch Adagrad step in "
          "the learner's process, minibatches already in memory")
    if args.device == "cuda":
        print("  device copy: async = the next minibatch into pinned host memory and onto the GPU on a side stream "
              "while this one trains; sync = each array copied from pageable memory when the loss reads it")
    out = bench_dir(args.out, "learner")
    rows = []
    for copy, copy_plan in plans.items():
        if copy is not None:
            print(f"  --device-copy {copy}:")
        factory = functools.partial(LearnerWorker, bundle=bundle_factory(copy_plan), fill=args.fill)
        rows += learner_table(names, args.address, copy_plan, factory, args.seconds, args.rounds, "updates",
                              device=args.device, device_copy=copy)
    write_bench_json(out, "learner", vars(args), rows, parameters=size)
    return 0
