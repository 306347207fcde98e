"""``gorila bench apex``: the Ape-X learner's updates/s in the whole pipeline (actors, prioritized
replay shards, parameter server) vs the same network and batch trained by a bare PyTorch loop in the
learner's own process, measured in alternation."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.bench.sampling import measured_learner
from gorila.cliargs import command_parser
from gorila.core import WorkerFactory
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.losses.dqn import dqn_loss
from gorila.params import ParameterServer
from gorila.types import Batch

# Minibatches the bare loop cycles through, taken from the pipeline's own replay.
LIMIT_BATCHES = 16


class PipelineLearner:
    """The pipeline's real :class:`ReplayLearner` and, in the same process, the limit: its network
    copied, trained with a local Adam step on minibatches already in memory."""

    def __init__(self, worker_id: int, server: ParameterServer, *, learner: WorkerFactory):
        self.learner = measured_learner(learner(worker_id, server), ReplayLearner)
        self.batches: list[Batch] = []

    def step(self) -> bool:
        return self.learner.step()

    def report(self) -> dict[str, Any]:
        return self.learner.report()

    def limit_rate(self, seconds: float) -> float:
        """Updates per second of the bare loop."""
        q = self.learner.learner
        assert isinstance(q, QLearner)  # Ape-X's replay learner trains a Q-learner
        while len(self.batches) < LIMIT_BATCHES:  # the pipeline's own minibatches
            _, batch = self.learner._next_batch()
            if batch is not None:
                self.batches.append(batch)
        net, target = copy.deepcopy(q.online), copy.deepcopy(q.online)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            optimizer.zero_grad()
            loss, _ = dqn_loss(net, target, self.batches[steps % LIMIT_BATCHES], q.loss, q.target_kind)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            if q.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(net.parameters(), q.max_grad_norm)
            optimizer.step()
            steps += 1
        return steps / (time.perf_counter() - t0)


def main(argv: list[str]) -> int:
    import functools

    from gorila.agents.apex.builder import make_plan
    from gorila.agents.apex.config import ApexConfig
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig
    from gorila.runtime import make_runtime

    parser = command_parser("gorila bench apex", __doc__)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id (ALE/Pong-v5: the Nature CNN)")
    parser.add_argument("--actors", type=int, default=2, help="actors")
    parser.add_argument("--batch-size", type=int, default=64, help="minibatch size")
    parser.add_argument("--samples-per-insert", type=float, default=8.0, help="the replay's rate limiter")
    parser.add_argument("--prefetch", type=int, default=ApexConfig.prefetch, help="minibatches per replay request")
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring time of each figure, over --rounds")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (pipeline, then the bare loop)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="the learner's device")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/apex-<time>)")
    args = parser.parse_args(argv)
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    validate.integer("rounds", args.rounds, low=1)
    cfg = ApexConfig(actors=args.actors, batch_size=args.batch_size, samples_per_insert=args.samples_per_insert,
                     prefetch=args.prefetch)
    run = RunConfig(algo="apex", runtime="ray", address=args.address)
    plan = make_plan(run, cfg, RLConfig(env=args.env, device=args.device))
    out = bench_dir(args.out, "apex")
    runtime = make_runtime("ray", args.address)
    try:
        runtime.plan(plan.processes + 1)
        shards = runtime.start_shards(plan.spec, plan.initial_params())
        services = {s.name: runtime.start_services(s.factory, s.count, name=s.name) for s in plan.services}
        actor_spec, learner_spec = plan.groups({n: g.endpoints() for n, g in services.items()})
        actors = runtime.start_workers(actor_spec.factory, actor_spec.count, shards.server, name="actor",
                                       nice=actor_spec.nice)
        learner = runtime.start_workers(functools.partial(PipelineLearner, learner=learner_spec.factory), 1,
                                        shards.server, name="learner")
        while sum(s["size"] for s in services["replay"].call("stats")) < cfg.learning_starts:
            actors.run_steps(10)
        round_s = args.seconds / args.rounds
        pipeline, limit, waits, per_cpu = [], [], [], []
        for _ in range(args.rounds):
            before = learner.reports()[0]
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < round_s:  # actors and learner run together
                pending = actors.start_steps(5) + learner.start_steps(20)
                for p in pending:
                    p.result(600)
            after = learner.reports()[0]
            elapsed = time.perf_counter() - t0
            pipeline.append((after["updates_pushed"] - before["updates_pushed"]) / elapsed)
            waits.append((after["learner_wait_s"] - before["learner_wait_s"]) / max(
                after["learner_time_s"] - before["learner_time_s"], 1e-9))
            per_cpu.append((after["updates_pushed"] - before["updates_pushed"]) / max(
                after["cpu_s"] - before["cpu_s"], 1e-9))
            limit.append(learner.call("limit_rate", round_s)[0])
    finally:
        runtime.shutdown()
    rate, bare = float(np.median(pipeline)), float(np.median(limit))
    print(f"gorila bench apex: {args.env}, {args.actors} actors, batch {args.batch_size}, samples per insert "
          f"{args.samples_per_insert:g}, medians of {args.rounds} alternating rounds of {round_s:g} s")
    cpu_rate = float(np.median(per_cpu))
    print(f"  pipeline learner {rate:9,.1f} updates/s  (waiting for minibatches {np.median(waits):.0%} of its time; "
          f"{cpu_rate:,.0f} updates per CPU-second of its process: it got {rate / cpu_rate:.0%} of a core)")
    print(f"  bare loop        {bare:9,.1f} updates/s  (same network, batch and loss; in the learner's process)")
    print(f"  ratio            {rate / bare:9.2f}")
    write_bench_json(out, "apex", vars(args), [{"updates_per_s": rate, "limit_updates_per_s": bare,
                                                "ratio": rate / bare, "wait_fraction": float(np.median(waits)),
                                                "updates_per_cpu_s": cpu_rate, "cpu_share": rate / cpu_rate}])
    return 0
