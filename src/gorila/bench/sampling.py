"""``gorila bench sampling``: the DQN actor pipeline's env steps/s vs the same envs stepped bare."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import HelpFormatter
from gorila.config import RunConfig
from gorila.core import WorkerFactory, WorkerGroup
from gorila.driver.plan import Plan
from gorila.envs import make_env
from gorila.learners.bundle import Bundle
from gorila.params import ParameterServer
from gorila.runtime import RUNTIMES, make_runtime


class SamplingWorker:
    """The actor half of a real :class:`~gorila.learners.bundle.Bundle` (``Bundle.act``: ε-greedy
    steps of its envs with one batched forward pass, every transition added to its replay,
    parameters reloaded every ``actor_refresh`` steps) and, in the same process, the limit: copies
    of the same envs stepped with random actions in a plain loop."""

    def __init__(self, worker_id: int, server: ParameterServer, *, bundle: WorkerFactory, env_id: str,
                 num_envs: int, seed: int):
        self.bundle: Bundle = bundle(worker_id, server)
        seed += 1000 * worker_id
        self.bare_envs = [make_env(env_id, seed=seed + 500 + i, training=True) for i in range(num_envs)]
        self.rng = np.random.default_rng(seed)

    def step(self) -> None:
        self.bundle.act(1)

    def report(self) -> dict:
        return {"env_steps": self.bundle.actor.env_steps}

    def pipeline_rate(self, seconds: float) -> float:
        """Transitions per second (an env's reset-only step makes none and is not counted)."""
        start, t0 = self.bundle.actor.env_steps, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.bundle.act(1)
        return (self.bundle.actor.env_steps - start) / (time.perf_counter() - t0)

    def limit_rate(self, seconds: float) -> float:
        """``env.step`` calls per second; an episode's end resets that env within the same step."""
        n_actions = int(self.bare_envs[0].action_space.n)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            # numpy integers, as the vectorised envs pass them (Discrete.contains checks them faster than ints)
            for env, action in zip(self.bare_envs, self.rng.integers(n_actions, size=len(self.bare_envs))):
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()
            steps += len(self.bare_envs)
        return steps / (time.perf_counter() - t0)

    def close(self) -> None:
        self.bundle.close()
        for env in self.bare_envs:
            env.close()


def bundle_factory(plan: Plan) -> WorkerFactory:
    """The bundle factory of a bundled-mode DQN plan: what ``gorila train`` would run."""
    (bundles,) = plan.groups({})
    return bundles.factory


@contextmanager
def placed_workers(runtime_name: str, address: str | None, plan: Plan, factory: WorkerFactory, count: int,
                   name: str) -> Iterator[WorkerGroup]:
    """``count`` workers and ``plan``'s parameter server, placed by the runtime ``runtime_name``; the
    workers are closed and the runtime shut down on exit."""
    runtime = make_runtime(runtime_name, address=address)
    try:
        runtime.plan(count + plan.spec.num_shards)
        shards = runtime.start_shards(plan.spec, plan.initial_params())
        group = runtime.start_workers(factory, count, shards.server, name=name)
        yield group
        group.call("close")  # in-process workers outlive the runtime otherwise
    finally:
        runtime.shutdown()


def bench_run_config(runtime: str, address: str | None, seed: int) -> RunConfig:
    """The run settings a benchmark's plan is built with: asynchronous, one shard."""
    return RunConfig(algo="dqn", mode="async", runtime=runtime, address=address, seed=seed)


def measure_interleaved(group: WorkerGroup, seconds: float, rounds: int) -> tuple[float, float]:
    """Median over ``rounds`` of the group's summed ``pipeline_rate`` and of its summed ``limit_rate``,
    taken in alternation so that load from elsewhere on the machine hits both alike."""
    round_s = seconds / rounds
    group.call("pipeline_rate", min(0.5, round_s))  # warm-up: first calls pay for page faults and caches
    group.call("limit_rate", min(0.5, round_s))
    pipeline, limit = [], []
    for _ in range(rounds):
        limit.append(sum(group.call("limit_rate", round_s)))
        pipeline.append(sum(group.call("pipeline_rate", round_s)))
    return float(np.median(pipeline)), float(np.median(limit))


def add_common_flags(parser: argparse.ArgumentParser, seconds: float) -> None:
    parser.add_argument("--seconds", type=float, default=seconds,
                        help="measuring time of each figure, per runtime, split into --rounds alternating rounds")
    parser.add_argument("--rounds", type=int, default=20,
                        help="alternating rounds; short ones keep load from elsewhere from hitting one figure only")
    parser.add_argument("--runtime", default="both", choices=[*RUNTIMES, "both"], help="where the workers run")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/<bench>-<time>)")


def check_common_flags(args: argparse.Namespace) -> list[str]:
    """Refuse bad measuring flags before anything starts; returns the runtimes to measure on."""
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    validate.integer("rounds", args.rounds, low=1)
    return list(RUNTIMES) if args.runtime == "both" else [args.runtime]


def main(argv: list[str]) -> int:
    from gorila.algos.dqn.builder import make_plan
    from gorila.algos.dqn.config import DQNConfig
    from gorila.driver.rl_config import RLConfig

    parser = argparse.ArgumentParser(prog="gorila bench sampling", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id")
    parser.add_argument("--actors", type=int, default=2, help="actor workers under the Ray runtime")
    parser.add_argument("--envs-per-actor", type=int, default=128,
                        help="envs each actor steps together (one forward pass per step of all of them)")
    add_common_flags(parser, seconds=5.0)
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    validate.integer("actors", args.actors, low=1)
    # Gymnasium envs on both sides: the limit steps the very env objects make_env builds.
    cfg = DQNConfig(envs_per_actor=args.envs_per_actor, actors=args.actors, env_backend="gymnasium")
    plan = make_plan(bench_run_config("local", None, args.seed), cfg, RLConfig(env=args.env))
    k = cfg.envs_per_actor
    factory = functools.partial(SamplingWorker, bundle=bundle_factory(plan), env_id=args.env, num_envs=k,
                                seed=args.seed)
    print(f"gorila bench sampling: {args.env}, {k} envs per actor, 1 torch thread per process, "
          f"medians of {args.rounds} alternating rounds, {args.seconds:g} s per figure")
    print(f"  pipeline: Bundle.act, ε-greedy (ε = {cfg.eps_start:g}, the schedule's start) with one forward pass "
          f"per step of its {k} envs, each transition added to its replay, parameters reloaded every "
          f"{cfg.actor_refresh} steps")
    print(f"  limit:    {k} copies of the same env stepped with random actions in a plain loop, in the same "
          f"process(es)")
    print("  counted:  env steps that yield a transition (the pipeline's reset-only steps are not counted)")
    print(f"{'runtime':>8} {'actors':>6} {'pipeline steps/s':>17} {'limit steps/s':>14} {'ratio':>6}")
    out = bench_dir(args.out, "sampling")
    rows = []
    for name in names:
        count = args.actors if name == "ray" else 1
        with placed_workers(name, args.address, plan, factory, count, "actor") as group:
            pipeline, limit = measure_interleaved(group, args.seconds, args.rounds)
        print(f"{name:>8} {count:>6} {pipeline:>17,.0f} {limit:>14,.0f} {pipeline / limit:>6.2f}")
        rows.append({"runtime": name, "actors": count, "steps_per_s": pipeline, "limit_steps_per_s": limit,
                     "ratio": pipeline / limit})
    write_bench_json(out, "sampling", vars(args), rows)
    return 0
